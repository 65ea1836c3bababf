import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { CLASSIFICATION, CODE_EXECUTION, HUMAN_APPROVAL_COVERAGE, INTERNET_EXPOSURE, PERSISTENT_MEMORY, RISK_BAND } from '../shared/index.js';
import { DELEGATION_BREADTH } from './score.js';

export const riskAgentParams = z.object({ agent_id: z.uuid() });
export const factorParams = z.object({
  factor_key: z.string().regex(/^[a-z][a-z0-9_]{1,62}$/, 'a factor key: lower-case letters, digits and underscores').describe('e.g. internet_exposure'),
});

export const historyQuery = z.object({
  days: z.coerce.number().int().min(1).max(365).default(90).describe('How many days back, today included: 1-365, default 90'),
});

export const rulesetPatch = z.object({
  enabled: z.boolean().describe('Whether the factor counts for this organisation'),
  reason: z.string().trim().min(5).max(1000).describe('Why, for the audit trail and the evidence: 5-1000 characters once trimmed'),
});
export type RulesetPatch = z.output<typeof rulesetPatch>;

const nullable = <T extends z.ZodType>(t: T, description: string) => t.nullable().optional().describe(description);

/** The spec's WhatIf: every field optional; absent or null changes nothing. */
export const whatIfIn = z.object({
  internet_exposure: nullable(z.enum(INTERNET_EXPOSURE), 'the internet exposure to assume'),
  code_execution: nullable(z.enum(CODE_EXECUTION), 'the code execution to assume'),
  approval_coverage: nullable(z.enum(HUMAN_APPROVAL_COVERAGE), 'the human approval coverage to assume'),
  persistent_memory: nullable(z.enum(PERSISTENT_MEMORY), 'the persistent memory to assume'),
  production: nullable(z.boolean(), 'true: in production; false: not (production becomes development, staging stays staging)'),
  has_high_impact_tools: nullable(z.boolean(), 'true: granted a destructive or financial tool (a hypothetical one if it has none); false: none'),
  has_privileged_tools: nullable(z.boolean(), 'true: granted an admin tool (a hypothetical one if it has none); false: none'),
  has_write_tools: nullable(z.boolean(), 'true: granted a write tool (a hypothetical one if it has none); false: none'),
  gateway_enforced: nullable(z.boolean(), 'whether its tool calls are enforced through the gateway'),
  attestation_current: nullable(z.boolean(), 'true: the owner attested it now; false: never attested'),
  delegation_breadth: nullable(z.enum(DELEGATION_BREADTH), 'how widely it acts for people: none, narrow, broad'),
  max_data_classification: nullable(z.enum(CLASSIFICATION), 'the most sensitive data it reaches (its own classification becomes this; data above it counts as this)'),
  resolve_findings: z.boolean().default(false).describe('true: its open findings are resolved'),
  clear_detections: z.boolean().default(false).describe('true: no denied decisions and no poisoned tools'),
  approve_mcp_servers: z.boolean().default(false).describe('true: every MCP server it uses is approved'),
  use_scoped_identity: z.boolean().default(false).describe('true: its own workload identity, bindings tied to it, no shared credential'),
});
export type WhatIfIn = z.output<typeof whatIfIn>;

const band = z.enum(RISK_BAND);

export const factorResultOut = z.object({
  key: z.string(),
  description: z.string(),
  weight: z.number().int().describe('the most points the factor moves the score; negative lowers it'),
  enabled: z.boolean(),
  contribution: z.number().int().describe('points this factor adds to the total (negative: takes away); 0 when disabled'),
  computed: z.number().int().describe('what the factor would contribute if enabled (equal to contribution when it is)'),
  why: z.string().describe('the facts used, in words'),
});

export const scoreOut = z.object({
  agent_id: z.uuid(),
  score: z.number().int().min(0).max(100).describe('the sum of the contributions, bounded to 0-100'),
  band: band.describe('low 0-24, medium 25-49, high 50-74, critical 75-100'),
  raw_total: z.number().int().describe('the sum of the contributions before bounding'),
  factors: z.array(factorResultOut).describe('every factor of the ruleset, in its order'),
  inputs: z.record(z.string(), z.unknown()).describe('the facts the score was computed from, as gathered from the registry'),
  computed_at: timestamp,
  stale: z
    .boolean()
    .describe('true when an input changed since computed_at and the recalculation is queued, or no score was stored yet (then computed now, not saved)'),
});
export type ScoreOut = z.infer<typeof scoreOut>;

export const historyOut = z.object({
  agent_id: z.uuid(),
  days: z.number().int(),
  items: z
    .array(z.object({ day: z.iso.date(), score: z.number().int(), band, computed_at: timestamp.describe("the day's last recalculation") }))
    .describe('one entry per day with a recalculation, oldest first; a day without one kept the score before it'),
});

export const factorOut = z.object({
  key: z.string(),
  position: z.number().int(),
  description: z.string(),
  weight: z.number().int().describe('the most points the factor moves the score; negative lowers it'),
  enabled: z.boolean().describe('whether it counts for this organisation'),
  default_enabled: z.boolean().describe("Tollgate's default"),
  parameters: z.record(z.string(), z.unknown()).describe('what the factor reads besides its weight (thresholds, points per item)'),
  override: z
    .object({ enabled: z.boolean(), reason: z.string(), changed_by: z.uuid().nullable(), changed_at: timestamp })
    .nullable()
    .describe("the organisation's last change of the factor, or null"),
});
export type FactorOut = z.infer<typeof factorOut>;

export const rulesetOut = z.object({
  factors: z.array(factorOut),
  bands: z.array(z.object({ band, from: z.number().int(), to: z.number().int() })).describe('score ranges of each band, both ends included'),
});

export const whatIfOut = z.object({
  agent_id: z.uuid(),
  applied: z.array(z.string()).describe('the WhatIf fields that changed something'),
  current: z.object({ score: z.number().int(), band }).describe("the agent's score from its inputs now"),
  proposed: z.object({ score: z.number().int(), band }).describe('the score with the changes'),
  difference: z.number().int().describe('proposed minus current score'),
  factors: z.array(
    z.object({
      key: z.string(),
      description: z.string(),
      weight: z.number().int(),
      enabled: z.boolean(),
      current: z.number().int(),
      proposed: z.number().int(),
      difference: z.number().int(),
      why: z.string().describe('the facts of the proposed inputs, in words'),
    }),
  ),
  saved: z.literal(false).describe('a what-if never saves anything'),
});
