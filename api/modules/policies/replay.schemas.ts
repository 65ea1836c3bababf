import { z } from 'zod';
import { storedTimestamp } from '../../platform/schemas.js';
import { CLASSIFICATION } from '../shared/index.js';

/** Policy replay (docs/policies.md, Replay) and the session facts a simulation decides with. */

const effect = z.enum(['allow', 'deny', 'require_approval']);
const timestamp = z.iso.datetime();

export const replayIn = z.object({
  from: storedTimestamp.describe('The window begins here (inclusive): actions created at or after it'),
  to: storedTimestamp.optional().describe('The window ends here (exclusive); default now. At most 92 days after from'),
  agent_id: z.uuid().optional().describe("Only this agent's actions"),
});

const transition = z.object({ from: effect, to: effect, count: z.number().int() });

/** What a version shows of its latest replay (`latest_replay`): everything but the example actions. */
export const replaySummaryOut = z.object({
  id: z.uuid(),
  policy_id: z.uuid(),
  version_number: z.number().int(),
  window: z.object({ from: timestamp, to: timestamp }).describe('Actions created in [from, to)'),
  agent_id: z.uuid().nullable().describe('The agent the replay was limited to, if any'),
  published_version: z.number().int().nullable().describe('The published version the replayed one was compared with; null: none'),
  policy_status: z.enum(['active', 'inactive']),
  replayed_as_active: z.boolean().describe("The policy is inactive: the version's rules were added to the rules in force as if it were active"),
  requested_by: z.uuid().nullable(),
  created_at: timestamp,
  replayed: z.number().int().describe('Recorded first decisions decided again (twice each)'),
  changed: z.number().int().describe('Decisions the version would change'),
  reason_codes_changed: z.number().int().describe('Decisions that stay the same but with other reason codes'),
  unchanged: z.number().int(),
  drift: z.number().int().describe('Decisions the rules in force now decide otherwise than recorded: the registry (or the rules) moved since'),
  inexact: z
    .number()
    .int()
    .describe('Decisions a rule of either side (or the secret scan) decided on parameters that were stored redacted or not at all: not replayed exactly'),
  without_facts: z.number().int().describe('Actions decided before their agent and session were recorded (migration 0021): replayed with the agent as it is now and no session'),
  skipped: z.number().int().describe('Actions whose agent is no longer in the registry and whose facts were not recorded'),
  transitions: z.array(transition).describe('Decision changes, from the rules in force to the version, most first'),
  drift_transitions: z.array(transition).describe('From the recorded decision to the rules in force now'),
  by_rule: z
    .array(
      z.object({
        source: z.enum(['version', 'published']).describe('version: a rule of the replayed version that matched where the published one did not; published: the reverse'),
        rule_id: z.string(),
        effect,
        reason_code: z.string(),
        decisions_changed: z.number().int(),
        reason_codes_changed: z.number().int(),
      }),
    )
    .describe("The policy's rules that made a difference, from the decisions' traces"),
  agents_changed: z.number().int().describe('Agents with at least one change'),
  by_agent: z
    .array(z.object({ agent_id: z.uuid(), replayed: z.number().int(), changed: z.number().int(), reason_codes_changed: z.number().int() }))
    .describe('Agents with changes, most first, at most 100'),
});

export const replayOut = replaySummaryOut.extend({
  examples: z
    .array(
      z.object({
        action_id: z.uuid(),
        agent_id: z.uuid(),
        tool: z.string(),
        created_at: timestamp,
        recorded: effect.describe('The decision recorded at the time'),
        from: effect.describe('With the rules in force'),
        to: effect.describe('With the replayed version'),
        reason_codes_before: z.array(z.string()),
        reason_codes_after: z.array(z.string()),
        inexact: z.boolean(),
      }),
    )
    .describe('Up to 50 changed actions, oldest first'),
});

/** The session facts a simulation decides with (`session.*` condition fields). */
export const sessionIn = z
  .object({
    id: z.string().min(1).max(300).optional().describe('The session identifier (default "simulation")'),
    max_classification: z.enum(CLASSIFICATION).nullable().default(null).describe('The highest data classification read earlier in the session'),
    untrusted_content: z.boolean().default(false).describe('Content came in earlier from an untrusted source'),
    tools: z.record(z.string().min(1).max(200), z.number().int().min(0)).default({}).describe('Allowed calls earlier in the session, by tool key'),
    calls: z.number().int().min(0).optional().describe('Allowed calls earlier in the session in all; default the sum of tools'),
  })
  .strict()
  .refine((s) => Object.keys(s.tools).length <= 500, { message: 'at most 500 tools', path: ['tools'] });
