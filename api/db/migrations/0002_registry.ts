import { sql, type Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * The registry: agents with their owners, versions, attestations and containment history;
 * workload identities; delegations and permission bindings; and the inventory (MCP servers, models,
 * API and data resources, credential references, tools). Every table is organisation-owned.
 */
export function registry(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table agents (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           slug text not null,
           name text not null,
           description text not null default '',
           purpose text not null default '',
           framework text not null default 'custom',
           environment text not null default 'development',
           business_unit text,
           criticality text not null default 'medium',
           data_classification text not null default 'internal',
           internet_exposure text not null default 'none',
           code_execution text not null default 'none',
           persistent_memory text not null default 'none',
           human_approval_coverage text not null default 'none',
           gateway_enforced boolean not null default true,
           tags text[] not null default '{}',
           status text not null default 'active' check (status in ('active', 'suspended', 'revoked')),
           gateway_access boolean not null default true,
           session_epoch integer not null default 0,
           source text not null default 'manual',
           external_ref text,
           risk_band text,
           last_attested_at timestamptz,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           unique (org_id, slug)
         )`,
        `create index agents_page on agents (org_id, created_at, id)`,
        `create table agent_owners (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           name text not null,
           email text not null,
           owner_type text not null,
           created_at timestamptz not null default now()
         )`,
        `create index agent_owners_agent on agent_owners (agent_id)`,
        `create table agent_versions (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           version_label text not null,
           model_id uuid,
           manifest jsonb not null default '{}',
           change_summary text not null default '',
           created_by uuid,
           created_at timestamptz not null default now()
         )`,
        `create index agent_versions_agent on agent_versions (agent_id, created_at)`,
        `create table agent_attestations (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           statement text not null,
           attested_by uuid not null,
           attested_at timestamptz not null
         )`,
        `create index agent_attestations_agent on agent_attestations (agent_id, attested_at)`,
        `create table containment_events (
           id uuid primary key,
           seq bigint generated always as identity,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           action text not null,
           reason text not null,
           actor_id uuid,
           correlation_id text not null,
           details jsonb not null default '{}',
           at timestamptz not null
         )`,
        `create index containment_events_agent on containment_events (agent_id, seq)`,
        `create table workload_identities (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           client_id text not null unique,
           secret_hash text not null,
           status text not null default 'active' check (status in ('active', 'revoked')),
           created_by uuid,
           created_at timestamptz not null default now(),
           revoked_at timestamptz,
           last_used_at timestamptz
         )`,
        `create index workload_identities_agent on workload_identities (org_id, agent_id)`,
        `create table delegations (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           principal_ref text not null,
           display_name text not null,
           principal_type text not null,
           scopes text[] not null,
           expires_at timestamptz,
           created_by uuid,
           created_at timestamptz not null default now()
         )`,
        `create index delegations_agent on delegations (agent_id)`,
        `create table permission_bindings (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           target_kind text not null,
           target_id uuid not null,
           actions text[] not null,
           delegated boolean not null default false,
           constraints jsonb not null default '{}',
           expires_at timestamptz,
           identity_id uuid references workload_identities (id),
           created_by uuid,
           created_at timestamptz not null default now()
         )`,
        `create index permission_bindings_agent on permission_bindings (agent_id)`,
        `create table mcp_servers (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           name text not null,
           endpoint text not null,
           transport text not null,
           auth_type text not null,
           publisher text,
           trust_state text not null default 'unknown',
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           unique (org_id, endpoint)
         )`,
        `create table models (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           provider text not null,
           model_name text not null,
           model_version text,
           hosting text not null,
           data_policy text not null,
           approved boolean not null default false,
           max_data_classification text,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now()
         )`,
        `create table resources (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           resource_type text not null check (resource_type in ('api', 'data')),
           name text not null,
           system text not null,
           base_url text,
           auth_type text,
           criticality text,
           kind text,
           classification text,
           contains_personal_data boolean,
           region text,
           created_at timestamptz not null default now()
         )`,
        `create table credential_refs (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           name text not null,
           provider text not null,
           secret_path text not null,
           credential_type text not null,
           scope text not null default '',
           shared boolean not null default false,
           rotation_interval_days integer,
           status text not null default 'active' check (status in ('active', 'revoked')),
           last_rotated_at timestamptz,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now()
         )`,
        `create table tools (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           tool_key text not null,
           name text not null,
           description text not null default '',
           mcp_server_id uuid references mcp_servers (id),
           api_resource_id uuid references resources (id),
           data_resource_id uuid references resources (id),
           operations text[] not null default '{}',
           privilege_class text not null,
           approval_class text not null,
           idempotent boolean not null default true,
           input_schema jsonb not null default '{}',
           credential_ref_id uuid references credential_refs (id),
           rate_limit_per_minute integer,
           blocked boolean not null default false,
           builtin boolean not null default false,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           unique (org_id, tool_key)
         )`,
        // Token exchange knows only the client ID, not the organisation: this owner-defined function
        // finds the identity, its agent and organisation by client ID and nothing else.
        `create function identity_for_client(p_client_id text)
           returns table (identity_id uuid, org_id uuid, agent_id uuid, secret_hash text, identity_status text,
                          agent_status text, session_epoch integer, agent_slug text, org_slug text)
           language sql stable security definer set search_path = public as $$
             select i.id, i.org_id, i.agent_id, i.secret_hash, i.status, a.status, a.session_epoch, a.slug, o.slug
             from workload_identities i
             join agents a on a.id = i.agent_id
             join organisations o on o.id = i.org_id
             where i.client_id = p_client_id
           $$`,
        `revoke all on function identity_for_client(text) from public`,
      ]);
      await sql`grant execute on function identity_for_client(text) to ${sql.id(runtimeRole)}`.execute(db);
      const tables = [
        'agents', 'agent_owners', 'agent_versions', 'agent_attestations', 'containment_events',
        'workload_identities', 'delegations', 'permission_bindings', 'mcp_servers', 'models',
        'resources', 'credential_refs', 'tools',
      ];
      await enableOrgIsolation(db, tables);
      await grantRuntime(db, runtimeRole, {
        ...Object.fromEntries(tables.map((t) => [t, 'select, insert, update'])),
        permission_bindings: 'select, insert, update, delete',
        // History is append-only for the API.
        containment_events: 'select, insert',
        agent_attestations: 'select, insert',
        agent_versions: 'select, insert',
      });
    },
  };
}
