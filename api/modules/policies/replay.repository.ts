import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { PolicyReplaysTable } from '../../db/schema.js';

export type ReplayRow = Selectable<PolicyReplaysTable>;

/** The recorded actions a replay covers: created in [from, to), of one agent when given. */
export interface ReplayWindow {
  from: Date;
  to: Date;
  agentId: string | null;
}

/** One recorded first decision, with only the columns a replay reads. */
export interface RecordedAction {
  id: string;
  agent_id: string;
  identity_id: string | null;
  tool: string;
  operation: string;
  target: string;
  parameters: unknown;
  environment: string | null;
  on_behalf_of: string | null;
  justification: string | null;
  created_at: Date;
  /** The first decision: an action that asked for an approval (it has one) was decided again when it was redeemed. */
  recorded: 'allow' | 'deny' | 'require_approval';
  /** The first decision's reason codes; null when a redemption replaced them. */
  recorded_codes: string[] | null;
  decision_facts: unknown;
}

const agentFilter = (w: ReplayWindow) => (w.agentId ? sql`and a.agent_id = ${w.agentId}::uuid` : sql``);

/** How many actions the window holds, counted up to `cap` (enough to tell "more than the bound"). */
export async function countActions(tx: Tx, orgId: string, w: ReplayWindow, cap: number): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    select count(*) as n from (
      select 1 from action_requests a
      where a.org_id = ${orgId} and a.created_at >= ${w.from} and a.created_at < ${w.to} ${agentFilter(w)}
      limit ${cap}) x`.execute(tx);
  return Number(rows[0]!.n);
}

/** The agents with actions in the window. */
export async function agentsInWindow(tx: Tx, orgId: string, w: ReplayWindow): Promise<string[]> {
  const { rows } = await sql<{ agent_id: string }>`
    select distinct a.agent_id from action_requests a
    where a.org_id = ${orgId} and a.created_at >= ${w.from} and a.created_at < ${w.to} ${agentFilter(w)}`.execute(tx);
  return rows.map((r) => r.agent_id);
}

const CURSOR = 'policy_replay_actions';

/**
 * Opens a cursor over the window's actions in time order, read `fetchActions` at a time: one plan, read
 * as it is consumed, and no keyset to compare (timestamps hold microseconds a JavaScript Date drops).
 * Lives until the transaction ends.
 */
export async function openActions(tx: Tx, orgId: string, w: ReplayWindow): Promise<void> {
  await sql`
    declare ${sql.raw(CURSOR)} no scroll cursor for
    select a.id, a.agent_id, a.identity_id, a.tool, a.operation, a.target, a.parameters, a.environment,
      a.on_behalf_of, a.justification, a.created_at, a.decision_facts,
      case when p.action_id is null then a.decision else 'require_approval' end as recorded,
      case when p.action_id is null or a.decision = 'require_approval' then a.reason_codes end as recorded_codes
    from action_requests a
    left join approvals p on p.org_id = a.org_id and p.action_id = a.id
    where a.org_id = ${orgId} and a.created_at >= ${w.from} and a.created_at < ${w.to} ${agentFilter(w)}
    order by a.created_at, a.id`.execute(tx);
}

export async function fetchActions(tx: Tx, count: number): Promise<RecordedAction[]> {
  const { rows } = await sql<RecordedAction>`fetch forward ${sql.raw(String(Math.trunc(count)))} from ${sql.raw(CURSOR)}`.execute(tx);
  return rows;
}

export async function insertReplay(tx: Tx, orgId: string, r: Omit<ReplayRow, 'org_id' | 'summary'> & { summary: unknown }): Promise<void> {
  await tx
    .insertInto('policy_replays')
    .values({ ...r, org_id: orgId, summary: JSON.stringify(r.summary) })
    .execute();
}

/** The latest replay of each version of a policy. */
export function latestReplays(tx: Tx, orgId: string, policyId: string): Promise<ReplayRow[]> {
  return tx
    .selectFrom('policy_replays')
    .selectAll()
    .distinctOn('version_number')
    .where('org_id', '=', orgId)
    .where('policy_id', '=', policyId)
    .orderBy('version_number')
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
}
