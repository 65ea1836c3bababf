import { sql, type Kysely } from 'kysely';
import { createJobQueue, JOBS_SCHEMA } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue the risk recalculation runs from (api/modules/risk/risk.jobs.ts uses the same name). */
export const RISK_QUEUE = 'risk.recalculate';

/**
 * The default ruleset of the Agent Risk Score (docs/risk-and-graph.md, "Risk"; D24): one row per factor, in the
 * order the score lists them. The code has one evaluator per key (api/modules/risk/score.ts); `weight` is the
 * most points a factor moves the score (negative: it lowers it), `parameters` what its evaluator reads besides.
 * A later migration changes a default or adds a factor for every organisation at once.
 */
export const DEFAULT_FACTORS: ReadonlyArray<{ key: string; weight: number; description: string; parameters?: Record<string, unknown> }> = [
  { key: 'internet_exposure', weight: 12, description: 'Reachable from the internet: public counts in full, controlled half.' },
  { key: 'code_execution', weight: 12, description: 'Runs code: privileged execution counts in full, sandboxed half.' },
  { key: 'persistent_memory', weight: 6, description: 'Keeps memory between sessions: unbounded counts in full, bounded half.' },
  { key: 'human_approval_coverage', weight: 10, description: 'How little of what it does a person approves: none counts in full, partial half, strong nothing.' },
  { key: 'production_environment', weight: 8, description: 'Runs in production (staging counts a quarter).' },
  {
    key: 'data_classification',
    weight: 10,
    description: 'The most sensitive data it reaches: its own classification and that of the data resources its bindings reach.',
    parameters: { levels: { public: 0, internal: 0.2, confidential: 0.4, personal: 0.6, regulated: 0.8, restricted: 1 } },
  },
  { key: 'write_tools', weight: 5, description: 'Granted tools of privilege class write.' },
  { key: 'high_impact_tools', weight: 10, description: 'Granted high-impact tools: privilege class destructive or financial.' },
  { key: 'privileged_tools', weight: 10, description: 'Granted privileged tools: privilege class admin.' },
  {
    key: 'delegation_breadth',
    weight: 8,
    description: 'Acts for people: narrow delegation counts half, broad (many principals, a group, or a wildcard scope) in full.',
    parameters: { narrow_max: 2 },
  },
  { key: 'gateway_enforcement', weight: 10, description: 'Its tool calls are not enforced through the gateway (gateway_enforced is false).' },
  {
    key: 'owner_attestation',
    weight: 6,
    description: 'No current owner attestation: never attested, or last attested longer ago than max_age_days.',
    parameters: { max_age_days: 90 },
  },
  {
    key: 'open_findings',
    weight: 15,
    description: 'Open or in-progress findings about the agent or a tool it is granted (tool poisoning counts as a detection), points by severity.',
    parameters: { points: { critical: 8, high: 5, medium: 2, low: 1 } },
  },
  {
    key: 'detections',
    weight: 15,
    description: 'Signs of misuse: its denied gateway decisions over the last window_days (secret detections weigh more) and open tool-poisoning findings on tools it is granted.',
    parameters: { window_days: 7, per_denial: 2, per_secret_detection: 5, per_poisoned_tool: 8 },
  },
  {
    key: 'mcp_trust',
    weight: 36,
    description: 'Each MCP server whose tools it is granted and that is not approved: unknown +6, unsigned +12, quarantined +12 (the spec).',
    parameters: { points: { approved: 0, unknown: 6, unsigned: 12, quarantined: 12 } },
  },
  {
    key: 'identity_scoping',
    weight: 9,
    description: 'Identity not scoped to the agent: no workload identity of its own, bindings not tied to one of its identities, shared credential references behind its tools; a third each.',
  },
  {
    key: 'containment',
    weight: -30,
    description: 'Contained: suspended, revoked, or its gateway access switched off, so it cannot act (lowers the score).',
  },
];

/**
 * The Agent Risk Score (behaviour.md core rule 13 and the MCP trust contributions; docs/risk-and-graph.md; D24):
 *
 * - `risk_factors`: the ruleset as data, global defaults seeded here; `risk_factor_overrides`: what an
 *   organisation switched on or off (PATCH /risks/ruleset/{key}), with who, when and why.
 * - `risk_scores`: each agent's latest score with every factor's contribution and the inputs it was computed from;
 *   `risk_history`: one row per agent per day (the day's last score). `agents.risk_band` follows the latest score.
 * - Recalculation without the writer waiting: deferred constraint triggers on every table the score reads mark the
 *   affected agents stale (`risk_stale`, a generation per agent) or the whole organisation (`risk_orgs.full_generation`:
 *   a discovery run that succeeded, a ruleset change, an organisation-wide deny-class rule), and queue one
 *   `risk.recalculate` job per organisation while none is waiting (`risk_orgs.job_queued`), in the writer's
 *   transaction. Like migration 0006, whoever writes (API, controller, discovery, SQL) is covered, and the
 *   triggers run at commit, after every other lock the writer took. The job drains the marks.
 */
export function risk(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await createJobQueue(db, runtimeRole, { name: RISK_QUEUE, expireInSeconds: 300, retryLimit: 2, retryDelay: 5 });
      await run(db, [
        `create table risk_factors (
           key text primary key check (key ~ '^[a-z][a-z0-9_]{1,62}$'),
           position integer not null,
           description text not null,
           weight integer not null check (weight between -100 and 100),
           enabled boolean not null default true,
           parameters jsonb not null default '{}'
         )`,
        `create table risk_factor_overrides (
           org_id uuid not null references organisations (id),
           factor_key text not null references risk_factors (key),
           enabled boolean not null,
           reason text not null check (char_length(reason) between 5 and 1000),
           changed_by uuid,
           changed_at timestamptz not null,
           primary key (org_id, factor_key)
         )`,
        `create table risk_scores (
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           score integer not null check (score between 0 and 100),
           band text not null check (band in ('low', 'medium', 'high', 'critical')),
           raw_total integer not null,
           factors jsonb not null,
           inputs jsonb not null,
           computed_at timestamptz not null,
           primary key (org_id, agent_id)
         )`,
        `create index risk_scores_band on risk_scores (org_id, band)`,
        `create table risk_history (
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           day date not null,
           score integer not null check (score between 0 and 100),
           band text not null check (band in ('low', 'medium', 'high', 'critical')),
           computed_at timestamptz not null,
           primary key (org_id, agent_id, day)
         )`,
        `create index risk_history_day on risk_history (org_id, day)`,
        // An agent whose inputs changed since its score; the generation moves with every change, so the job
        // clears only the marks it has seen.
        `create table risk_stale (
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           generation bigint not null default 1,
           marked_at timestamptz not null default now(),
           primary key (org_id, agent_id)
         )`,
        // Per organisation: whether a job is waiting (so writers queue one, not one each), the organisation-wide
        // recalculations asked for and done, and when the daily refresh is due.
        `create table risk_orgs (
           org_id uuid primary key references organisations (id),
           job_queued boolean not null default false,
           full_generation bigint not null default 0,
           full_done bigint not null default 0,
           refresh_due_at timestamptz
         )`,
        // What the triggers and the score look up: the bindings on a target, the tools of a server, an
        // agent's recent denials.
        `create index risk_bindings_by_target on permission_bindings (target_id)`,
        `create index risk_tools_by_server on tools (mcp_server_id) where mcp_server_id is not null`,
        `create index risk_denied_actions on action_requests (org_id, agent_id, created_at) where decision = 'deny'`,

        // Queues a recalculation job now (or after a delay) straight into pg-boss's job table, with the queue's
        // own settings, as pg-boss's send does (schema version 24, migration 0009): a pg-boss upgrade that
        // changes the job table revisits this function.
        `create function risk_enqueue(p_org uuid, p_delay_seconds integer) returns void
           language sql security definer set search_path = public as $$
             insert into ${JOBS_SCHEMA}.job (name, data, singleton_key, start_after, expire_in, keep_until,
                                     retry_limit, retry_delay, retry_backoff, dead_letter, policy)
             select q.name, jsonb_build_object('org_id', p_org), p_org::text,
                    now() + make_interval(secs => p_delay_seconds),
                    make_interval(secs => coalesce(q.expire_seconds, 900)),
                    now() + make_interval(secs => p_delay_seconds) + interval '14 days',
                    coalesce(q.retry_limit, 2), coalesce(q.retry_delay, 0), coalesce(q.retry_backoff, false),
                    q.dead_letter, q.policy
             from ${JOBS_SCHEMA}.queue q where q.name = '${RISK_QUEUE}'
           $$`,
        `revoke all on function risk_enqueue(uuid, integer) from public`,
        // Asks for a recalculation of an organisation (all of it when p_full): one job while none is waiting.
        // The row lock taken here is what makes a writer and the job agree (api/modules/risk/risk.jobs.ts).
        `create function risk_request(p_org uuid, p_full boolean) returns void
           language plpgsql security definer set search_path = public as $$
         declare
           waiting boolean;
         begin
           select job_queued into waiting from risk_orgs where org_id = p_org for update;
           if not found then
             insert into risk_orgs (org_id) values (p_org) on conflict (org_id) do nothing;
             select job_queued into waiting from risk_orgs where org_id = p_org for update;
           end if;
           if p_full then
             update risk_orgs set job_queued = true, full_generation = full_generation + 1 where org_id = p_org;
           elsif not waiting then
             update risk_orgs set job_queued = true where org_id = p_org;
           end if;
           if not waiting then
             perform risk_enqueue(p_org, 0);
           end if;
         end $$`,
        `revoke all on function risk_request(uuid, boolean) from public`,
        // The agents bound to any of these tools, directly or through a binding on the tool's MCP server.
        `create function risk_agents_of_tools(p_org uuid, p_tools uuid[]) returns setof uuid
           language sql stable security definer set search_path = public as $$
             select b.agent_id from permission_bindings b
               where b.org_id = p_org and b.target_kind = 'tool' and b.target_id = any(p_tools)
             union
             select b.agent_id from permission_bindings b join tools t on t.mcp_server_id = b.target_id
               where b.org_id = p_org and b.target_kind = 'mcp_server' and t.id = any(p_tools)
           $$`,
        `revoke all on function risk_agents_of_tools(uuid, uuid[]) from public`,
        // Runs as the schema owner (like bump_registry_version): a writer's scope may name no organisation.
        `create function risk_inputs_changed() returns trigger
           language plpgsql security definer set search_path = public as $$
         declare
           rec record;
           org uuid;
           affected uuid[] := '{}';
           everyone boolean := false;
         begin
           if tg_op = 'DELETE' then rec := old; else rec := new; end if;
           org := rec.org_id;
           if tg_table_name = 'agents' then
             affected := array[rec.id];
           elsif tg_table_name in ('permission_bindings', 'delegations', 'workload_identities') then
             affected := array[rec.agent_id];
           elsif tg_table_name = 'findings' then
             affected := array[rec.agent_id];
             if tg_op = 'UPDATE' then affected := affected || old.agent_id; end if;
             if rec.tool_id is not null then
               affected := affected || array(select risk_agents_of_tools(org, array[rec.tool_id]));
             end if;
           elsif tg_table_name = 'mcp_servers' then
             affected := array(
               select b.agent_id from permission_bindings b
                 where b.org_id = org and b.target_kind = 'mcp_server' and b.target_id = rec.id
               union
               select risk_agents_of_tools(org, array(select t.id from tools t where t.mcp_server_id = rec.id)));
           elsif tg_table_name = 'tools' then
             affected := array(select risk_agents_of_tools(org, array[rec.id]));
             -- A tool that moves to another server (or arrives on one) reaches that server's bound agents.
             affected := affected || array(
               select b.agent_id from permission_bindings b
                 where b.org_id = org and b.target_kind = 'mcp_server'
                   and b.target_id in (new.mcp_server_id, case when tg_op = 'UPDATE' then old.mcp_server_id end));
           elsif tg_table_name = 'resources' then
             affected := array(
               select b.agent_id from permission_bindings b
                 where b.org_id = org and b.target_kind = 'data_resource' and b.target_id = rec.id
               union
               select risk_agents_of_tools(org, array(select t.id from tools t where t.data_resource_id = rec.id)));
           elsif tg_table_name = 'credential_refs' then
             affected := array(select risk_agents_of_tools(org, array(select t.id from tools t where t.credential_ref_id = rec.id)));
           elsif tg_table_name = 'deny_class_rules' then
             if rec.agent_id is null then everyone := true; else affected := array[rec.agent_id]; end if;
           else
             -- discovery_runs (a run that landed), risk_factor_overrides (the ruleset): the whole organisation.
             everyone := true;
           end if;
           if org is null then return null; end if;
           -- Deferred triggers run at commit in the order their rows changed, so a writer may reach this one before
           -- or after the registry version's (migration 0006). Taking the organisation's registry version row first
           -- keeps one lock order for every writer (registry version, then the risk rows): no deadlock between two.
           perform 1 from registry_versions where org_id = org for update;
           if not everyone then
             insert into risk_stale as s (org_id, agent_id)
               select distinct org, a from unnest(affected) a where a is not null
               on conflict (org_id, agent_id) do update set generation = s.generation + 1, marked_at = now();
             if not found then return null; end if;
           end if;
           perform risk_request(org, everyone);
           return null;
         end $$`,
        `revoke all on function risk_inputs_changed() from public`,
        ...triggers(),
      ]);
      for (const [i, f] of DEFAULT_FACTORS.entries()) {
        await sql`insert into risk_factors (key, position, description, weight, parameters)
          values (${f.key}, ${i + 1}, ${f.description}, ${f.weight}, ${JSON.stringify(f.parameters ?? {})}::jsonb)`.execute(db);
      }
      await enableOrgIsolation(db, ['risk_factor_overrides', 'risk_scores', 'risk_history', 'risk_stale', 'risk_orgs']);
      await grantRuntime(db, runtimeRole, {
        risk_factors: 'select',
        risk_factor_overrides: 'select, insert, update',
        risk_scores: 'select, insert, update',
        risk_history: 'select, insert, update',
        risk_stale: 'select, insert, update, delete',
        risk_orgs: 'select, insert, update',
      });
      await sql`grant execute on function risk_enqueue(uuid, integer) to ${sql.id(runtimeRole)}`.execute(db);
    },
  };
}

/**
 * The deferred constraint triggers: which changes of which table move a score. Updates count only when a column
 * the score reads changed, so the score's own writes (agents.risk_band) and bookkeeping (last_seen_at, last_used_at,
 * version, updated_at) mark nothing.
 */
function triggers(): string[] {
  const changed = (cols: string[]) => cols.map((c) => `old.${c} is distinct from new.${c}`).join(' or ');
  const spec: Array<[table: string, events: string, when?: string]> = [
    ['agents', 'insert', undefined],
    [
      'agents',
      'update',
      changed([
        'environment', 'data_classification', 'internet_exposure', 'code_execution', 'persistent_memory',
        'human_approval_coverage', 'gateway_enforced', 'status', 'gateway_access', 'last_attested_at',
      ]),
    ],
    ['permission_bindings', 'insert or update or delete', undefined],
    ['delegations', 'insert or update or delete', undefined],
    ['workload_identities', 'insert', undefined],
    ['workload_identities', 'update', changed(['status'])],
    ['findings', 'insert', undefined],
    ['findings', 'update', changed(['status', 'severity', 'category', 'agent_id', 'tool_id'])],
    ['mcp_servers', 'update', changed(['trust_state'])],
    ['tools', 'insert', undefined],
    ['tools', 'update', changed(['privilege_class', 'mcp_server_id', 'data_resource_id', 'credential_ref_id', 'blocked'])],
    ['resources', 'update', changed(['classification'])],
    ['credential_refs', 'update', changed(['shared', 'status'])],
    ['deny_class_rules', 'insert', undefined],
    ['deny_class_rules', 'update', changed(['lifted_at', 'privilege_class', 'agent_id'])],
    ['discovery_runs', 'update', `new.status = 'succeeded' and old.status is distinct from 'succeeded'`],
    ['risk_factor_overrides', 'insert', undefined],
    ['risk_factor_overrides', 'update', changed(['enabled'])],
  ];
  return spec.map(([table, events, when], i) => {
    const name = `risk_inputs_changed_${i + 1}`;
    return `create constraint trigger ${name} after ${events} on ${table}
              deferrable initially deferred for each row ${when ? `when (${when})` : ''}
              execute function risk_inputs_changed()`;
  });
}
