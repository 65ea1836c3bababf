import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { CLASSIFICATION } from '../shared/index.js';

/** The kinds of node, in the order listings sort them (docs/risk-and-graph.md, "Node kinds"). */
export const NODE_KINDS = [
  'agent',
  'tool',
  'mcp_server',
  'model',
  'api_resource',
  'data_resource',
  'credential_ref',
  'workload_identity',
  'delegation_principal',
  'owner',
] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

/** The kinds of edge (docs/risk-and-graph.md, "Edge kinds"). */
export const EDGE_KINDS = [
  'uses_tool',
  'uses_server',
  'hosted_on',
  'reads_resource',
  'writes_resource',
  'uses_credential',
  'runs_model',
  'acts_for',
  'owned_by',
  'has_identity',
] as const;
export type EdgeKind = (typeof EDGE_KINDS)[number];

export const RISK_LEVELS = ['low', 'medium', 'high', 'critical'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

/** The graph's own limit on nodes in one answer (behaviour.md, Limits: graph `limit` default 2000). */
export const GRAPH_LIMIT = 2000;
export const MAX_DEPTH = 5;

const sourceRecord = z
  .object({
    table: z.string().describe('the registry table the node or edge is projected from'),
    id: z.string().describe("the row's id (for a delegation principal or an owner: the oldest row naming them)"),
  })
  .describe('the registry record this was projected from');

export const graphNodeOut = z.object({
  id: z.uuid().describe('stable: derived from the organisation, the kind and the source record, the same at every point in time'),
  kind: z.enum(NODE_KINDS),
  key: z.string().describe("what identifies it in the registry: the record's id; a principal's reference; an owner's email in lower case"),
  label: z.string(),
  risk_level: z.enum(RISK_LEVELS).describe('agents: their risk band (their criticality until scored); other kinds: derived, docs/risk-and-graph.md'),
  source_record: sourceRecord,
  attributes: z.record(z.string(), z.unknown()).describe('what the graph shows of the record (kind by kind, docs/risk-and-graph.md)'),
  valid_from: timestamp.describe('since when the node has looked like this'),
  valid_to: timestamp.nullable().describe('until when (exclusive); null while current'),
});
export type GraphNodeOut = z.infer<typeof graphNodeOut>;

export const graphEdgeOut = z.object({
  id: z.uuid(),
  kind: z.enum(EDGE_KINDS),
  from: z.uuid().describe('the node the edge leaves'),
  to: z.uuid().describe('the node it reaches'),
  source_record: sourceRecord,
  attributes: z.record(z.string(), z.unknown()),
  expires_at: timestamp.nullable().describe('a binding or delegation that expires: the edge counts only before then'),
  valid_from: timestamp,
  valid_to: timestamp.nullable(),
});
export type GraphEdgeOut = z.infer<typeof graphEdgeOut>;

/** A node named in a traversal's answer: enough to show it, its full record is GET /graph/nodes/{id}. */
export const nodeRef = z.object({
  id: z.uuid(),
  kind: z.enum(NODE_KINDS),
  label: z.string(),
  risk_level: z.enum(RISK_LEVELS),
});
export type NodeRef = z.infer<typeof nodeRef>;

const countsByKind = z.record(z.string(), z.number().int()).describe('nodes by kind');

/** When the answer describes the graph: `at` as asked (null: now) and the projection it read. */
const asOf = {
  at: timestamp.nullable().describe('the point in time asked for; null: the current graph'),
  version: z.string().describe("the organisation's graph version the projection had reached"),
};

// Requests

/** Times the database stores: from 1970 (before any graph) to the end of year 9999. */
const EARLIEST = Date.UTC(1970, 0, 1);
const LATEST = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const atQuery = timestamp
  .refine((v) => Date.parse(v) >= EARLIEST && Date.parse(v) <= LATEST, 'a time from 1970 to 9999')
  .optional()
  .describe('a point in time: answers the graph as it was then (default: now)');

/** A comma-separated list of values of `values` (also accepted as a repeated parameter); unknown ones answer 422. */
const listOf = <T extends readonly [string, ...string[]]>(values: T, what: string) =>
  z
    .union([z.string().max(1000), z.array(z.string().max(100)).max(50)])
    .transform((given, ctx) => {
      const items = (Array.isArray(given) ? given : [given]).flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean);
      const unknown = items.filter((i) => !(values as readonly string[]).includes(i));
      if (unknown.length > 0) {
        ctx.addIssue({ code: 'custom', message: `unknown ${what} ${unknown.join(', ')}; one of ${values.join(', ')}` });
        return z.NEVER;
      }
      return [...new Set(items)] as Array<T[number]>;
    })
    .optional()
    .describe(`comma-separated ${what}s, any of: ${values.join(', ')}`);

export const graphQuery = z.object({
  kinds: listOf(NODE_KINDS, 'kind'),
  q: z.string().max(200).optional().describe('searches labels and keys, case-insensitively'),
  risk_levels: listOf(RISK_LEVELS, 'risk level'),
  at: atQuery,
  limit: z.coerce.number().int().min(1).max(10_000).default(GRAPH_LIMIT).describe('most nodes in the answer'),
});
export type GraphQuery = z.output<typeof graphQuery>;

export const atOnly = z.object({ at: atQuery });
export const nodeParams = z.object({ node_id: z.uuid() });
export const agentParams = z.object({ agent_id: z.uuid() });

export const neighboursQuery = z.object({
  depth: z.coerce.number().int().min(1).max(MAX_DEPTH).default(1).describe(`hops from the node, 1-${MAX_DEPTH}, either direction`),
  at: atQuery,
});

const booleanText = z.enum(['true', 'false']).default('false').transform((v) => v === 'true');

export const pathQuery = z.object({
  source: z.uuid().describe('node id'),
  target: z.uuid().describe('node id'),
  directed: booleanText.describe('follow edges only in their direction (default: either way)'),
  at: atQuery,
});

export const exportQuery = z.object({
  format: z.enum(['json', 'csv']).default('json'),
  part: z.enum(['nodes', 'edges']).default('nodes'),
  at: atQuery,
});

// Answers

export const graphOut = z.object({
  ...asOf,
  nodes: z.array(graphNodeOut).describe('sorted by kind (in the order of the kinds), label and id'),
  edges: z.array(graphEdgeOut).describe('the edges between the nodes answered'),
  total_nodes: z.number().int().describe('nodes matching the filters, before `limit`'),
  truncated: z.boolean().describe('more nodes matched than `limit`'),
});

export const nodeOut = z.object({
  ...asOf,
  node: graphNodeOut,
  degree: z.object({
    in: z.record(z.string(), z.number().int()).describe('edges reaching the node, by kind'),
    out: z.record(z.string(), z.number().int()).describe('edges leaving the node, by kind'),
  }),
});

/** An edge named in a traversal's answer: its full record is in GET /graph and the export. */
export const edgeRef = z.object({ id: z.uuid(), kind: z.enum(EDGE_KINDS), from: z.uuid(), to: z.uuid() });

export const neighboursOut = z.object({
  ...asOf,
  node_id: z.uuid(),
  depth: z.number().int(),
  nodes: z
    .array(nodeRef.extend({ depth: z.number().int().describe('hops from the node') }))
    .describe('nearest first, then by kind and label; each node in full is GET /graph/nodes/{id}'),
  edges: z.array(edgeRef).describe('the edges between the nodes answered'),
  truncated: z.boolean().describe(`more than ${GRAPH_LIMIT} nodes lie within the depth; the nearest are answered`),
});

export const pathOut = z.object({
  ...asOf,
  source: z.uuid(),
  target: z.uuid(),
  directed: z.boolean(),
  found: z.boolean(),
  length: z.number().int().nullable().describe('edges on the path; null when none'),
  nodes: z.array(graphNodeOut).describe('source to target, in order'),
  edges: z.array(graphEdgeOut).describe('the edge taken between each two nodes, in order'),
});

const reached = nodeRef.extend({
  depth: z.number().int().describe('hops from the node asked about'),
  path: z.array(z.uuid()).describe('the node ids of one shortest way there, from the node asked about'),
});

export const accessOut = z.object({
  ...asOf,
  node: nodeRef,
  reachable: z.array(
    reached.extend({
      via: z.array(z.enum(EDGE_KINDS)).describe('the kinds of edge it is reached by'),
      access: z.array(z.enum(['read', 'write'])).describe('data and API resources: read, write or both'),
    }),
  ),
  total: z.number().int(),
  truncated: z.boolean().describe(`more than ${GRAPH_LIMIT} nodes are reachable; the nearest are listed, the counts cover all`),
  counts_by_kind: countsByKind,
  most_sensitive_classification: z.enum(CLASSIFICATION).nullable().describe('of the data resources reached'),
});

export const blastRadiusOut = z.object({
  ...asOf,
  node: nodeRef,
  affected: z.array(
    nodeRef.extend({
      depth: z.number().int().describe('hops from the node asked about'),
      parent: z.uuid().describe('the node it is affected through; following parents leads back to the node asked about'),
      impact: z
        .enum(['control', 'reach'])
        .describe('control: an attacker acts as this node; reach: an attacker can use or read or change it, not act as it'),
    }),
  ),
  total: z.number().int(),
  truncated: z.boolean().describe(`more than ${GRAPH_LIMIT} nodes are affected; the nearest are listed, the counts cover all`),
  counts_by_kind: countsByKind,
  controlled_agents: z.number().int().describe('agents an attacker could steer'),
  most_sensitive_classification: z.enum(CLASSIFICATION).nullable().describe('of the data resources affected'),
  sensitive_data: z.array(nodeRef).describe('the regulated and restricted data resources affected'),
});

export const highRiskPathsOut = z.object({
  ...asOf,
  patterns: z.array(
    z.object({
      key: z.string(),
      title: z.string(),
      severity: z.enum(RISK_LEVELS),
      description: z.string(),
      count: z.number().int().describe('matches in the whole graph'),
      truncated: z.boolean(),
      matches: z.array(
        z.object({
          summary: z.string(),
          nodes: z.array(nodeRef).describe('the nodes of the match, the agent (or the start) first'),
          edges: z.array(edgeRef).describe('the edges that make the path'),
        }),
      ),
    }),
  ),
});

export const agentGraphOut = z.object({
  ...asOf,
  agent: graphNodeOut,
  nodes: z.array(graphNodeOut).describe('the agent, its direct neighbours and everything it can reach'),
  edges: z.array(graphEdgeOut).describe('the edges between those nodes'),
});

export const exportJsonOut = z.object({
  ...asOf,
  part: z.enum(['nodes', 'edges']),
  items: z.array(z.union([graphNodeOut, graphEdgeOut])),
});

export const rebuildOut = z.object({
  version: z.string().describe('the graph version projected'),
  projection_id: z.uuid().describe('new on every rebuild: every API process reloads its in-memory graph'),
  nodes: z.number().int().describe('current nodes'),
  edges: z.number().int().describe('current edges'),
  changes: z.object({
    nodes_added: z.number().int(),
    nodes_changed: z.number().int(),
    nodes_removed: z.number().int(),
    edges_added: z.number().int(),
    edges_changed: z.number().int(),
    edges_removed: z.number().int(),
  }),
  duration_ms: z.number().int(),
});
export type RebuildOut = z.infer<typeof rebuildOut>;
