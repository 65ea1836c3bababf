import { MultiDirectedGraph } from 'graphology';
import { bidirectional } from 'graphology-shortest-path/unweighted.js';
import { bfsFromNode } from 'graphology-traversal';
import type { CLASSIFICATION } from '../shared/index.js';
import { CLASSIFICATION_RANK } from './graph.model.js';
import { EDGE_KINDS, GRAPH_LIMIT, NODE_KINDS, type EdgeKind, type GraphEdgeOut, type GraphNodeOut, type NodeKind, type NodeRef, type RiskLevel } from './graph.schemas.js';

/**
 * One organisation's graph at one point in time, in memory (graphology), and every traversal the API answers.
 * Pure: built from the rows the repository read, it reads nothing else. The current graph of an organisation is
 * kept per process (graph.service.ts); a past one is built for its request.
 */

type Classification = (typeof CLASSIFICATION)[number];

export type MemoryGraph = MultiDirectedGraph<GraphNodeOut, GraphEdgeOut>;

export interface ViewMeta {
  /** The point in time asked for; null: now. */
  at: Date | null;
  /** The graph version the projection had reached. */
  version: string;
  /** The projection the rows come from (graph_state.projection_id). */
  projectionId: string;
}

export class GraphView {
  readonly graph: MemoryGraph = new MultiDirectedGraph<GraphNodeOut, GraphEdgeOut>();
  /** The first moment after `asOf` at which an edge of the rows expires: the view is stale from then on. */
  readonly nextExpiry: number;

  /**
   * `asOf`: the time edges are judged at; an edge whose binding or delegation expired by then is left out.
   */
  constructor(
    readonly meta: ViewMeta,
    nodes: Iterable<GraphNodeOut>,
    edges: Iterable<GraphEdgeOut>,
    asOf: Date,
  ) {
    for (const n of nodes) this.graph.addNode(n.id, n);
    let next = Number.POSITIVE_INFINITY;
    const now = asOf.getTime();
    for (const e of edges) {
      if (e.expires_at) {
        const t = Date.parse(e.expires_at);
        if (t <= now) continue;
        if (t < next) next = t;
      }
      // The projection never writes an edge without both ends; a torn read would, so skip rather than fail.
      if (this.graph.hasNode(e.from) && this.graph.hasNode(e.to)) this.graph.addEdgeWithKey(e.id, e.from, e.to, e);
    }
    this.nextExpiry = next;
  }

  node(id: string): GraphNodeOut | undefined {
    return this.graph.hasNode(id) ? this.graph.getNodeAttributes(id) : undefined;
  }

  private adjacency: { out: Map<string, GraphEdgeOut[]>; in: Map<string, GraphEdgeOut[]> } | undefined;

  /**
   * Each node's edges out and in, as plain arrays, built on first use: the wide traversals (blast radius, the
   * high-risk patterns, the edges among a set of nodes) walk these rather than graphology's per-node iterators,
   * several times faster.
   */
  edgesOf(node: string, direction: 'out' | 'in'): readonly GraphEdgeOut[] {
    if (!this.adjacency) {
      const out = new Map<string, GraphEdgeOut[]>();
      const into = new Map<string, GraphEdgeOut[]>();
      this.graph.forEachEdge((_e, edge) => {
        let o = out.get(edge.from);
        if (!o) out.set(edge.from, (o = []));
        o.push(edge);
        let i = into.get(edge.to);
        if (!i) into.set(edge.to, (i = []));
        i.push(edge);
      });
      this.adjacency = { out, in: into };
    }
    return this.adjacency[direction].get(node) ?? [];
  }

}

const KIND_ORDER = new Map<string, number>(NODE_KINDS.map((k, i) => [k, i]));
const EDGE_ORDER = new Map<string, number>(EDGE_KINDS.map((k, i) => [k, i]));

export const refOf = (n: GraphNodeOut): NodeRef => ({ id: n.id, kind: n.kind, label: n.label, risk_level: n.risk_level });
export const edgeRefOf = (e: GraphEdgeOut) => ({ id: e.id, kind: e.kind, from: e.from, to: e.to });

/** Listing order: kind (in the order of the kinds), label, id. */
export const byKindLabel = (a: GraphNodeOut | NodeRef, b: GraphNodeOut | NodeRef) =>
  (KIND_ORDER.get(a.kind)! - KIND_ORDER.get(b.kind)!) || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Sorted by depth, kind (in the order of the kinds), label and id; the keys worked out once per item. */
function nearestFirst<T extends { depth: number; kind: NodeKind; label: string; id: string }>(items: T[]): T[] {
  const keyed = items.map((x) => ({ x, k: x.depth * 16 + KIND_ORDER.get(x.kind)! }));
  keyed.sort((a, b) => a.k - b.k || (a.x.label < b.x.label ? -1 : a.x.label > b.x.label ? 1 : a.x.id < b.x.id ? -1 : 1));
  return keyed.map((e) => e.x);
}

/** The edges of the view between nodes of `ids`, in the order of `ids`. */
export function edgesAmong(view: GraphView, ids: Iterable<string>): GraphEdgeOut[] {
  const set = ids instanceof Set ? (ids as Set<string>) : new Set(ids);
  const out: GraphEdgeOut[] = [];
  for (const id of set) for (const e of view.edgesOf(id, 'out')) if (set.has(e.to)) out.push(e);
  return out;
}

function countByKind(nodes: Iterable<{ kind: NodeKind }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const n of nodes) counts[n.kind] = (counts[n.kind] ?? 0) + 1;
  return counts;
}

function mostSensitive(nodes: Iterable<GraphNodeOut>): Classification | null {
  let best: Classification | null = null;
  for (const n of nodes) {
    if (n.kind !== 'data_resource') continue;
    const c = n.attributes.classification as Classification | null;
    if (c && (best === null || (CLASSIFICATION_RANK[c] ?? -1) > (CLASSIFICATION_RANK[best] ?? -1))) best = c;
  }
  return best;
}

// GET /graph

export interface ListFilters {
  kinds?: NodeKind[];
  risk_levels?: RiskLevel[];
  q?: string;
  limit: number;
}

export function listGraph(view: GraphView, f: ListFilters) {
  const kinds = f.kinds?.length ? new Set<string>(f.kinds) : null;
  const levels = f.risk_levels?.length ? new Set<string>(f.risk_levels) : null;
  const q = f.q?.trim().toLowerCase() || null;
  const matching: GraphNodeOut[] = [];
  view.graph.forEachNode((_id, n) => {
    if (kinds && !kinds.has(n.kind)) return;
    if (levels && !levels.has(n.risk_level)) return;
    if (q && !n.label.toLowerCase().includes(q) && !n.key.toLowerCase().includes(q)) return;
    matching.push(n);
  });
  matching.sort(byKindLabel);
  const nodes = matching.slice(0, f.limit);
  return { nodes, edges: edgesAmong(view, nodes.map((n) => n.id)), total_nodes: matching.length, truncated: matching.length > f.limit };
}

// GET /graph/nodes/{id}

export function nodeDegree(view: GraphView, id: string) {
  const degree = { in: {} as Record<string, number>, out: {} as Record<string, number> };
  view.graph.forEachInEdge(id, (_e, a) => void (degree.in[a.kind] = (degree.in[a.kind] ?? 0) + 1));
  view.graph.forEachOutEdge(id, (_e, a) => void (degree.out[a.kind] = (degree.out[a.kind] ?? 0) + 1));
  return degree;
}

// GET /graph/nodes/{id}/neighbours

/** The nodes within `depth` hops of `id`, either direction, nearest first; at most `limit` of them. */
export function neighbours(view: GraphView, id: string, depth: number, limit = GRAPH_LIMIT) {
  const found = new Map<string, number>();
  let truncated = false;
  bfsFromNode(
    view.graph,
    id,
    (node, _attrs, d) => {
      if (found.size >= limit) {
        truncated = true;
        return true;
      }
      found.set(node, d);
      return d >= depth;
    },
    { mode: 'directed' },
  );
  const nodes = [...found]
    .map(([n, d]) => ({ node: view.graph.getNodeAttributes(n), depth: d }))
    .sort((a, b) => a.depth - b.depth || byKindLabel(a.node, b.node))
    .map(({ node, depth: d }) => ({ ...refOf(node), depth: d }));
  return { nodes, edges: edgesAmong(view, found.keys()).map(edgeRefOf), truncated };
}

// GET /graph/path

/** A shortest path from `source` to `target` (node ids), following edges in their direction or either way. */
export function shortestPath(view: GraphView, source: string, target: string, directed: boolean): string[] | null {
  if (directed) return bidirectional(view.graph, source, target);
  return undirectedBidirectional(view.graph, source, target);
}

/**
 * graphology-shortest-path's bidirectional search follows edges in their direction on a directed graph; the
 * same search over a directed graph's edges taken either way is this one.
 */
function undirectedBidirectional(graph: MemoryGraph, source: string, target: string): string[] | null {
  if (source === target) return [source];
  const fromSource = new Map<string, string | null>([[source, null]]);
  const fromTarget = new Map<string, string | null>([[target, null]]);
  let forward = [source];
  let backward = [target];
  let meet: string | null = null;
  while (forward.length > 0 && backward.length > 0 && meet === null) {
    const expandForward = forward.length <= backward.length;
    const [fringe, mine, theirs] = expandForward ? [forward, fromSource, fromTarget] : [backward, fromTarget, fromSource];
    const next: string[] = [];
    for (const node of fringe) {
      graph.forEachNeighbor(node, (neighbour) => {
        if (meet !== null || mine.has(neighbour)) return;
        mine.set(neighbour, node);
        if (theirs.has(neighbour)) meet = neighbour;
        else next.push(neighbour);
      });
      if (meet !== null) break;
    }
    if (expandForward) forward = next;
    else backward = next;
  }
  if (meet === null) return null;
  const path: string[] = [];
  for (let n: string | null = meet; n !== null; n = fromSource.get(n) ?? null) path.unshift(n);
  for (let n = fromTarget.get(meet) ?? null; n !== null; n = fromTarget.get(n) ?? null) path.push(n);
  return path;
}

/** The edge taken between each two nodes of a path: the first by kind order, then id. */
export function edgesOfPath(view: GraphView, path: string[], directed: boolean): GraphEdgeOut[] {
  const out: GraphEdgeOut[] = [];
  for (let i = 0; i + 1 < path.length; i++) {
    const [a, b] = [path[i]!, path[i + 1]!];
    const candidates = [...view.graph.edges(a, b), ...(directed ? [] : view.graph.edges(b, a))].map((e) => view.graph.getEdgeAttributes(e));
    candidates.sort((x, y) => EDGE_ORDER.get(x.kind)! - EDGE_ORDER.get(y.kind)! || (x.id < y.id ? -1 : 1));
    out.push(candidates[0]!);
  }
  return out;
}

// Traversals by rule: access and blast radius

interface Reach {
  depth: number;
  parent: string | null;
}

function pathTo(reached: Map<string, Reach>, id: string): string[] {
  const path: string[] = [];
  for (let n: string | null = id; n !== null; n = reached.get(n)?.parent ?? null) path.unshift(n);
  return path;
}

/** The edges an agent's authority follows, in their direction (docs/risk-and-graph.md, "Access"). */
export const ACCESS_EDGES: ReadonlySet<EdgeKind> = new Set([
  'uses_tool',
  'uses_server',
  'hosted_on',
  'reads_resource',
  'writes_resource',
  'uses_credential',
  'runs_model',
  'acts_for',
  'has_identity',
]);

/** Whether an edge grants passage: not into a blocked tool, not under a binding pinned to a changed tool definition. */
const passes = (edge: GraphEdgeOut, to: GraphNodeOut) => !(to.kind === 'tool' && to.attributes.blocked === true) && edge.attributes.definition_changed !== true;

/**
 * What `id` can reach: its bindings' tools, servers and resources; the servers its tools run on; the resources
 * and credentials its tools use; its model, the principals it acts for, its identities. A server bound directly
 * opens every tool on it. Blocked tools and bindings whose tool definition changed lead nowhere.
 */
export function access(view: GraphView, id: string, limit = GRAPH_LIMIT) {
  const g = view.graph;
  const reached = new Map<string, Reach>([[id, { depth: 0, parent: null }]]);
  const via = new Map<string, Set<EdgeKind>>();
  const opened = new Set<string>();
  const queue: Array<{ node: string; grant: boolean }> = [{ node: id, grant: false }];
  const visit = (from: string, to: string, kind: EdgeKind, grant: boolean) => {
    let v = via.get(to);
    if (!v) via.set(to, (v = new Set()));
    v.add(kind);
    if (!reached.has(to)) {
      reached.set(to, { depth: reached.get(from)!.depth + 1, parent: from });
      queue.push({ node: to, grant });
    } else if (grant && !opened.has(to)) {
      queue.push({ node: to, grant });
    }
  };
  for (let i = 0; i < queue.length; i++) {
    const { node, grant } = queue[i]!;
    if (grant) {
      // A server granted as a whole: every tool it hosts, once.
      if (opened.has(node)) continue;
      opened.add(node);
      g.forEachInEdge(node, (_e, edge, source, _t, sourceAttrs) => {
        if (edge.kind === 'hosted_on' && passes(edge, sourceAttrs)) visit(node, source, 'uses_server', false);
      });
      continue;
    }
    g.forEachOutEdge(node, (_e, edge, _s, target, _sa, targetAttrs) => {
      if (!ACCESS_EDGES.has(edge.kind) || !passes(edge, targetAttrs)) return;
      visit(node, target, edge.kind, edge.kind === 'uses_server');
    });
    // A server reached first without a grant may be reached with one later: the queue holds both.
  }
  const nodes: GraphNodeOut[] = [];
  const items = [];
  for (const [n, r] of reached) {
    if (n === id) continue;
    const node = g.getNodeAttributes(n);
    nodes.push(node);
    const kinds = via.get(n) ?? new Set<EdgeKind>();
    const modes: Array<'read' | 'write'> = [];
    if (kinds.has('reads_resource')) modes.push('read');
    if (kinds.has('writes_resource')) modes.push('write');
    const kindsSorted = [...kinds].sort((a, b) => EDGE_ORDER.get(a)! - EDGE_ORDER.get(b)!);
    items.push({ ...refOf(node), depth: r.depth, path: pathTo(reached, n), via: kindsSorted, access: modes });
  }
  const sorted = nearestFirst(items);
  return {
    reachable: sorted.slice(0, limit),
    total: items.length,
    truncated: items.length > limit,
    counts_by_kind: countByKind(nodes),
    most_sensitive_classification: mostSensitive(nodes),
  };
}

type Impact = 'control' | 'reach';

/**
 * How compromise spreads (docs/risk-and-graph.md, "Blast radius"): from a node of a kind, in a state, along
 * edges of a kind in a direction, into a state. An upper bound: it assumes influence passes wherever it can.
 */
export const BLAST_RULES: Partial<Record<NodeKind, Partial<Record<Impact, Array<[EdgeKind, 'out' | 'in', Impact]>>>>> = {
  agent: {
    control: [
      ['uses_tool', 'out', 'reach'],
      ['uses_server', 'out', 'reach'],
      ['reads_resource', 'out', 'reach'],
      ['writes_resource', 'out', 'reach'],
      ['uses_credential', 'out', 'control'],
      ['acts_for', 'out', 'reach'],
      ['has_identity', 'out', 'control'],
    ],
  },
  tool: {
    control: [
      ['reads_resource', 'out', 'reach'],
      ['writes_resource', 'out', 'reach'],
      ['uses_credential', 'out', 'control'],
      ['uses_tool', 'in', 'control'],
    ],
    reach: [
      ['reads_resource', 'out', 'reach'],
      ['writes_resource', 'out', 'reach'],
    ],
  },
  mcp_server: {
    control: [
      ['hosted_on', 'in', 'control'],
      ['uses_server', 'in', 'control'],
    ],
    reach: [['hosted_on', 'in', 'reach']],
  },
  credential_ref: { control: [['uses_credential', 'in', 'reach']] },
  workload_identity: { control: [['has_identity', 'in', 'control']] },
  model: { control: [['runs_model', 'in', 'control']] },
  delegation_principal: { control: [['acts_for', 'in', 'control']] },
};

/** BLAST_RULES indexed for one pass over a node's edges each way: kind, state, direction, edge kind → state. */
const BLAST_INDEX = new Map(
  Object.entries(BLAST_RULES).map(([kind, byImpact]) => [
    kind,
    new Map(
      Object.entries(byImpact).map(([impact, rules]) => [
        impact,
        {
          out: new Map(rules.filter((r) => r[1] === 'out').map((r) => [r[0], r[2]])),
          in: new Map(rules.filter((r) => r[1] === 'in').map((r) => [r[0], r[2]])),
        },
      ]),
    ),
  ]),
);

export function blastRadius(view: GraphView, id: string, limit = GRAPH_LIMIT) {
  const g = view.graph;
  const state = new Map<string, { impact: Impact; depth: number; parent: string | null }>([[id, { impact: 'control', depth: 0, parent: null }]]);
  const queue: string[] = [id];
  for (let i = 0; i < queue.length; i++) {
    const node = queue[i]!;
    const here = state.get(node)!;
    const rules = BLAST_INDEX.get(g.getNodeAttribute(node, 'kind'))?.get(here.impact);
    if (!rules) continue;
    for (const direction of ['out', 'in'] as const) {
      const byKind = rules[direction];
      if (byKind.size === 0) continue;
      for (const edge of view.edgesOf(node, direction)) {
        const impact = byKind.get(edge.kind);
        if (!impact) continue;
        const next = direction === 'out' ? edge.to : edge.from;
        const seen = state.get(next);
        if (seen && (seen.impact === 'control' || impact === 'reach')) continue;
        // New, or upgraded from reach to control: (re)visit, keeping the first (shortest) depth.
        state.set(next, { impact, depth: seen?.depth ?? here.depth + 1, parent: seen?.parent ?? node });
        queue.push(next);
      }
    }
  }
  state.delete(id);
  const nodes: GraphNodeOut[] = [];
  const all: Array<NodeRef & { depth: number; impact: Impact; parent: string }> = [];
  for (const [n, st] of state) {
    const node = g.getNodeAttributes(n);
    nodes.push(node);
    all.push({ id: node.id, kind: node.kind, label: node.label, risk_level: node.risk_level, depth: st.depth, impact: st.impact, parent: st.parent! });
  }
  const items = nearestFirst(all).slice(0, limit);
  const sensitive = nodes.filter((n) => n.kind === 'data_resource' && (CLASSIFICATION_RANK[n.attributes.classification as string] ?? 0) >= CLASSIFICATION_RANK.regulated!);
  return {
    affected: items,
    total: all.length,
    truncated: all.length > limit,
    counts_by_kind: countByKind(nodes),
    controlled_agents: all.filter((x) => x.impact === 'control' && x.kind === 'agent').length,
    most_sensitive_classification: mostSensitive(nodes),
    sensitive_data: sensitive.map(refOf).sort(byKindLabel),
  };
}

// GET /graph/agents/{agent_id}

/** The agent, its direct neighbours either way (owners, identities, principals, model, grants) and its access. */
export function agentSubgraph(view: GraphView, agentNode: string) {
  const ids = new Set<string>([agentNode]);
  view.graph.forEachNeighbor(agentNode, (n) => void ids.add(n));
  for (const r of access(view, agentNode, Number.POSITIVE_INFINITY).reachable) ids.add(r.id);
  const nodes = [...ids].map((n) => view.graph.getNodeAttributes(n));
  nodes.sort((a, b) => (a.id === agentNode ? -1 : b.id === agentNode ? 1 : byKindLabel(a, b)));
  return { nodes, edges: edgesAmong(view, nodes.map((n) => n.id)) };
}
