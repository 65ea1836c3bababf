import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { iso } from '../../platform/schemas.js';
import { EXAMPLES, type Band, type Classification, type Counted, type Factor, type RiskInputs, type ScoreResult } from './score.js';

/**
 * The SQL of the risk score: the ruleset with the organisation's overrides, the facts a score reads (gathered for
 * many agents at once, a fixed number of statements whatever their count), the scores, history and band, and the
 * bookkeeping of what is stale. Every function takes the open transaction, then the organisation.
 */

/** A factor as stored, with the organisation's override when it has one. */
export interface FactorRow extends Factor {
  position: number;
  default_enabled: boolean;
  override: { enabled: boolean; reason: string; changed_by: string | null; changed_at: Date } | null;
}

/** The ruleset of the organisation: the global factors in order, with its overrides applied. */
export async function loadRuleset(tx: Tx, orgId: string): Promise<FactorRow[]> {
  const rows = await tx
    .selectFrom('risk_factors as f')
    .leftJoin('risk_factor_overrides as o', (j) => j.onRef('o.factor_key', '=', 'f.key').on('o.org_id', '=', orgId))
    .select([
      'f.key',
      'f.position',
      'f.description',
      'f.weight',
      'f.enabled as default_enabled',
      'f.parameters',
      'o.enabled as override_enabled',
      'o.reason',
      'o.changed_by',
      'o.changed_at',
    ])
    .orderBy('f.position')
    .execute();
  return rows.map((r) => ({
    key: r.key,
    position: r.position,
    description: r.description,
    weight: r.weight,
    default_enabled: r.default_enabled,
    enabled: r.override_enabled ?? r.default_enabled,
    parameters: r.parameters,
    override:
      r.override_enabled === null || r.override_enabled === undefined
        ? null
        : { enabled: r.override_enabled, reason: r.reason!, changed_by: r.changed_by ?? null, changed_at: r.changed_at! },
  }));
}

export function upsertOverride(tx: Tx, orgId: string, o: { factor_key: string; enabled: boolean; reason: string; changed_by: string | null; changed_at: Date }) {
  return tx
    .insertInto('risk_factor_overrides')
    .values({ org_id: orgId, ...o })
    .onConflict((oc) =>
      oc.columns(['org_id', 'factor_key']).doUpdateSet({ enabled: o.enabled, reason: o.reason, changed_by: o.changed_by, changed_at: o.changed_at }),
    )
    .execute();
}

const uuids = (ids: readonly string[]) => sql`${[...ids]}::uuid[]`;

/**
 * Waits for any other recalculation of the organisation to finish (a transaction-level advisory lock): two jobs,
 * or a job and POST .../recalculate, never write scores computed from older facts over newer ones.
 */
export async function lockOrganisation(tx: Tx, orgId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(7310, hashtext(${orgId}))`.execute(tx);
}

/** A JSON column: node-postgres parses it, the embedded driver may hand over the text. */
const json = <T>(v: T | string): T => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

/** One agent's facts as the statement of loadInputs answers them. */
interface FactsRow {
  id: string;
  environment: string;
  data_classification: string;
  internet_exposure: string;
  code_execution: string;
  persistent_memory: string;
  human_approval_coverage: string;
  gateway_enforced: boolean;
  status: string;
  gateway_access: boolean;
  last_attested_at: Date | string | null;
  risk_band: string | null;
  workload_identities: number;
  denied: number;
  secret_detected: number;
  delegations: Array<{ principal_ref: string; principal_type: string; scopes: string[] }> | string;
  bindings: number;
  unscoped_bindings: number;
  tools: Partial<Record<keyof RiskInputs['tools'], Counted>> | string;
  mcp_servers: RiskInputs['mcp_servers'] | string;
  data_reached: RiskInputs['data_reached'] | string;
  shared_credentials: Counted | string;
  findings: RiskInputs['findings'] | string;
  poisoned_tools: Counted | string;
}

const NONE: Counted = { count: 0, examples: [] };

/**
 * The facts of each agent the score reads, for all of `agentIds` in one statement whatever their number or their
 * bindings', aggregated by PostgreSQL (an agent with thousands of bindings answers one row, not thousands):
 *
 * - its own attributes; its active workload identities; its denied decisions over the last `windowDays` (secret
 *   detections apart); its live (unexpired) delegations;
 * - its live bindings (how many, how many not tied to one of its identities) and the tools they reach, each once: the
 *   tool, or every tool of a bound MCP server (as the gateway allows). Tools blocked, or of a class denied to it
 *   (deny-class rules for it or for every agent), are `excluded`; the others count by class (read, write,
 *   high_impact: destructive or financial, privileged: admin), with the first EXAMPLES keys;
 * - the MCP servers it is granted tools of (or bound to), the data resources it reaches (bound directly, or behind a
 *   tool it may call), the shared active credential references behind the tools it may call;
 * - open or in-progress findings about it or a tool it may call, by severity, tool poisoning on such a tool apart
 *   (a detection, counted per tool).
 *
 * Names are ordered by code point (collation "C"), the same everywhere. Answers each agent's inputs and its current
 * band; an id of no agent of the organisation is left out.
 */
export async function loadInputs(
  tx: Tx,
  orgId: string,
  agentIds: readonly string[],
  now: Date,
  windowDays: number,
): Promise<Map<string, { inputs: RiskInputs; band: string | null }>> {
  const out = new Map<string, { inputs: RiskInputs; band: string | null }>();
  if (agentIds.length === 0) return out;
  const ids = uuids(agentIds);
  const since = new Date(now.getTime() - windowDays * 86_400_000);
  const examples = sql.lit(EXAMPLES);
  const { rows } = await sql<FactsRow>`
    with live as (
      select b.agent_id, b.target_kind, b.target_id, b.identity_id from permission_bindings b
       where b.org_id = ${orgId} and b.agent_id = any(${ids}) and (b.expires_at is null or b.expires_at > ${now})
    ), denied as (
      select r.agent_id, r.privilege_class from deny_class_rules r
       where r.org_id = ${orgId} and r.lifted_at is null and (r.agent_id is null or r.agent_id = any(${ids}))
    ), reach as (
      select l.agent_id, l.target_id as tool_id from live l where l.target_kind = 'tool'
      union
      select l.agent_id, t.id from live l join tools t on t.mcp_server_id = l.target_id and t.org_id = ${orgId}
       where l.target_kind = 'mcp_server'
    ), tool as (
      select r.agent_id, t.id, t.tool_key, t.mcp_server_id, t.data_resource_id, t.credential_ref_id,
             t.blocked or exists (select 1 from denied d where d.privilege_class = t.privilege_class
                                    and (d.agent_id is null or d.agent_id = r.agent_id)) as excluded,
             case t.privilege_class when 'read' then 'read' when 'admin' then 'privileged'
                                    when 'destructive' then 'high_impact' when 'financial' then 'high_impact'
                                    else 'write' end as grp
        from reach r join tools t on t.id = r.tool_id and t.org_id = ${orgId}
    ), groups as (
      select agent_id, case when excluded then 'excluded' else grp end as grp, count(*)::int as n,
             (array_agg(tool_key order by tool_key collate "C"))[1:${examples}] as examples
        from tool group by 1, 2
    ), servers as (
      select distinct x.agent_id, s.id, s.name, s.trust_state
        from (select agent_id, mcp_server_id as server_id from tool where mcp_server_id is not null
              union select agent_id, target_id from live where target_kind = 'mcp_server') x
        join mcp_servers s on s.id = x.server_id and s.org_id = ${orgId}
    ), data as (
      select distinct x.agent_id, d.id, d.name, coalesce(d.classification, 'internal') as classification
        from (select agent_id, data_resource_id as data_id from tool where not excluded and data_resource_id is not null
              union select agent_id, target_id from live where target_kind = 'data_resource') x
        join resources d on d.id = x.data_id and d.org_id = ${orgId} and d.resource_type = 'data'
    ), shared as (
      select distinct t.agent_id, c.id, c.name
        from tool t join credential_refs c on c.id = t.credential_ref_id and c.org_id = ${orgId}
       where not t.excluded and c.shared and c.status = 'active'
    ), open_findings as (
      select f.id, f.agent_id, f.tool_id, f.severity, f.category, f.title, f.created_at from findings f
       where f.org_id = ${orgId} and f.status in ('open', 'in_progress')
         and (f.agent_id = any(${ids}) or f.tool_id in (select id from tool where not excluded))
    ), counted as (
      select distinct x.agent_id, f.id, f.severity, f.category, f.title, f.created_at
        from (select id, agent_id from open_findings where agent_id = any(${ids})
              union select f.id, t.agent_id from open_findings f join tool t on t.id = f.tool_id and not t.excluded
                     where f.category <> 'tool_poisoning') x
        join open_findings f on f.id = x.id
    ), poisoned as (
      select distinct t.agent_id, t.tool_key
        from open_findings f join tool t on t.id = f.tool_id and not t.excluded
       where f.category = 'tool_poisoning'
    ),
    -- One row per agent of each, joined below on the agent (a batch of agents stays linear).
    bindings_of as (
      select agent_id, count(*)::int as n, (count(*) filter (where identity_id is null))::int as unscoped from live group by agent_id
    ), tools_of as (
      select agent_id, json_object_agg(grp, json_build_object('count', n, 'examples', examples)) as v from groups group by agent_id
    ), servers_of as (
      select agent_id, json_agg(json_build_object('name', name, 'trust_state', trust_state) order by name collate "C", id) as v
        from servers group by agent_id
    ), data_of as (
      select agent_id, json_agg(json_build_object('name', name, 'classification', classification) order by name collate "C", id) as v
        from data group by agent_id
    ), shared_of as (
      select agent_id, json_build_object('count', count(*), 'examples', (array_agg(name order by name collate "C"))[1:${examples}]) as v
        from shared group by agent_id
    ), findings_of as (
      select agent_id, json_build_object(
               'critical', count(*) filter (where severity = 'critical'), 'high', count(*) filter (where severity = 'high'),
               'medium', count(*) filter (where severity = 'medium'), 'low', count(*) filter (where severity = 'low'),
               'examples', (array_agg(severity || ' ' || category || ': ' || title order by created_at, id))[1:${examples}]) as v
        from counted group by agent_id
    ), poisoned_of as (
      select agent_id, json_build_object('count', count(*), 'examples', (array_agg(tool_key order by tool_key collate "C"))[1:${examples}]) as v
        from poisoned group by agent_id
    ), delegations_of as (
      select agent_id, json_agg(json_build_object('principal_ref', principal_ref, 'principal_type', principal_type, 'scopes', scopes)
                                order by created_at, id) as v
        from delegations
       where org_id = ${orgId} and agent_id = any(${ids}) and (expires_at is null or expires_at > ${now})
       group by agent_id
    ), identities_of as (
      select agent_id, count(*)::int as n from workload_identities
       where org_id = ${orgId} and agent_id = any(${ids}) and status = 'active' group by agent_id
    ), denials_of as (
      select agent_id, count(*)::int as denied, (count(*) filter (where 'SECRET_DETECTED' = any(reason_codes)))::int as secret_detected
        from action_requests
       where org_id = ${orgId} and agent_id = any(${ids}) and decision = 'deny' and created_at > ${since}
       group by agent_id
    )
    select a.id, a.environment, a.data_classification, a.internet_exposure, a.code_execution, a.persistent_memory,
           a.human_approval_coverage, a.gateway_enforced, a.status, a.gateway_access, a.last_attested_at, a.risk_band,
           coalesce(wi.n, 0) as workload_identities,
           coalesce(dn.denied, 0) as denied, coalesce(dn.secret_detected, 0) as secret_detected,
           coalesce(dg.v, '[]') as delegations,
           coalesce(b.n, 0) as bindings, coalesce(b.unscoped, 0) as unscoped_bindings,
           coalesce(tl.v, '{}') as tools,
           coalesce(sv.v, '[]') as mcp_servers,
           coalesce(dt.v, '[]') as data_reached,
           coalesce(sh.v, '{"count": 0, "examples": []}') as shared_credentials,
           coalesce(fi.v, '{"critical": 0, "high": 0, "medium": 0, "low": 0, "examples": []}') as findings,
           coalesce(po.v, '{"count": 0, "examples": []}') as poisoned_tools
      from agents a
      left join identities_of wi on wi.agent_id = a.id
      left join denials_of dn on dn.agent_id = a.id
      left join delegations_of dg on dg.agent_id = a.id
      left join bindings_of b on b.agent_id = a.id
      left join tools_of tl on tl.agent_id = a.id
      left join servers_of sv on sv.agent_id = a.id
      left join data_of dt on dt.agent_id = a.id
      left join shared_of sh on sh.agent_id = a.id
      left join findings_of fi on fi.agent_id = a.id
      left join poisoned_of po on po.agent_id = a.id
     where a.org_id = ${orgId} and a.id = any(${ids})`.execute(tx);

  for (const a of rows) {
    const dels = json(a.delegations);
    const tools = json(a.tools);
    const inputs: RiskInputs = {
      environment: a.environment as RiskInputs['environment'],
      internet_exposure: a.internet_exposure as RiskInputs['internet_exposure'],
      code_execution: a.code_execution as RiskInputs['code_execution'],
      persistent_memory: a.persistent_memory as RiskInputs['persistent_memory'],
      human_approval_coverage: a.human_approval_coverage as RiskInputs['human_approval_coverage'],
      gateway_enforced: a.gateway_enforced,
      status: a.status as RiskInputs['status'],
      gateway_access: a.gateway_access,
      last_attested_at: a.last_attested_at ? iso(a.last_attested_at) : null,
      data_classification: a.data_classification as Classification,
      data_reached: json(a.data_reached),
      tools: {
        write: tools.write ?? NONE,
        high_impact: tools.high_impact ?? NONE,
        privileged: tools.privileged ?? NONE,
        read: tools.read ?? NONE,
        excluded: tools.excluded ?? NONE,
      },
      mcp_servers: json(a.mcp_servers),
      delegations: {
        count: dels.length,
        principals: dels.slice(0, EXAMPLES).map((d) => d.principal_ref),
        groups_or_services: dels.filter((d) => d.principal_type !== 'user').length,
        wildcard_scopes: dels.filter((d) => d.scopes.some((s) => s === '*' || s.endsWith('*'))).length,
      },
      identity: {
        workload_identities: a.workload_identities,
        bindings: a.bindings,
        unscoped_bindings: a.unscoped_bindings,
        shared_credentials: json(a.shared_credentials),
      },
      findings: json(a.findings),
      detections: { window_days: windowDays, denied: a.denied, secret_detected: a.secret_detected, poisoned_tools: json(a.poisoned_tools) },
    };
    out.set(a.id, { inputs, band: a.risk_band });
  }
  return out;
}

export interface Scored {
  agentId: string;
  inputs: RiskInputs;
  result: ScoreResult;
  /** The band on the agent before this score. */
  previousBand: string | null;
}

/** Stores the scores: latest per agent, the day's history row, and the band on the agent where it moved. */
export async function saveScores(tx: Tx, orgId: string, scored: readonly Scored[], now: Date): Promise<void> {
  if (scored.length === 0) return;
  const day = iso(now).slice(0, 10);
  await tx
    .insertInto('risk_scores')
    .values(
      scored.map((s) => ({
        org_id: orgId,
        agent_id: s.agentId,
        score: s.result.score,
        band: s.result.band,
        raw_total: s.result.raw,
        factors: JSON.stringify(s.result.factors),
        inputs: JSON.stringify(s.inputs),
        computed_at: now,
      })),
    )
    .onConflict((oc) =>
      oc.columns(['org_id', 'agent_id']).doUpdateSet((eb) => ({
        score: eb.ref('excluded.score'),
        band: eb.ref('excluded.band'),
        raw_total: eb.ref('excluded.raw_total'),
        factors: eb.ref('excluded.factors'),
        inputs: eb.ref('excluded.inputs'),
        computed_at: eb.ref('excluded.computed_at'),
      })),
    )
    .execute();
  await tx
    .insertInto('risk_history')
    .values(scored.map((s) => ({ org_id: orgId, agent_id: s.agentId, day, score: s.result.score, band: s.result.band, computed_at: now })))
    .onConflict((oc) =>
      oc.columns(['org_id', 'agent_id', 'day']).doUpdateSet((eb) => ({
        score: eb.ref('excluded.score'),
        band: eb.ref('excluded.band'),
        computed_at: eb.ref('excluded.computed_at'),
      })),
    )
    .execute();
  // Only a band that moved is written: an update of agents raises the registry version (migration 0006).
  const moved = new Map<Band, string[]>();
  for (const s of scored) if (s.previousBand !== s.result.band) moved.set(s.result.band, [...(moved.get(s.result.band) ?? []), s.agentId]);
  for (const [band, agentIds] of moved) {
    await tx.updateTable('agents').set({ risk_band: band }).where('org_id', '=', orgId).where(sql<boolean>`id = any(${uuids(agentIds)})`).execute();
  }
}

export function getScore(tx: Tx, orgId: string, agentId: string) {
  return tx.selectFrom('risk_scores').selectAll().where('org_id', '=', orgId).where('agent_id', '=', agentId).executeTakeFirst();
}

/** The agent's history rows from `since` (a day, YYYY-MM-DD) on, oldest first. */
export function historyOf(tx: Tx, orgId: string, agentId: string, since: string) {
  return tx
    .selectFrom('risk_history')
    .select([sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'), 'score', 'band', 'computed_at'])
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('day', '>=', since)
    .orderBy('day')
    .execute();
}

export async function isStale(tx: Tx, orgId: string, agentId: string): Promise<boolean> {
  const row = await tx.selectFrom('risk_stale').select('agent_id').where('org_id', '=', orgId).where('agent_id', '=', agentId).executeTakeFirst();
  return row !== undefined;
}

/** The marks of these agents as they are now (generation per agent). */
export async function staleGenerations(tx: Tx, orgId: string, agentIds: readonly string[]): Promise<Map<string, string>> {
  const rows = await tx
    .selectFrom('risk_stale')
    .select(['agent_id', 'generation'])
    .where('org_id', '=', orgId)
    .where(sql<boolean>`agent_id = any(${uuids(agentIds)})`)
    .execute();
  return new Map(rows.map((r) => [r.agent_id, String(r.generation)]));
}

/** Clears the marks seen; one moved since (a newer change) stays for the next job. */
export async function clearStale(tx: Tx, orgId: string, seen: ReadonlyMap<string, string>): Promise<void> {
  if (seen.size === 0) return;
  await sql`delete from risk_stale
    where org_id = ${orgId}
      and (agent_id, generation) in (select * from unnest(${[...seen.keys()]}::uuid[], ${[...seen.values()]}::bigint[]))`.execute(tx);
}

/** The agents marked stale, in a stable order. */
export async function staleAgents(tx: Tx, orgId: string): Promise<string[]> {
  const rows = await tx.selectFrom('risk_stale').select('agent_id').where('org_id', '=', orgId).orderBy('agent_id').execute();
  return rows.map((r) => r.agent_id);
}

export async function allAgents(tx: Tx, orgId: string): Promise<string[]> {
  const rows = await tx.selectFrom('agents').select('id').where('org_id', '=', orgId).orderBy('id').execute();
  return rows.map((r) => r.id);
}

export interface Claim {
  fullGeneration: number;
  fullDone: number;
  /** The daily refresh was due (or missed): recalculate every agent. */
  refreshDue: boolean;
  /** This claim moved the next refresh a day ahead: queue its job. */
  scheduleRefresh: boolean;
}

/**
 * A job takes the organisation's requests: from now on a writer queues a new job (its marks may come after the
 * ones this job reads). Moves the daily refresh a day ahead when it is due or was never set. Null when the
 * organisation never asked for anything.
 */
export async function claimRequests(tx: Tx, orgId: string): Promise<Claim | null> {
  const { rows } = await sql<{ full_generation: string; full_done: string; previous_due: Date | null; due: Date; now: Date }>`
    update risk_orgs r
       set job_queued = false,
           refresh_due_at = case when old.refresh_due_at is null or old.refresh_due_at <= now() + interval '5 minutes'
                                 then now() + interval '1 day' else old.refresh_due_at end
      from (select org_id, refresh_due_at from risk_orgs where org_id = ${orgId} for update) old
     where r.org_id = old.org_id
    returning r.full_generation, r.full_done, old.refresh_due_at as previous_due, r.refresh_due_at as due, now() as now`.execute(tx);
  const r = rows[0];
  if (!r) return null;
  const refreshDue = r.previous_due !== null && new Date(r.previous_due).getTime() <= new Date(r.now).getTime() + 5 * 60_000;
  return { fullGeneration: Number(r.full_generation), fullDone: Number(r.full_done), refreshDue, scheduleRefresh: r.previous_due === null || refreshDue };
}

/** Queues the job of the next daily refresh (pg-boss, via the migration's risk_enqueue). */
export async function queueRefresh(tx: Tx, orgId: string, delaySeconds: number): Promise<void> {
  await sql`select risk_enqueue(${orgId}::uuid, ${delaySeconds}::int)`.execute(tx);
}

/** Records that every agent was recalculated after organisation-wide request `generation`. */
export async function fullDone(tx: Tx, orgId: string, generation: number): Promise<void> {
  await sql`update risk_orgs set full_done = greatest(full_done, ${generation}::bigint) where org_id = ${orgId}`.execute(tx);
}
