import { z } from 'zod';
import { replaySummaryOut, sessionIn } from './replay.schemas.js';

/**
 * The spec's Rule. Its shape is checked here (422 validation_failed); what it says (fields, operators,
 * operands, CEL, regular expressions) is checked by the compiler (422 invalid_policy, naming the rule
 * and condition).
 */
export const condition = z
  .object({
    field: z.string().min(1).max(300).optional().describe('The field the condition reads (GET /policies/operators); none for cel'),
    op: z.string().min(1).max(40).describe('An operator of GET /policies/operators'),
    value: z.unknown().optional().describe("The operand: its type is the operator's"),
  })
  .strict();

export const rule = z
  .object({
    id: z.string().regex(/^[A-Za-z0-9._:-]{1,100}$/, 'letters, digits and . _ : -, at most 100'),
    description: z.string().max(2000).optional(),
    effect: z.enum(['allow', 'deny', 'require_approval']),
    reason_code: z.string().regex(/^[A-Z][A-Z0-9_]{2,99}$/, 'UPPER_SNAKE_CASE, 3-100 characters'),
    conditions: z.array(condition).max(50).describe('Every condition must hold for the effect to apply; none always holds'),
    obligations: z
      .object({ approvals_required: z.number().int().min(1).max(5) })
      .strict()
      .optional()
      .describe('require_approval only: how many distinct people must approve (default 1)'),
  })
  .strict();

export const rules = z.array(rule).min(1).max(200);

export const policyIn = z.object({
  key: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{2,99}$/, '3-100 letters, digits and . _ -, beginning with a letter or digit'),
  name: z.string().trim().min(3).max(200),
  rules,
  description: z.string().max(2000).default(''),
  critical: z.boolean().default(false),
  change_note: z.string().max(2000).default('Initial draft'),
});

export const versionIn = z.object({
  rules,
  change_note: z.string().trim().min(3).max(2000),
});

export const statusIn = z.object({
  status: z.enum(['active', 'inactive']),
  confirm: z.boolean().default(false).describe('Required (true) to deactivate a critical policy'),
  reason: z.string().trim().min(3).max(2000).optional().describe('Required to deactivate a critical policy'),
});

export const simulateIn = z.object({
  agent_id: z.uuid(),
  tool: z.string().min(1).max(200),
  operation: z.string().max(100).default('invoke'),
  target: z.string().max(500).default(''),
  parameters: z.record(z.string(), z.unknown()).default({}),
  environment: z.string().max(100).nullable().optional(),
  on_behalf_of: z.string().max(300).nullable().optional(),
  justification: z.string().max(2000).nullable().optional(),
  draft_rules: z.array(rule).max(200).nullable().optional().describe('Evaluated instead of the published rules of active policies'),
  approval_present: z.boolean().default(false),
  session: sessionIn
    .nullable()
    .optional()
    .describe('What the agent did earlier in the session, for rules on session.* fields; absent: no session (every session field reads empty)'),
});

const timestamp = z.iso.datetime();

export const versionOut = z.object({
  number: z.number().int(),
  state: z.enum(['draft', 'published', 'superseded']).describe('published: the version in force; superseded: published once, replaced since'),
  rules: z.array(rule),
  change_note: z.string(),
  author_id: z.uuid().nullable(),
  created_at: timestamp,
  published_at: timestamp.nullable(),
  published_by: z.uuid().nullable(),
  latest_replay: replaySummaryOut
    .nullable()
    .describe('The latest replay of this version over recorded decisions (POST .../replay), without its examples; null: never replayed'),
});

export const policyOut = z.object({
  id: z.uuid(),
  key: z.string(),
  name: z.string(),
  description: z.string(),
  critical: z.boolean(),
  status: z.enum(['active', 'inactive']),
  version: z.number().int().describe('The record version If-Match carries'),
  latest_version: z.number().int(),
  published_version: z.number().int().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  versions: z.array(versionOut).optional().describe('Every version, newest first (GET one, and after a change)'),
});

export const simulationOut = z.object({
  decision: z.enum(['allow', 'deny', 'require_approval']),
  reason_codes: z.array(z.string()),
  approvals_required: z.number().int(),
  rules_evaluated: z.enum(['draft', 'published']),
  trace: z.array(
    z.object({
      step: z.string(),
      outcome: z.string(),
      reason: z.string().optional(),
      detail: z.record(z.string(), z.unknown()).optional(),
    }),
  ),
});

export const operatorsOut = z.object({
  operators: z.array(
    z.object({
      op: z.string(),
      operand: z.string(),
      description: z.string(),
      field_types: z.array(z.string()),
    }),
  ),
  fields: z.array(z.object({ field: z.string(), type: z.string(), description: z.string() })),
  precedence: z.string(),
});
