import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { conditionSchema } from './catalogue.js';
import type { ControlStatus, FrameworkCoverage } from './coverage.js';

/** The window coverage is computed over, in days, unless a caller asks for another. */
export const DEFAULT_WINDOW_DAYS = 90;

/** The largest condition a mapping may carry, as JSON text. */
export const MAX_CONDITION_CHARS = 4000;

export const controlParams = z.object({ control_id: z.uuid() });

const condition = conditionSchema.describe(
  'what the evidence record’s payload must contain, as a JSON object (PostgreSQL jsonb containment, `payload @> condition`): ' +
    'every key present with an equal value, objects matched recursively, arrays containing the listed elements. ' +
    'E.g. {"decision":"deny"} or {"reason_codes":["SECRET_DETECTED"]}. An empty object is no condition',
);

/** An organisation's mapping of an evidence event type to a control (POST /controls/{control_id}/mappings). */
export const mappingIn = z.object({
  evidence_event_type: z
    .string()
    .min(3)
    .max(80)
    .regex(/^\S+$/, 'an event type name, without spaces')
    .describe('the evidence event type that shows the control works (docs/governance.md lists the catalogue): 3-80 characters'),
  rationale: z.string().trim().min(5).max(1000).describe('why this evidence shows the control works: 5-1000 characters once trimmed'),
  condition: condition.nullable().optional(),
});
export type MappingIn = z.output<typeof mappingIn>;

export const mappingOut = z.object({
  id: z.uuid().nullable().describe('the mapping’s id; null for a default mapping of the catalogue'),
  control_id: z.uuid(),
  source: z.enum(['catalogue', 'organisation']).describe('catalogue: a default mapping shipped with the framework; organisation: one of yours'),
  evidence_event_type: z.string(),
  condition: z.record(z.string(), z.unknown()).nullable().describe('what the payload must contain (jsonb @>), or null for any record of the type'),
  rationale: z.string(),
  catalogued: z.boolean().describe('whether Tollgate writes this event type today (an uncatalogued type is accepted, and counts once something writes it)'),
  created_at: timestamp.nullable(),
  created_by: z.uuid().nullable(),
});
export type MappingOut = z.infer<typeof mappingOut>;

const controlStatusShape = {
  id: z.uuid(),
  ref: z.string().describe('the framework’s reference, e.g. Art.14, GOVERN-1, A.6'),
  title: z.string(),
  status: z.enum(['met', 'excepted', 'not_met']),
  why: z.string().describe('in words: the evidence found, the exception covering it, the open remediation task, or the evidence missing'),
};

export const controlStatusOut = z.object(controlStatusShape);

export const controlOut = z.object({
  ...controlStatusShape,
  key: z.string().describe('`<framework>:<ref>`, e.g. eu-ai-act:Art.14; evidence records about the control carry it in control_ref'),
  framework: z.object({ key: z.string(), name: z.string(), version: z.string() }),
  description: z.string(),
  window_days: z.number().int().describe('the window the status is computed over'),
  mappings: z.array(mappingOut).describe('the catalogue’s default mappings first, then the organisation’s, oldest first'),
});

export const frameworksQuery = z.object({
  days: z.coerce
    .number()
    .int()
    .min(1)
    .max(365)
    .default(DEFAULT_WINDOW_DAYS)
    .describe(`the window in days, ending now: evidence older than this does not count (1-365, default ${DEFAULT_WINDOW_DAYS}; Tollgate's extension)`),
});

export const frameworkCoverageOut = z.object({
  key: z.string().describe('e.g. eu-ai-act, nist-ai-rmf, iso-42001'),
  name: z.string(),
  version: z.string(),
  controls_total: z.number().int(),
  controls_met: z.number().int(),
  controls_excepted: z.number().int(),
  controls_not_met: z.number().int(),
  coverage_percent: z.number().min(0).max(100).describe('(met + excepted) / total, in percent, one decimal'),
  readiness: z.enum(['ready', 'partial', 'not_ready']).describe('ready: no control not met; partial: at least 50 % covered; not_ready: less'),
  window_days: z.number().int(),
  since: timestamp,
  until: timestamp,
  failing_controls: z.array(controlStatusOut).describe('every control not met, with why'),
  controls: z.array(controlStatusOut),
});

export const frameworksOut = z.object({ items: z.array(frameworkCoverageOut) });

// The interfaces of coverage.ts and the schemas that answer them must agree, both ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;
const _status: Same<z.infer<typeof controlStatusOut>, ControlStatus> = true;
const _coverage: Same<z.infer<typeof frameworkCoverageOut>, FrameworkCoverage> = true;
void _status;
void _coverage;
