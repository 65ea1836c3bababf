import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * The registry columns the Agent Security Graph projects, table by table: a change to one of them raises the
 * organisation's graph version; a change to any other column (a token exchange's `last_used_at`, discovery's
 * `last_seen_at`, an agent's description) does not. `test/unit/graph-projection.test.ts` fails when the
 * projection (api/modules/graph/graph.repository.ts) reads a column that is not listed here.
 */
export const GRAPH_SOURCE_COLUMNS: Record<string, readonly string[]> = {
  agents: [
    'name', 'slug', 'environment', 'status', 'criticality', 'data_classification', 'internet_exposure', 'code_execution',
    'persistent_memory', 'human_approval_coverage', 'gateway_enforced', 'risk_band', 'source',
  ],
  agent_owners: ['agent_id', 'name', 'email', 'owner_type', 'created_at'],
  agent_versions: ['agent_id', 'model_id', 'created_at'],
  workload_identities: ['agent_id', 'client_id', 'status'],
  agent_external_identities: ['agent_id', 'identity_type', 'subject', 'issuer', 'authentication_strength'],
  delegations: ['agent_id', 'principal_ref', 'display_name', 'principal_type', 'scopes', 'expires_at', 'created_at'],
  permission_bindings: [
    'agent_id', 'target_kind', 'target_id', 'actions', 'delegated', 'expires_at', 'identity_id', 'pinned_definition_hash',
  ],
  mcp_servers: ['name', 'endpoint', 'transport', 'auth_type', 'publisher', 'trust_state', 'source'],
  models: ['provider', 'model_name', 'model_version', 'hosting', 'data_policy', 'approved', 'max_data_classification'],
  resources: [
    'resource_type', 'name', 'system', 'base_url', 'auth_type', 'criticality', 'kind', 'classification',
    'contains_personal_data', 'region',
  ],
  credential_refs: ['name', 'provider', 'credential_type', 'scope', 'shared', 'rotation_interval_days', 'status'],
  tools: [
    'tool_key', 'name', 'mcp_server_id', 'api_resource_id', 'data_resource_id', 'privilege_class', 'approval_class',
    'credential_ref_id', 'blocked', 'builtin', 'definition_hash',
  ],
};

/**
 * The Agent Security Graph (docs/risk-and-graph.md, "The graph"; docs/decisions.md D25): a projection of the
 * registry into nodes and edges with validity intervals, so that a read at any past time answers the graph as
 * it was then.
 *
 * - `graph_versions`: per organisation, a version raised by the database on every change to a projected column
 *   of a table above, and `changed_at`, the time of the latest such change (clock_timestamp() when the writing
 *   transaction commits). Like registry_versions (0006), deferred constraint triggers: whoever writes (API,
 *   controller, discovery, SQL by hand) is covered, and the row is locked only at commit, after every other lock
 *   of the writer. It is a version of its own because registry_versions leaves owners, agent versions,
 *   identities, models and resources out, and moves on policy changes the graph does not show.
 * - `graph_nodes`, `graph_edges`: one row per version of a node or edge: `valid_from` inclusive, `valid_to`
 *   exclusive, null while current. `id` is stable (derived from organisation, kind and source record), so a node
 *   keeps its id across versions; `digest` covers what the row says, so a re-projection compares digests only.
 * - `graph_state`: how far the projection got (`projected_version`), the stamp of its last change, and
 *   `projection_id`, new whenever the rows change, which the API processes key their in-memory graphs on.
 */
export function graph(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const triggers = Object.entries(GRAPH_SOURCE_COLUMNS).flatMap(([table, columns]) => {
        const cols = (prefix: string) => columns.map((c) => `${prefix}.${c}`).join(', ');
        return [
          `create constraint trigger graph_changed after insert or delete on ${table}
             deferrable initially deferred for each row execute function bump_graph_version()`,
          `create constraint trigger graph_changed_update after update on ${table}
             deferrable initially deferred for each row
             when ((${cols('old')}) is distinct from (${cols('new')}))
             execute function bump_graph_version()`,
        ];
      });
      await run(db, [
        `create table graph_versions (
           org_id uuid primary key,
           version bigint not null,
           changed_at timestamptz not null
         )`,
        // Runs as the schema owner: a writer may have no organisation in scope (onboarding creates one).
        `create function bump_graph_version() returns trigger
           language plpgsql security definer set search_path = public as $$
         declare
           org uuid;
         begin
           if tg_op = 'DELETE' then
             org := old.org_id;
           else
             org := new.org_id;
           end if;
           -- One lock order for every deferred trigger of a writer (the registry's, risk's, this one), whatever
           -- order its rows changed in: the organisation's registry version row first. Without it, a writer
           -- that changed a graph table first and one that changed a risk-only table first could deadlock.
           perform 1 from registry_versions where org_id = org for update;
           insert into graph_versions as v (org_id, version, changed_at) values (org, 1, clock_timestamp())
             on conflict (org_id) do update set version = v.version + 1, changed_at = greatest(v.changed_at, excluded.changed_at);
           return null;
         end $$`,
        `revoke all on function bump_graph_version() from public`,
        ...triggers,
        `create table graph_nodes (
           row_id bigint generated always as identity primary key,
           org_id uuid not null references organisations (id),
           id uuid not null,
           kind text not null,
           key text not null,
           label text not null,
           risk_level text not null check (risk_level in ('low', 'medium', 'high', 'critical')),
           source_table text not null,
           source_id text not null,
           attributes jsonb not null default '{}',
           digest text not null,
           valid_from timestamptz not null,
           valid_to timestamptz,
           check (valid_to is null or valid_to > valid_from)
         )`,
        `create unique index graph_nodes_current on graph_nodes (org_id, id) where valid_to is null`,
        `create index graph_nodes_history on graph_nodes (org_id, valid_from)`,
        `create table graph_edges (
           row_id bigint generated always as identity primary key,
           org_id uuid not null references organisations (id),
           id uuid not null,
           kind text not null,
           from_id uuid not null,
           to_id uuid not null,
           source_table text not null,
           source_id text not null,
           attributes jsonb not null default '{}',
           expires_at timestamptz,
           digest text not null,
           valid_from timestamptz not null,
           valid_to timestamptz,
           check (valid_to is null or valid_to > valid_from)
         )`,
        `create unique index graph_edges_current on graph_edges (org_id, id) where valid_to is null`,
        `create index graph_edges_history on graph_edges (org_id, valid_from)`,
        `create table graph_state (
           org_id uuid primary key references organisations (id),
           projected_version bigint not null,
           projection_id uuid not null,
           stamp timestamptz not null,
           node_count integer not null,
           edge_count integer not null,
           projected_at timestamptz not null
         )`,
      ]);
      await enableOrgIsolation(db, ['graph_versions', 'graph_nodes', 'graph_edges', 'graph_state']);
      await grantRuntime(db, runtimeRole, {
        graph_versions: 'select',
        // Closing a row is an update; a row opened and closed at the same instant was never visible and goes.
        graph_nodes: 'select, insert, update, delete',
        graph_edges: 'select, insert, update, delete',
        graph_state: 'select, insert, update',
      });
    },
  };
}
