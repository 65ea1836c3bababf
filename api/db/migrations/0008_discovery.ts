import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * Discovery (behaviour.md, "Discovery and integrations"): integrations with their connector and run
 * history, findings, the recorded versions of discovered tools, and what reconciliation needs on the
 * registry: where a record came from and when it was last seen, an MCP server's capability hash, a tool's
 * declared readOnlyHint, the service's own privilege class and the hash of its definition, and on a
 * permission binding the definition hash it was granted against (rug-pull protection, docs/discovery.md).
 */
export function discovery(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table integrations (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           kind text not null check (kind in ('model_vendor_a', 'model_vendor_b', 'mcp', 'directory', 'code_host', 'webhook')),
           name text not null check (char_length(name) between 2 and 200),
           mode text not null default 'mock' check (mode in ('live', 'mock')),
           config jsonb not null default '{}',
           credential_ref_id uuid references credential_refs (id),
           status text not null default 'active' check (status in ('active', 'disabled')),
           created_by uuid,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           unique (org_id, name)
         )`,
        `create index integrations_page on integrations (org_id, created_at, id)`,
        `create table connectors (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           integration_id uuid not null unique references integrations (id),
           adapter_key text not null,
           enabled boolean not null default true,
           last_run_at timestamptz,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now()
         )`,
        `create table discovery_runs (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           connector_id uuid not null references connectors (id),
           status text not null default 'running' check (status in ('running', 'succeeded', 'failed')),
           idempotency_key text check (char_length(idempotency_key) <= 200),
           started_by uuid,
           started_at timestamptz not null default now(),
           finished_at timestamptz,
           counters jsonb not null default '{}',
           warnings text[] not null default '{}',
           error_message text,
           attempts integer not null default 0,
           correlation_id text not null default ''
         )`,
        `create unique index discovery_runs_idempotency on discovery_runs (connector_id, idempotency_key)
           where idempotency_key is not null`,
        `create index discovery_runs_recent on discovery_runs (connector_id, started_at desc, id)`,
        `create table findings (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           category text not null check (char_length(category) between 2 and 80),
           severity text not null check (severity in ('low', 'medium', 'high', 'critical')),
           status text not null default 'open' check (status in ('open', 'in_progress', 'resolved', 'accepted', 'false_positive')),
           title text not null,
           description text not null default '',
           evidence jsonb not null default '{}',
           agent_id uuid references agents (id),
           mcp_server_id uuid references mcp_servers (id),
           tool_id uuid references tools (id),
           run_id uuid references discovery_runs (id),
           -- What the finding is about, so a run does not open it twice while it is still open.
           dedupe_key text not null,
           assigned_to text,
           note text,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           resolved_at timestamptz,
           version integer not null default 1
         )`,
        `create unique index findings_open_once on findings (org_id, dedupe_key) where status in ('open', 'in_progress')`,
        `create index findings_page on findings (org_id, created_at, id)`,
        `create index findings_agent on findings (org_id, agent_id) where agent_id is not null`,
        `create table tool_versions (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           tool_id uuid not null references tools (id),
           number integer not null,
           title text,
           description text not null,
           input_schema jsonb not null,
           read_only_hint boolean,
           definition_hash text not null,
           run_id uuid references discovery_runs (id),
           created_at timestamptz not null default now(),
           unique (tool_id, number)
         )`,
        `alter table agents add column last_seen_at timestamptz`,
        `alter table agents add column integration_id uuid references integrations (id)`,
        // An agent's reference in its source, prefixed with the connector kind (directory:…, code_host:…).
        `create unique index agents_external_ref on agents (org_id, external_ref) where external_ref is not null`,
        // Identities a source says an agent has (a directory's service principal, an OAuth client): not
        // Tollgate's workload identities, which Tollgate issues, but what the agent authenticates as elsewhere.
        `create table agent_external_identities (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           identity_type text not null,
           subject text not null,
           issuer text,
           authentication_strength text check (authentication_strength in ('weak', 'moderate', 'strong')),
           first_seen_at timestamptz not null default now(),
           last_seen_at timestamptz not null default now(),
           unique (agent_id, identity_type, subject)
         )`,
        `alter table mcp_servers add column capability_hash text`,
        `alter table mcp_servers add column protocol_version text`,
        `alter table mcp_servers add column source text not null default 'manual'`,
        `alter table mcp_servers add column last_seen_at timestamptz`,
        `alter table tools add column title text`,
        `alter table tools add column read_only_hint boolean`,
        // sha256 over the canonical JSON of {description, input_schema}: what a person granted.
        `alter table tools add column definition_hash text`,
        // Who set privilege_class: declared on creation, classified by discovery, or set by staff (kept).
        `alter table tools add column privilege_source text not null default 'declared'
           check (privilege_source in ('declared', 'discovery', 'staff'))`,
        `alter table tools add column source text not null default 'manual'`,
        `alter table tools add column last_seen_at timestamptz`,
        `alter table models add column source text not null default 'manual'`,
        `alter table resources add column source text not null default 'manual'`,
        // The tool definition a binding was granted against; a discovered change stops it until re-approved.
        `alter table permission_bindings add column pinned_definition_hash text`,
        `alter table permission_bindings add column pinned_at timestamptz`,
        `alter table permission_bindings add column pinned_by uuid`,
      ]);
      await enableOrgIsolation(db, ['integrations', 'connectors', 'discovery_runs', 'findings', 'tool_versions', 'agent_external_identities']);
      await grantRuntime(db, runtimeRole, {
        integrations: 'select, insert, update',
        connectors: 'select, insert, update',
        discovery_runs: 'select, insert, update',
        findings: 'select, insert, update',
        tool_versions: 'select, insert',
        agent_external_identities: 'select, insert, update',
      });
    },
  };
}
