import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { iso } from '../../platform/schemas.js';
import { FINDING_SEVERITY } from '../findings/index.js';
import { AGENT_STATUS, ENVIRONMENT, MCP_TRUST_STATE } from '../shared/index.js';
import { DECISION_OUTCOMES, type DecisionOutcome } from '../telemetry/index.js';
import { dashboardRows } from './dashboard.repository.js';
import { BANDS, TOP_DENY_REASONS, type DashboardOut } from './dashboard.schemas.js';

const DAY_MS = 86_400_000;

/** Every key of `keys` with its count in `counts` (zero when absent); keys the list does not know are left out. */
function dense<K extends string>(keys: readonly K[], counts: Record<string, number>): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, counts[k] ?? 0])) as Record<K, number>;
}

const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/**
 * The dashboard of the organisation over the last `days` days (UTC, today included), read in one
 * statement: the registry as it is now, and the time series of the window.
 */
export async function dashboard(db: Db, clock: Clock, orgId: string, days: number): Promise<DashboardOut> {
  const now = clock.now();
  const today = Math.floor(now.getTime() / DAY_MS);
  const since = new Date((today - days + 1) * DAY_MS);
  const r = await inScope(db, { orgId }, (tx) => dashboardRows(tx, orgId, since, now, TOP_DENY_REASONS));

  const perDay = Array.from({ length: days }, (_, i) => ({
    day: new Date(since.getTime() + i * DAY_MS).toISOString().slice(0, 10),
    allow: 0,
    deny: 0,
    require_approval: 0,
  }));
  const byDay = new Map(perDay.map((d) => [d.day, d]));
  const total = { allow: 0, deny: 0, require_approval: 0 };
  for (const d of r.decisions) {
    const decision = d.decision as DecisionOutcome;
    if (!DECISION_OUTCOMES.includes(decision)) continue;
    const entry = byDay.get(d.day);
    if (entry) entry[decision] += d.n;
    total[decision] += d.n;
  }

  return {
    days,
    since: iso(since).slice(0, 10),
    generated_at: iso(now),
    agents: {
      total: r.agents_total,
      by_environment: dense(ENVIRONMENT, r.agents_by_environment),
      by_risk_band: dense(BANDS, r.agents_by_band),
      by_status: dense(AGENT_STATUS, r.agents_by_status),
    },
    decisions: { total, per_day: perDay },
    top_deny_reasons: r.deny_reasons.map((x) => ({ reason_code: x.reason_code, count: x.n })),
    pending_approvals: { count: r.pending_approvals.count, oldest_requested_at: r.pending_approvals.oldest ? iso(r.pending_approvals.oldest) : null },
    open_findings: { total: sum(r.findings_by_severity), by_severity: dense(FINDING_SEVERITY, r.findings_by_severity) },
    mcp_servers: { total: sum(r.mcp_by_trust), by_trust_state: dense(MCP_TRUST_STATE, r.mcp_by_trust) },
    risk_trend: r.risk.map((x) => ({ day: x.day, average_score: Math.round(x.average * 100) / 100, max_score: x.max, agents: x.agents })),
  };
}
