import { sql, type RawBuilder } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import { iso } from '../../platform/schemas.js';
import type { ProjectedEdge, ProjectedNode, SourceRows } from './graph.model.js';
import type { GraphEdgeOut, GraphNodeOut } from './graph.schemas.js';

/** The SQL of the graph: the registry rows it projects, the projection's rows and its state. */

/**
 * What the projection reads of each registry table: the columns selected (`id` and the organisation aside, each
 * must be one migration 0011 watches, so a change to it raises the graph version) and how the rows are chosen.
 */
export const SOURCES: Record<keyof SourceRows, { table: string; columns: string[]; alsoReads?: string[]; rows: string }> = {
  agents: {
    table: 'agents',
    columns: ['id', 'name', 'slug', 'environment', 'status', 'criticality', 'data_classification', 'internet_exposure', 'code_execution', 'persistent_memory', 'human_approval_coverage', 'gateway_enforced', 'risk_band', 'source'],
    rows: 'agents where org_id = $org',
  },
  agent_owners: { table: 'agent_owners', columns: ['id', 'agent_id', 'name', 'email', 'owner_type', 'created_at'], rows: 'agent_owners where org_id = $org' },
  agent_versions: {
    table: 'agent_versions',
    columns: ['id', 'agent_id', 'model_id'],
    alsoReads: ['created_at'],
    rows: `(select distinct on (agent_id) id, agent_id, model_id from agent_versions where org_id = $org
            order by agent_id, created_at desc, id desc) latest`,
  },
  workload_identities: {
    table: 'workload_identities',
    columns: ['id', 'agent_id', 'client_id', 'status'],
    rows: `workload_identities where org_id = $org and status = 'active'`,
  },
  agent_external_identities: {
    table: 'agent_external_identities',
    columns: ['id', 'agent_id', 'identity_type', 'subject', 'issuer', 'authentication_strength'],
    rows: 'agent_external_identities where org_id = $org',
  },
  delegations: {
    table: 'delegations',
    columns: ['id', 'agent_id', 'principal_ref', 'display_name', 'principal_type', 'scopes', 'expires_at', 'created_at'],
    rows: 'delegations where org_id = $org',
  },
  permission_bindings: {
    table: 'permission_bindings',
    columns: ['id', 'agent_id', 'target_kind', 'target_id', 'actions', 'delegated', 'expires_at', 'identity_id', 'pinned_definition_hash'],
    rows: 'permission_bindings where org_id = $org',
  },
  mcp_servers: {
    table: 'mcp_servers',
    columns: ['id', 'name', 'endpoint', 'transport', 'auth_type', 'publisher', 'trust_state', 'source'],
    rows: 'mcp_servers where org_id = $org',
  },
  models: {
    table: 'models',
    columns: ['id', 'provider', 'model_name', 'model_version', 'hosting', 'data_policy', 'approved', 'max_data_classification'],
    rows: 'models where org_id = $org',
  },
  resources: {
    table: 'resources',
    columns: ['id', 'resource_type', 'name', 'system', 'base_url', 'auth_type', 'criticality', 'kind', 'classification', 'contains_personal_data', 'region'],
    rows: 'resources where org_id = $org',
  },
  credential_refs: {
    table: 'credential_refs',
    columns: ['id', 'name', 'provider', 'credential_type', 'scope', 'shared', 'rotation_interval_days', 'status'],
    rows: 'credential_refs where org_id = $org',
  },
  tools: {
    table: 'tools',
    columns: ['id', 'tool_key', 'name', 'mcp_server_id', 'api_resource_id', 'data_resource_id', 'privilege_class', 'approval_class', 'credential_ref_id', 'blocked', 'builtin', 'definition_hash'],
    rows: 'tools where org_id = $org',
  },
};

export interface Freshness {
  /** The organisation's graph version ('0': nothing projected has changed since the migration). */
  version: string;
  state: { projected_version: string; projection_id: string; stamp: Date } | null;
}

/** One cheap statement: the graph version and how far the projection got. */
export async function readFreshness(tx: Tx, orgId: string): Promise<Freshness> {
  const { rows } = await sql<{ version: string | null; projected_version: string | null; projection_id: string | null; stamp: Date | null }>`
    select (select version from graph_versions where org_id = ${orgId}) as version,
           s.projected_version, s.projection_id, s.stamp
    from (select 1) one left join graph_state s on s.org_id = ${orgId}`.execute(tx);
  const r = rows[0]!;
  return {
    version: String(r.version ?? '0'),
    state: r.projection_id ? { projected_version: String(r.projected_version), projection_id: r.projection_id, stamp: r.stamp! } : null,
  };
}

/** Serialises projections of one organisation, across API processes, until the transaction ends. */
export async function lockProjection(tx: Tx, orgId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext('tollgate.graph'), hashtext(${orgId}))`.execute(tx);
}

export interface Sources {
  rows: SourceRows;
  version: string;
  /** When the latest projected change committed; null when nothing changed since the migration. */
  changedAt: Date | null;
  dbNow: Date;
}

/**
 * Every registry row the projection reads, and the version they are at, in one statement: one snapshot, so
 * the rows and the version agree however many writers commit meanwhile.
 */
export async function readSources(tx: Tx, orgId: string): Promise<Sources> {
  const names = Object.keys(SOURCES) as Array<keyof SourceRows>;
  const parts: RawBuilder<unknown>[] = names.map((name) => {
    const s = SOURCES[name];
    const [before, after] = s.rows.split('$org') as [string, string | undefined];
    const from = after === undefined ? sql.raw(before) : sql`${sql.raw(before)}${orgId}::uuid${sql.raw(after)}`;
    return sql`(select coalesce(json_agg(json_build_array(${sql.raw(s.columns.join(', '))})), '[]'::json) from ${from}) as ${sql.id(name)}`;
  });
  const { rows } = await sql<Record<string, unknown>>`
    select ${sql.join(parts)},
           (select json_build_object('version', version::text, 'changed_at', changed_at) from graph_versions where org_id = ${orgId}) as graph_version,
           clock_timestamp() as db_now`.execute(tx);
  const r = rows[0]!;
  const out = {} as Record<string, unknown[]>;
  for (const name of names) {
    const columns = SOURCES[name].columns;
    out[name] = (r[name] as unknown[][]).map((values) => Object.fromEntries(columns.map((c, i) => [c, values[i]])));
  }
  const v = r.graph_version as { version: string; changed_at: string } | null;
  return {
    rows: out as unknown as SourceRows,
    version: v?.version ?? '0',
    changedAt: v ? new Date(v.changed_at) : null,
    dbNow: r.db_now as Date,
  };
}

type GraphTable = 'graph_nodes' | 'graph_edges';

/** The digest of every current row: what a re-projection compares against. */
export async function currentDigests(tx: Tx, table: GraphTable, orgId: string): Promise<Map<string, string>> {
  const rows = await tx.selectFrom(table).select(['id', 'digest']).where('org_id', '=', orgId).where('valid_to', 'is', null).execute();
  return new Map(rows.map((r) => [r.id, r.digest]));
}

/**
 * Ends the current rows of `ids` at `stamp`; a row that began at `stamp` itself was never visible and goes.
 */
export async function closeRows(tx: Tx, table: GraphTable, orgId: string, ids: string[], stamp: Date): Promise<void> {
  for (let i = 0; i < ids.length; i += 5000) {
    const chunk = ids.slice(i, i + 5000);
    await sql`delete from ${sql.table(table)} where org_id = ${orgId} and valid_to is null and id = any(${chunk}::uuid[]) and valid_from >= ${stamp}`.execute(tx);
    await sql`update ${sql.table(table)} set valid_to = ${stamp} where org_id = ${orgId} and valid_to is null and id = any(${chunk}::uuid[])`.execute(tx);
  }
}

const CHUNK = 5000;

export async function insertNodes(tx: Tx, orgId: string, nodes: ProjectedNode[], stamp: Date): Promise<void> {
  for (let i = 0; i < nodes.length; i += CHUNK) {
    const chunk = JSON.stringify(nodes.slice(i, i + CHUNK));
    await sql`
      insert into graph_nodes (org_id, id, kind, key, label, risk_level, source_table, source_id, attributes, digest, valid_from)
      select ${orgId}, r.id, r.kind, r.key, r.label, r.risk_level, r.source_table, r.source_id, r.attributes, r.digest, ${stamp}
      from jsonb_to_recordset(${chunk}::jsonb) as r(id uuid, kind text, key text, label text, risk_level text,
                                                    source_table text, source_id text, attributes jsonb, digest text)`.execute(tx);
  }
}

export async function insertEdges(tx: Tx, orgId: string, edges: ProjectedEdge[], stamp: Date): Promise<void> {
  for (let i = 0; i < edges.length; i += CHUNK) {
    const chunk = JSON.stringify(edges.slice(i, i + CHUNK));
    await sql`
      insert into graph_edges (org_id, id, kind, from_id, to_id, source_table, source_id, attributes, expires_at, digest, valid_from)
      select ${orgId}, r.id, r.kind, r.from_id, r.to_id, r.source_table, r.source_id, r.attributes, r.expires_at, r.digest, ${stamp}
      from jsonb_to_recordset(${chunk}::jsonb) as r(id uuid, kind text, from_id uuid, to_id uuid, source_table text,
                                                    source_id text, attributes jsonb, expires_at timestamptz, digest text)`.execute(tx);
  }
}

export async function saveState(
  tx: Tx,
  orgId: string,
  s: { projected_version: string; projection_id: string; stamp: Date; node_count: number; edge_count: number; projected_at: Date },
): Promise<void> {
  await tx
    .insertInto('graph_state')
    .values({ org_id: orgId, ...s })
    .onConflict((oc) => oc.column('org_id').doUpdateSet(s))
    .execute();
}

/**
 * A transaction that sees one snapshot throughout (repeatable read), with the organisation in scope for
 * row-level security as inScope sets it: the state and the rows of a graph load agree even while a projection
 * commits. Reads only, so it never fails on a serialisation conflict.
 */
export function inSnapshot<T>(db: Db, orgId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (tx) => {
      await sql`select set_config('app.org_id', ${orgId}, true), set_config('app.user_id', '', true)`.execute(tx);
      return fn(tx);
    });
}

/** The nodes and edges valid at `at` (null: the current ones), as the API shows them. */
export async function loadGraph(tx: Tx, orgId: string, at: Date | null): Promise<{ nodes: GraphNodeOut[]; edges: GraphEdgeOut[] }> {
  let nodes = tx
    .selectFrom('graph_nodes')
    .select(['id', 'kind', 'key', 'label', 'risk_level', 'source_table', 'source_id', 'attributes', 'valid_from', 'valid_to'])
    .where('org_id', '=', orgId);
  let edges = tx
    .selectFrom('graph_edges')
    .select(['id', 'kind', 'from_id', 'to_id', 'source_table', 'source_id', 'attributes', 'expires_at', 'valid_from', 'valid_to'])
    .where('org_id', '=', orgId);
  if (at) {
    nodes = nodes.where('valid_from', '<=', at).where((eb) => eb.or([eb('valid_to', 'is', null), eb('valid_to', '>', at)]));
    edges = edges.where('valid_from', '<=', at).where((eb) => eb.or([eb('valid_to', 'is', null), eb('valid_to', '>', at)]));
  } else {
    nodes = nodes.where('valid_to', 'is', null);
    edges = edges.where('valid_to', 'is', null);
  }
  const [n, e] = [await nodes.execute(), await edges.execute()];
  return {
    nodes: n.map((r) => ({
      id: r.id,
      kind: r.kind as GraphNodeOut['kind'],
      key: r.key,
      label: r.label,
      risk_level: r.risk_level as GraphNodeOut['risk_level'],
      source_record: { table: r.source_table, id: r.source_id },
      attributes: r.attributes,
      valid_from: iso(r.valid_from),
      valid_to: r.valid_to ? iso(r.valid_to) : null,
    })),
    edges: e.map((r) => ({
      id: r.id,
      kind: r.kind as GraphEdgeOut['kind'],
      from: r.from_id,
      to: r.to_id,
      source_record: { table: r.source_table, id: r.source_id },
      attributes: r.attributes,
      expires_at: r.expires_at ? iso(r.expires_at) : null,
      valid_from: iso(r.valid_from),
      valid_to: r.valid_to ? iso(r.valid_to) : null,
    })),
  };
}
