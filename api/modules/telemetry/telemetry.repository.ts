import { randomUUID } from 'node:crypto';
import { sql, type QueryCreator, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { DB, TelemetryEventsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { likePattern } from '../../platform/schemas.js';
import type { TelemetryEvent } from './telemetry.catalogue.js';

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
      id: randomUUID(),
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

/** One page of events, newest first (one row more than `limit`, to tell whether more follow). */
export function listTelemetry(tx: Tx, orgId: string, f: TelemetryFilters, after: Position | undefined, limit: number) {
  let q = tx.selectFrom('telemetry_events').selectAll().where('org_id', '=', orgId);
  if (f.event_type) q = q.where('event_type', '=', f.event_type);
  if (f.severity) q = q.where('severity', '=', f.severity as TelemetryRow['severity']);
  if (f.agent_id) q = q.where('agent_id', '=', f.agent_id);
  if (f.correlation_id) q = q.where('correlation_id', '=', f.correlation_id);
  if (f.q) q = q.where('summary', 'ilike', likePattern(f.q));
  if (f.since) q = q.where('occurred_at', '>=', f.since);
  if (f.until) q = q.where('occurred_at', '<', f.until);
  if (after) q = q.where(sql<boolean>`(occurred_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('occurred_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
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
 * window are read once (only the columns counted), grouped by hour in UTC.
 */
export async function telemetryCounts(tx: Tx, orgId: string, since: Date, until: Date): Promise<{ counts: HourCount[]; latency: HourLatency[] }> {
  const { rows } = await sql<{ counts: HourCount[]; latency: HourLatency[] }>`
    with ev as (
      select floor(extract(epoch from occurred_at) / 3600)::bigint as hour,
             event_type, severity,
             case when event_type = 'gateway.decision' then attributes->>'decision' end as decision,
             case when event_type = 'gateway.decision' then (attributes->>'latency_ms')::float8 end as latency
      from telemetry_events
      where org_id = ${orgId} and occurred_at >= ${since} and occurred_at < ${until}
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
