import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { FINDING_SEVERITY } from '../findings/index.js';
import { AGENT_STATUS, ENVIRONMENT, MCP_TRUST_STATE, RISK_BAND } from '../shared/index.js';
import { DECISION_OUTCOMES } from '../telemetry/index.js';

/** Risk bands, and `unscored` for an agent without a score yet. */
export const BANDS = [...RISK_BAND, 'unscored'] as const;

/** How many deny reasons the dashboard lists. */
export const TOP_DENY_REASONS = 10;

export const dashboardQuery = z.object({
  days: z.coerce.number().int().min(1).max(365).default(30).describe('days the time series cover, today (UTC) included (1-365)'),
});

/** An object with one integer per key, every key present (zero when none). */
function tally<K extends readonly [string, ...string[]]>(keys: K, what: string) {
  const shape = Object.fromEntries(keys.map((k) => [k, z.number().int()])) as { [P in K[number]]: z.ZodNumber };
  return z.object(shape).describe(what);
}

const day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/).describe('a UTC calendar day, YYYY-MM-DD');

export const dashboardOut = z.object({
  days: z.number().int(),
  since: day.describe('the first day the time series cover (UTC)'),
  generated_at: timestamp,
  agents: z
    .object({
      total: z.number().int(),
      by_environment: tally(ENVIRONMENT, 'agents per environment'),
      by_risk_band: tally(BANDS, 'agents per risk band (agents.risk_band, from the latest risk score); `unscored`: no score yet'),
      by_status: tally(AGENT_STATUS, 'agents per status'),
    })
    .describe('every agent of the organisation, revoked ones included (each breakdown adds up to total)'),
  decisions: z
    .object({
      total: tally(DECISION_OUTCOMES, 'over the whole window'),
      per_day: z
        .array(z.object({ day, allow: z.number().int(), deny: z.number().int(), require_approval: z.number().int() }))
        .describe('one entry per day, oldest first, days without actions included'),
    })
    .describe(
      'gateway and console actions submitted in the window, by decision, on the day they were submitted (UTC); an action ' +
        'decided again after its approval counts with its latest decision',
    ),
  top_deny_reasons: z
    .array(z.object({ reason_code: z.string(), count: z.number().int() }))
    .describe(`the ${TOP_DENY_REASONS} reason codes seen most on denied actions in the window, most frequent first (a denial with several reasons counts for each)`),
  pending_approvals: z
    .object({
      count: z.number().int(),
      oldest_requested_at: timestamp.nullable().describe('when the longest-waiting one was requested; null when none'),
    })
    .describe('approvals waiting for a decision and not yet expired, now'),
  open_findings: z
    .object({ total: z.number().int(), by_severity: tally(FINDING_SEVERITY, 'open and in-progress findings per severity') })
    .describe('findings open or in progress, now'),
  mcp_servers: z
    .object({ total: z.number().int(), by_trust_state: tally(MCP_TRUST_STATE, 'MCP servers per trust state') })
    .describe('MCP servers of the inventory, now'),
  risk_trend: z
    .array(
      z.object({
        day,
        average_score: z.number().describe('mean risk score (0-100) of the agents scored that day, two decimals'),
        max_score: z.number().int(),
        agents: z.number().int().describe('agents with a score that day'),
      }),
    )
    .describe('from the daily risk history: days with scores only, oldest first'),
});
export type DashboardOut = z.infer<typeof dashboardOut>;
