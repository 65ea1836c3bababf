/**
 * The graph module's public face: the service that projects the registry into the Agent Security Graph and
 * answers its traversals (for a job or another module that wants the graph brought up to date), and its shapes.
 */
export { GraphService } from './graph.service.js';
export { nodeId } from './graph.model.js';
export { EDGE_KINDS, NODE_KINDS, RISK_LEVELS, type EdgeKind, type GraphEdgeOut, type GraphNodeOut, type NodeKind, type RebuildOut } from './graph.schemas.js';
