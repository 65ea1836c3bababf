import { randomUUID } from 'node:crypto';
import { sql, type QueryCreator, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { DB, TelemetryEventsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { likePattern } from '../../platform/schemas.js';
import { HIGH_SEVERITY_DENY_REASONS, SUMMARY_MAX, type TelemetryEvent } from './telemetry.catalogue.js';

export type TelemetryRow = Selectable<TelemetryEventsTable>;

/**
 * The insert of `events` as one statement, on any query creator: a transaction, or the common table
 * expressions of another statement (the gateway writes its decisions' events in its batch's one
 * statement, beside the actions and their evidence).
 */
export function insertTelemetry(db: QueryCreator<DB>, orgId: string, events: TelemetryEvent[]) {
  return db.insertInto('telemetry_events').values(
    events.map((e) => ({
      org_id: orgId,
      occurred_at: e.occurredAt,
      id: e.id ?? randomUUID(),
      event_type: e.eventType,
      severity: e.severity,
      agent_id: e.agentId,
      correlation_id: e.correlationId,
      summary: e.summary,
      attributes: JSON.stringify(e.attributes),
    })),
  );
}

/** Writes events in the caller's transaction (organisation already set), as one statement. */
export async function recordTelemetry(tx: Tx, orgId: string, events: TelemetryEvent[]): Promise<void> {
  if (events.length === 0) return;
  await insertTelemetry(tx, orgId, events).execute();
}

export interface TelemetryFilters {
  event_type?: string;
  severity?: string;
  q?: string;
  correlation_id?: string;
  agent_id?: string;
  since?: Date;
  until?: Date;
}

const DECISION = 'gateway.decision';

/**
 * The `gateway.decision` events read from the actions (migration 0013, D26): one per action whose first
 * decision is still its own (`decision_ms` set), from `cutoff` on, with the columns of telemetry_events.
 * Severity, summary and attributes are exactly what `telemetryEvents.decision` builds (a test compares
 * them); the id is the action's.
 */
function decisionEvents(orgId: string, cutoff: Date) {
  const said = sql`a.decision || ' ' || a.tool || ' (' || a.operation || ')' ||
    case when cardinality(a.reason_codes) > 0 then ': ' || array_to_string(a.reason_codes, ', ') else '' end`;
  return sql`
    select a.org_id, a.created_at as occurred_at, a.id, ${DECISION}::text as event_type,
           case a.decision when 'allow' then 'info' when 'require_approval' then 'low'
             else case when a.reason_codes && ${[...HIGH_SEVERITY_DENY_REASONS]}::text[] then 'high' else 'medium' end
           end as severity,
           a.agent_id, a.correlation_id,
           case when char_length(${said}) > ${SUMMARY_MAX} then left(${said}, ${SUMMARY_MAX - 1}) || '…' else ${said} end as summary,
           jsonb_build_object('action_id', a.id, 'tool', a.tool, 'operation', a.operation, 'decision', a.decision,
             'reason_codes', to_jsonb(a.reason_codes), 'latency_ms', a.decision_ms, 'source', a.source, 'redeemed', false) as attributes
    from action_requests a
    where a.org_id = ${orgId} and a.decision_ms is not null and a.created_at >= ${cutoff}`;
}

/**
 * One page of events, newest first (one row more than `limit`, to tell whether more follow): the rows of
 * telemetry_events and the decisions read from the actions since `cutoff` (the retention window), each
 * side walked in the listing order and cut at the page, then merged.
 */
export async function listTelemetry(
  tx: Tx,
  orgId: string,
  f: TelemetryFilters,
  after: Position | undefined,
  limit: number,
  cutoff: Date,
): Promise<TelemetryRow[]> {
  const conds = [sql`org_id = ${orgId}`];
  if (f.event_type) conds.push(sql`event_type = ${f.event_type}`);
  if (f.severity) conds.push(sql`severity = ${f.severity}`);
  if (f.agent_id) conds.push(sql`agent_id = ${f.agent_id}::uuid`);
  if (f.correlation_id) conds.push(sql`correlation_id = ${f.correlation_id}`);
  if (f.q) conds.push(sql`summary ilike ${likePattern(f.q)}`);
  if (f.since) conds.push(sql`occurred_at >= ${f.since}`);
  if (f.until) conds.push(sql`occurred_at < ${f.until}`);
  if (after) conds.push(sql`(occurred_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  const where = sql.join(conds, sql` and `);
  const page = sql`order by occurred_at desc, id desc limit ${limit + 1}`;
  const logged = sql`(select org_id, occurred_at, id, event_type, severity, agent_id, correlation_id, summary, attributes
                      from telemetry_events where ${where} ${page})`;
  const query =
    f.event_type && f.event_type !== DECISION
      ? logged
      : sql`select * from (${logged} union all (select * from (${decisionEvents(orgId, cutoff)}) d where ${where} ${page})) u ${page}`;
  const { rows } = await sql<TelemetryRow>`${query}`.execute(tx);
  return rows;
}

/** Events counted per hour (hours since the epoch, UTC) by type, severity and, for decisions, outcome. */
export interface HourCount {
  hour: number;
  event_type: string;
  severity: string;
  decision: string | null;
  n: number;
}

/** Decision latency percentiles per hour; `hour` null for the whole window. */
export interface HourLatency {
  hour: number | null;
  p50: number | null;
  p95: number | null;
}

/**
 * The counts and latency percentiles of the events in [since, until), in one statement: the rows of the
 * window (telemetry_events, and the decisions read from the actions since `cutoff`) are read once (only
 * the columns counted), grouped by hour in UTC.
 */
export async function telemetryCounts(
  tx: Tx,
  orgId: string,
  since: Date,
  until: Date,
  cutoff: Date,
): Promise<{ counts: HourCount[]; latency: HourLatency[] }> {
  const hour = (column: string) => sql`floor(extract(epoch from ${sql.ref(column)}) / 3600)::bigint`;
  const from = since > cutoff ? since : cutoff;
  const { rows } = await sql<{ counts: HourCount[]; latency: HourLatency[] }>`
    with ev as (
      select ${hour('occurred_at')} as hour,
             event_type, severity,
             case when event_type = ${DECISION} then attributes->>'decision' end as decision,
             case when event_type = ${DECISION} then (attributes->>'latency_ms')::float8 end as latency
      from telemetry_events
      where org_id = ${orgId} and occurred_at >= ${since} and occurred_at < ${until}
      union all
      select ${hour('created_at')}, ${DECISION}::text,
             case decision when 'allow' then 'info' when 'require_approval' then 'low'
               else case when reason_codes && ${[...HIGH_SEVERITY_DENY_REASONS]}::text[] then 'high' else 'medium' end
             end,
             decision, decision_ms
      from action_requests
      where org_id = ${orgId} and decision_ms is not null and created_at >= ${from} and created_at < ${until}
    )
    select
      (select coalesce(json_agg(c), '[]'::json) from (
         select hour, event_type, severity, decision, count(*)::int as n from ev group by 1, 2, 3, 4
       ) c) as counts,
      (select coalesce(json_agg(l), '[]'::json) from (
         select case when grouping(hour) = 1 then null else hour end as hour,
                percentile_cont(0.5) within group (order by latency) as p50,
                percentile_cont(0.95) within group (order by latency) as p95
         from ev where latency is not null
         group by grouping sets ((hour), ())
       ) l) as latency`.execute(tx);
  const r = rows[0];
  return { counts: (r?.counts ?? []).map((c) => ({ ...c, hour: Number(c.hour) })), latency: (r?.latency ?? []).map((l) => ({ ...l, hour: l.hour === null ? null : Number(l.hour) })) };
}

/**
 * Deletes at most `limit` events older than `before`, across every organisation (the owner-defined
 * purge_telemetry of migration 0012: the runtime role sees one organisation at a time). Answers how many.
 */
export async function purgeTelemetry(db: Db, before: Date, limit: number): Promise<number> {
  const { rows } = await sql<{ deleted: number }>`select purge_telemetry(${before}, ${limit}) as deleted`.execute(db);
  return Number(rows[0]?.deleted ?? 0);
}
