import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { DECISION_OUTCOMES, TELEMETRY_EVENT_TYPES, TELEMETRY_SEVERITY } from './telemetry.catalogue.js';

const types = TELEMETRY_EVENT_TYPES.map((t) => `\`${t}\``).join(', ');

/** The filters of GET /telemetry, each optional (absent: any). */
export const telemetryQuery = z.object({
  event_type: z
    .string()
    .min(1)
    .max(80)
    .optional()
    .describe(`exact event type: ${types} (docs/telemetry.md); another value matches nothing`),
  severity: z.enum(TELEMETRY_SEVERITY).optional().describe('exact severity'),
  q: z.string().min(1).max(200).optional().describe('text searched in the summary, case-insensitively'),
  correlation_id: z.string().min(1).max(200).optional().describe('exact correlation ID (X-Correlation-ID of the request that caused the event)'),
  agent_id: z.uuid().optional().describe('events about this agent'),
  since: timestamp.optional().describe('events at or after this time'),
  until: timestamp.optional().describe('events before this time (exclusive); must be after `since`'),
});
export type TelemetryQuery = z.output<typeof telemetryQuery>;

export const telemetryEventOut = z.object({
  id: z.uuid(),
  event_type: z.string().describe(`one of ${types}`),
  severity: z.enum(TELEMETRY_SEVERITY),
  occurred_at: timestamp,
  agent_id: z.uuid().nullable().describe('the agent the event is about, if any'),
  correlation_id: z.string().describe('the correlation ID of the request (or discovery run) that caused it'),
  summary: z.string().describe('one line for people; `q` searches it'),
  attributes: z.record(z.string(), z.unknown()).describe("the type's attributes (docs/telemetry.md, The event types)"),
});
export type TelemetryEventOut = z.infer<typeof telemetryEventOut>;

export const statsQuery = z.object({
  hours: z.coerce.number().int().min(1).max(720).default(24).describe('hours to cover, the current one included (1-720)'),
});

const counts = <K extends readonly [string, ...string[]]>(keys: K, what: string) =>
  z.object(Object.fromEntries(keys.map((k) => [k, z.number().int()])) as Record<K[number], z.ZodNumber>).describe(what);

const latency = z
  .object({
    p50: z.number().nullable(),
    p95: z.number().nullable(),
  })
  .describe('gateway decision latency in milliseconds (attribute latency_ms), median and 95th percentile; null without decisions');

const tally = {
  events: z.number().int(),
  by_type: z.record(z.string(), z.number().int()).describe('events per type: every catalogued type, zero included'),
  by_severity: counts(TELEMETRY_SEVERITY, 'events per severity'),
  decisions: counts(DECISION_OUTCOMES, 'gateway decisions per outcome'),
  decision_latency_ms: latency,
};

export const statsOut = z.object({
  hours: z.number().int(),
  since: timestamp.describe('start of the first hour covered (UTC, on the hour)'),
  until: timestamp.describe('end of the last hour covered: the end of the current hour'),
  totals: z.object(tally).describe('the whole window'),
  series: z
    .array(z.object({ hour: timestamp.describe('start of the hour (UTC)'), ...tally }))
    .describe('one entry per hour, oldest first, hours without events included'),
});
export type StatsOut = z.infer<typeof statsOut>;
