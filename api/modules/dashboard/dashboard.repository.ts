import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';

/** What the dashboard's one statement answers: each section as the database grouped it. */
export interface DashboardRows {
  agents_total: number;
  agents_by_environment: Record<string, number>;
  agents_by_band: Record<string, number>;
  agents_by_status: Record<string, number>;
  decisions: Array<{ day: string; decision: string; n: number }>;
  deny_reasons: Array<{ reason_code: string; n: number }>;
  pending_approvals: { count: number; oldest: string | null };
  findings_by_severity: Record<string, number>;
  mcp_by_trust: Record<string, number>;
  risk: Array<{ day: string; average: number; max: number; agents: number }>;
}

/**
 * Every section of the dashboard in one statement (one round trip), each a subquery over the
 * organisation's rows: the registry as it is now (agents, pending approvals, open findings, MCP servers),
 * and the window from `since` (decisions by day from action requests, deny reasons, risk history by day).
 * Days are UTC calendar days.
 */
export async function dashboardRows(tx: Tx, orgId: string, since: Date, now: Date, topReasons: number): Promise<DashboardRows> {
  const sinceDay = since.toISOString().slice(0, 10);
  const { rows } = await sql<DashboardRows>`
    select
      (select count(*)::int from agents where org_id = ${orgId}) as agents_total,
      (select coalesce(json_object_agg(environment, n), '{}'::json) from (
         select environment, count(*)::int as n from agents where org_id = ${orgId} group by 1) x) as agents_by_environment,
      (select coalesce(json_object_agg(band, n), '{}'::json) from (
         select coalesce(risk_band, 'unscored') as band, count(*)::int as n from agents where org_id = ${orgId} group by 1) x) as agents_by_band,
      (select coalesce(json_object_agg(status, n), '{}'::json) from (
         select status, count(*)::int as n from agents where org_id = ${orgId} group by 1) x) as agents_by_status,
      (select coalesce(json_agg(x), '[]'::json) from (
         select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD') as day, decision, count(*)::int as n
         from action_requests where org_id = ${orgId} and created_at >= ${since}
         group by 1, 2) x) as decisions,
      (select coalesce(json_agg(x), '[]'::json) from (
         select code as reason_code, count(*)::int as n
         from action_requests a cross join lateral unnest(a.reason_codes) as code
         where a.org_id = ${orgId} and a.created_at >= ${since} and a.decision = 'deny'
         group by code order by n desc, code limit ${topReasons}) x) as deny_reasons,
      (select json_build_object('count', count(*)::int, 'oldest', min(created_at))
         from approvals where org_id = ${orgId} and status = 'pending' and expires_at > ${now}) as pending_approvals,
      (select coalesce(json_object_agg(severity, n), '{}'::json) from (
         select severity, count(*)::int as n from findings
         where org_id = ${orgId} and status in ('open', 'in_progress') group by 1) x) as findings_by_severity,
      (select coalesce(json_object_agg(trust_state, n), '{}'::json) from (
         select trust_state, count(*)::int as n from mcp_servers where org_id = ${orgId} group by 1) x) as mcp_by_trust,
      (select coalesce(json_agg(x order by x.day), '[]'::json) from (
         select to_char(day, 'YYYY-MM-DD') as day, avg(score)::float8 as average, max(score)::int as max, count(*)::int as agents
         from risk_history where org_id = ${orgId} and day >= ${sinceDay}::date
         group by risk_history.day) x) as risk`.execute(tx);
  return rows[0]!;
}
