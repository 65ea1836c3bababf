import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import type { RequestContext } from '../../platform/context.js';
import { notFound } from '../../platform/errors.js';
import { audit } from '../audit/index.js';
import { edgesCsv, nodesCsv } from './graph.csv.js';
import { access, agentSubgraph, blastRadius, edgesOfPath, GraphView, listGraph, neighbours, nodeDegree, refOf, shortestPath, type ListFilters } from './graph.memory.js';
import { nodeId, project, type ProjectedEdge, type ProjectedNode } from './graph.model.js';
import { highRiskPaths } from './graph.patterns.js';
import {
  closeRows,
  currentDigests,
  inSnapshot,
  insertEdges,
  insertNodes,
  loadGraph,
  lockProjection,
  readFreshness,
  readSources,
  saveState,
  type Freshness,
} from './graph.repository.js';
import type { RebuildOut } from './graph.schemas.js';

/**
 * The Agent Security Graph of every organisation this process serves (docs/decisions.md, D25).
 *
 * Freshness: the database raises an organisation's graph version on every change to a projected column
 * (migration 0011). Every read first compares that version with the one the projection reached (one small
 * statement); when they differ it projects, under an advisory lock so that one process does it and the others
 * wait and find it done. Each process keeps each organisation's current graph in memory, keyed by the
 * projection's id, which changes whenever the projection's rows change: a process never answers from a graph
 * older than the last committed change, whichever process or writer made it.
 */
export class GraphService {
  private readonly current = new Map<string, GraphView>();
  private readonly loading = new Map<string, Promise<GraphView>>();
  private readonly projecting = new Map<string, Promise<unknown>>();
  private readonly patterns = new WeakMap<GraphView, ReturnType<typeof highRiskPaths>>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /**
     * How much current graph this process keeps, in nodes and edges over all organisations, the most recently used
     * first (about 0.8 KB each: 100 MB for 125,000; the most recent organisation is kept whatever its size).
     */
    private readonly maxItems = 400_000,
  ) {}

  // Projection

  /**
   * Brings the organisation's projection up to the registry: reads every projected row, derives the nodes and
   * edges, and writes the difference (closing rows that vanished or changed, inserting new ones) stamped with
   * the time of the latest change. `force` (rebuild) re-projects even when the version has not moved, and gives
   * the projection a new id so that every process reloads. Idempotent: projecting twice changes nothing the
   * second time. Audited when `req` is given (a rebuild).
   */
  async project(orgId: string, opts: { force?: boolean; req?: RequestContext } = {}): Promise<RebuildOut> {
    const started = performance.now();
    return inScope(this.db, { orgId }, async (tx) => {
      await lockProjection(tx, orgId);
      const before = await readFreshness(tx, orgId);
      if (!opts.force && before.state && before.state.projected_version === before.version) {
        return { ...unchanged(before.version, before.state.projection_id), duration_ms: Math.round(performance.now() - started) };
      }
      const src = await readSources(tx, orgId);
      const projection = project(orgId, src.rows);
      const [nodeDigests, edgeDigests] = [await currentDigests(tx, 'graph_nodes', orgId), await currentDigests(tx, 'graph_edges', orgId)];
      const nodes = diff(projection.nodes, nodeDigests);
      const edges = diff(projection.edges, edgeDigests);
      const changed = nodes.add.length + nodes.close.length + edges.add.length + edges.close.length > 0;

      // A change is dated when it committed; a rebuild that finds drift without a change dates the repair now.
      const moved = !before.state || before.state.projected_version !== src.version;
      let stamp = moved && src.changedAt ? src.changedAt : src.dbNow;
      if (before.state && stamp < before.state.stamp) stamp = before.state.stamp;

      // Edges first: they are closed before their nodes and opened after them.
      await closeRows(tx, 'graph_edges', orgId, edges.close, stamp);
      await closeRows(tx, 'graph_nodes', orgId, nodes.close, stamp);
      await insertNodes(tx, orgId, nodes.add, stamp);
      await insertEdges(tx, orgId, edges.add, stamp);
      const projectionId = changed || opts.force || !before.state ? randomUUID() : before.state.projection_id;
      await saveState(tx, orgId, {
        projected_version: src.version,
        projection_id: projectionId,
        stamp: changed || !before.state ? stamp : before.state.stamp,
        node_count: projection.nodes.length,
        edge_count: projection.edges.length,
        projected_at: src.dbNow,
      });
      const result: RebuildOut = {
        version: src.version,
        projection_id: projectionId,
        nodes: projection.nodes.length,
        edges: projection.edges.length,
        changes: {
          nodes_added: nodes.add.length - nodes.changed,
          nodes_changed: nodes.changed,
          nodes_removed: nodes.close.length - nodes.changed,
          edges_added: edges.add.length - edges.changed,
          edges_changed: edges.changed,
          edges_removed: edges.close.length - edges.changed,
        },
        duration_ms: 0,
      };
      if (opts.req) {
        await audit(tx, opts.req, orgId, {
          action: 'graph.rebuilt',
          targetType: 'graph',
          targetId: null,
          details: { version: result.version, nodes: result.nodes, edges: result.edges, changes: result.changes },
        });
      }
      result.duration_ms = Math.round(performance.now() - started);
      return result;
    });
  }

  /** POST /graph/rebuild: a forced projection; this process drops its graph of the organisation at once. */
  async rebuild(req: RequestContext, orgId: string): Promise<RebuildOut> {
    const result = await this.project(orgId, { force: true, req });
    this.current.delete(orgId);
    return result;
  }

  /** The projection's state once it has caught up with the registry (projecting when it has not). */
  private async fresh(orgId: string): Promise<NonNullable<Freshness['state']> & { version: string }> {
    for (let attempt = 0; ; attempt++) {
      const f = await inScope(this.db, { orgId }, (tx) => readFreshness(tx, orgId));
      if (f.state && f.state.projected_version === f.version) return { ...f.state, version: f.version };
      // Writers keep committing: after a few rounds answer from the projection just made rather than chase them.
      if (f.state && attempt >= 3) return { ...f.state, version: f.state.projected_version };
      let p = this.projecting.get(orgId);
      if (!p) {
        p = this.project(orgId).finally(() => this.projecting.delete(orgId));
        this.projecting.set(orgId, p);
      }
      await p;
    }
  }

  // Views

  /** The graph to answer from: the current one (kept in memory), or the one valid at `at` (loaded for the request). */
  async view(orgId: string, at?: string): Promise<{ view: GraphView; version: string; at: string | null }> {
    const state = await this.fresh(orgId);
    if (at !== undefined) {
      const t = new Date(at);
      const rows = await inSnapshot(this.db, orgId, (tx) => loadGraph(tx, orgId, t));
      return { view: new GraphView({ at: t, version: state.version, projectionId: state.projection_id }, rows.nodes, rows.edges, t), version: state.version, at: t.toISOString() };
    }
    const now = this.clock.now().getTime();
    const cached = this.current.get(orgId);
    if (cached && cached.meta.projectionId === state.projection_id && now < cached.nextExpiry) {
      this.current.delete(orgId);
      this.current.set(orgId, cached);
      return { view: cached, version: state.version, at: null };
    }
    let load = this.loading.get(orgId);
    if (!load) {
      load = this.loadCurrent(orgId).finally(() => this.loading.delete(orgId));
      this.loading.set(orgId, load);
    }
    const view = await load;
    return { view, version: state.version, at: null };
  }

  private async loadCurrent(orgId: string): Promise<GraphView> {
    const { state, rows } = await inSnapshot(this.db, orgId, async (tx) => ({
      state: await readFreshness(tx, orgId),
      rows: await loadGraph(tx, orgId, null),
    }));
    const view = new GraphView(
      { at: null, version: state.state?.projected_version ?? '0', projectionId: state.state?.projection_id ?? '' },
      rows.nodes,
      rows.edges,
      this.clock.now(),
    );
    this.current.delete(orgId);
    this.current.set(orgId, view);
    let items = 0;
    for (const v of this.current.values()) items += v.graph.order + v.graph.size;
    for (const [org, v] of this.current) {
      if (items <= this.maxItems || org === orgId) break;
      this.current.delete(org);
      items -= v.graph.order + v.graph.size;
    }
    return view;
  }

  // The operations

  async list(orgId: string, q: ListFilters & { at?: string }) {
    const { view, version, at } = await this.view(orgId, q.at);
    return { at, version, ...listGraph(view, q) };
  }

  async node(orgId: string, id: string, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    const node = nodeOr404(view, id);
    return { at: when, version, node, degree: nodeDegree(view, id) };
  }

  async neighbours(orgId: string, id: string, depth: number, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    nodeOr404(view, id);
    return { at: when, version, node_id: id, depth, ...neighbours(view, id, depth) };
  }

  async path(orgId: string, q: { source: string; target: string; directed: boolean; at?: string }) {
    const { view, version, at } = await this.view(orgId, q.at);
    nodeOr404(view, q.source, 'source');
    nodeOr404(view, q.target, 'target');
    const path = shortestPath(view, q.source, q.target, q.directed);
    return {
      at,
      version,
      source: q.source,
      target: q.target,
      directed: q.directed,
      found: path !== null,
      length: path ? path.length - 1 : null,
      nodes: (path ?? []).map((n) => view.graph.getNodeAttributes(n)),
      edges: path ? edgesOfPath(view, path, q.directed) : [],
    };
  }

  async access(orgId: string, id: string, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    return { at: when, version, node: refOf(nodeOr404(view, id)), ...access(view, id) };
  }

  async blastRadius(orgId: string, id: string, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    return { at: when, version, node: refOf(nodeOr404(view, id)), ...blastRadius(view, id) };
  }

  async highRiskPaths(orgId: string, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    // A pure function of the view: worked out once per current graph (per projection), like the graph itself.
    let patterns = this.patterns.get(view);
    if (!patterns) {
      patterns = highRiskPaths(view);
      if (!when) this.patterns.set(view, patterns);
    }
    return { at: when, version, patterns };
  }

  async agent(orgId: string, agentId: string, at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    const id = nodeId(orgId, 'agent', agentId);
    const agent = view.node(id);
    if (!agent) throw notFound(when ? 'No such agent in the graph at that time.' : 'No such agent.');
    return { at: when, version, agent, ...agentSubgraph(view, id) };
  }

  async export(orgId: string, format: 'json' | 'csv', part: 'nodes' | 'edges', at?: string) {
    const { view, version, at: when } = await this.view(orgId, at);
    const nodes = view.graph.mapNodes((_id, n) => n).sort((a, b) => (a.id < b.id ? -1 : 1));
    const edges = view.graph.mapEdges((_id, e) => e).sort((a, b) => (a.id < b.id ? -1 : 1));
    if (format === 'csv') return { format, body: part === 'nodes' ? nodesCsv(nodes) : edgesCsv(edges, (id) => view.node(id)) };
    return { format, body: JSON.stringify({ at: when, version, part, items: part === 'nodes' ? nodes : edges }) };
  }
}

function nodeOr404(view: GraphView, id: string, what = 'node') {
  const node = view.node(id);
  if (!node) throw notFound(view.meta.at ? `No such ${what} in the graph at that time.` : `No such ${what} in the graph.`);
  return node;
}

const unchanged = (version: string, projectionId: string) => ({
  version,
  projection_id: projectionId,
  nodes: 0,
  edges: 0,
  changes: { nodes_added: 0, nodes_changed: 0, nodes_removed: 0, edges_added: 0, edges_changed: 0, edges_removed: 0 },
});

/**
 * What to write: rows to add (new, or a new version of a changed one) and current rows to close (vanished,
 * or changed); `changed` counts the rows that are both.
 */
function diff<T extends ProjectedNode | ProjectedEdge>(desired: T[], current: Map<string, string>) {
  const add: T[] = [];
  const close: string[] = [];
  let changed = 0;
  const seen = new Set<string>();
  for (const row of desired) {
    seen.add(row.id);
    const digest = current.get(row.id);
    if (digest === row.digest) continue;
    add.push(row);
    if (digest !== undefined) {
      close.push(row.id);
      changed++;
    }
  }
  for (const id of current.keys()) if (!seen.has(id)) close.push(id);
  return { add, close, changed };
}
