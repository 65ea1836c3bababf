import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { validationFailed } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { DECISION_OUTCOMES, TELEMETRY_EVENT_TYPES, TELEMETRY_SEVERITY } from './telemetry.catalogue.js';
import { listTelemetry, telemetryCounts, type HourCount, type HourLatency, type TelemetryRow } from './telemetry.repository.js';
import type { StatsOut, TelemetryEventOut, TelemetryQuery } from './telemetry.schemas.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** What a read needs besides the organisation: the time, and how far back telemetry is kept. */
export interface TelemetryReadDeps {
  db: Db;
  clock: Clock;
  retentionDays: number;
}

/**
 * The start of the retention window: decisions read from the actions are answered from here on, as the
 * events of telemetry_events are (those older are deleted by the retention job within 10 minutes).
 */
const retentionCutoff = (deps: TelemetryReadDeps) => new Date(deps.clock.now().getTime() - deps.retentionDays * DAY_MS);

export function toTelemetryEvent(r: TelemetryRow): TelemetryEventOut {
  return {
    id: r.id,
    event_type: r.event_type,
    severity: r.severity,
    occurred_at: iso(r.occurred_at),
    agent_id: r.agent_id,
    correlation_id: r.correlation_id,
    summary: r.summary,
    attributes: r.attributes,
  };
}

/** One page of the organisation's telemetry, newest first. */
export function telemetryPage(deps: TelemetryReadDeps, cursors: Cursors, orgId: string, query: TelemetryQuery & { limit: number; cursor?: string }) {
  const { limit, cursor, since, until, ...filters } = query;
  if (since && until && Date.parse(until) <= Date.parse(since)) {
    throw validationFailed([{ field: 'query.until', message: 'must be after since' }], 'until must be after since.');
  }
  const scope = `telemetry:${orgId}`;
  const after = cursors.decode(scope, cursor);
  return inScope(deps.db, { orgId }, async (tx) => {
    const rows = await listTelemetry(
      tx,
      orgId,
      { ...filters, since: since ? new Date(since) : undefined, until: until ? new Date(until) : undefined },
      after,
      limit,
      retentionCutoff(deps),
    );
    return cursors.page(scope, rows, limit, (e) => ({ t: iso(e.occurred_at), id: e.id }), toTelemetryEvent);
  });
}

type Tally = StatsOut['totals'];

function emptyTally(): Tally {
  return {
    events: 0,
    by_type: Object.fromEntries(TELEMETRY_EVENT_TYPES.map((t) => [t, 0])),
    by_severity: Object.fromEntries(TELEMETRY_SEVERITY.map((s) => [s, 0])) as Tally['by_severity'],
    decisions: Object.fromEntries(DECISION_OUTCOMES.map((d) => [d, 0])) as Tally['decisions'],
    decision_latency_ms: { p50: null, p95: null },
  };
}

function add(t: Tally, c: HourCount): void {
  t.events += c.n;
  t.by_type[c.event_type] = (t.by_type[c.event_type] ?? 0) + c.n;
  const severity = c.severity as keyof Tally['by_severity'];
  if (severity in t.by_severity) t.by_severity[severity] += c.n;
  const decision = c.decision as keyof Tally['decisions'] | null;
  if (decision && decision in t.decisions) t.decisions[decision] += c.n;
}

const ms = (v: number | null) => (v === null ? null : Math.round(v * 1000) / 1000);

/**
 * Counts per hour over the last `hours` hours, the current one included: events by type and severity,
 * decisions by outcome, and decision latency p50/p95, per hour and for the whole window. Hours without
 * events are listed with zeros.
 */
export async function telemetryStats(deps: TelemetryReadDeps, orgId: string, hours: number): Promise<StatsOut> {
  const currentHour = Math.floor(deps.clock.now().getTime() / HOUR_MS);
  const first = currentHour - hours + 1;
  const since = new Date(first * HOUR_MS);
  const until = new Date((currentHour + 1) * HOUR_MS);
  const { counts, latency } = await inScope(deps.db, { orgId }, (tx) => telemetryCounts(tx, orgId, since, until, retentionCutoff(deps)));

  const totals = emptyTally();
  const series = Array.from({ length: hours }, (_, i) => ({ hour: iso(new Date((first + i) * HOUR_MS)), ...emptyTally() }));
  for (const c of counts) {
    add(totals, c);
    const bucket = series[c.hour - first];
    if (bucket) add(bucket, c);
  }
  const setLatency = (t: Tally, l: HourLatency) => (t.decision_latency_ms = { p50: ms(l.p50), p95: ms(l.p95) });
  for (const l of latency) {
    if (l.hour === null) setLatency(totals, l);
    else {
      const bucket = series[l.hour - first];
      if (bucket) setLatency(bucket, l);
    }
  }
  return { hours, since: iso(since), until: iso(until), totals, series };
}
