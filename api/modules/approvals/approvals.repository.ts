import type { Insertable, Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ActionRequestsTable, ApprovalsTable, ApprovalVotesTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';

export type ApprovalRow = Selectable<ApprovalsTable>;
export type ApprovalActionRow = Selectable<ActionRequestsTable>;
export type VoteRow = Selectable<ApprovalVotesTable>;

/** Marks a pending approval whose time has passed as expired, with its action. */
export async function expireIfDue(tx: Tx, approval: ApprovalRow, now: Date): Promise<ApprovalRow> {
  if (approval.status !== 'pending' && approval.status !== 'approved') return approval;
  if (approval.expires_at.getTime() > now.getTime()) return approval;
  if (approval.status === 'approved' && approval.token_used_at) return approval;
  await setApprovalStatus(tx, approval.id, 'expired', now);
  await tx
    .updateTable('action_requests')
    .set({ state: 'expired', updated_at: now })
    .where('id', '=', approval.action_id)
    .where('state', 'in', ['approval_required', 'approved'])
    .execute();
  return { ...approval, status: 'expired', decided_at: now };
}

/**
 * Cancels open approvals and moves their actions to `cancelled` (an explicit cancel, an agent's
 * suspension) or `revoked` (the agent's revocation: nothing it asked for can run, ever).
 */
export async function cancelApprovals(
  tx: Tx,
  approvals: ApprovalRow[],
  now: Date,
  actionState: 'cancelled' | 'revoked' = 'cancelled',
): Promise<void> {
  if (approvals.length === 0) return;
  const ids = approvals.map((a) => a.id);
  await tx.updateTable('approvals').set({ status: 'cancelled', decided_at: now }).where('id', 'in', ids).execute();
  await tx
    .updateTable('action_requests')
    .set({ state: actionState, updated_at: now })
    .where('id', 'in', approvals.map((a) => a.action_id))
    .execute();
}

/** The agent's approvals that could still let an action run, locked for their cancellation. */
export function openApprovalsOfAgent(tx: Tx, orgId: string, agentId: string): Promise<ApprovalRow[]> {
  return tx
    .selectFrom('approvals')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('status', 'in', ['pending', 'approved'])
    .where('token_used_at', 'is', null)
    .forUpdate()
    .execute();
}

/** The organisation's approval, or undefined; `lock` holds it for a decision in the same transaction. */
export function findApproval(tx: Tx, orgId: string, id: string, lock = false): Promise<ApprovalRow | undefined> {
  const q = tx.selectFrom('approvals').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** The approval an action awaits, if any; `lock` holds it for a change in the same transaction. */
export function approvalOfAction(tx: Tx, actionId: string, lock = false): Promise<ApprovalRow | undefined> {
  const q = tx.selectFrom('approvals').selectAll().where('action_id', '=', actionId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** An approval read again inside the transaction that changed it. */
export function reloadApproval(tx: Tx, id: string): Promise<ApprovalRow> {
  return tx.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

/** Open approvals of the organisation whose time has passed at `now`. */
export function dueApprovals(tx: Tx, orgId: string, now: Date): Promise<ApprovalRow[]> {
  return tx.selectFrom('approvals').selectAll().where('org_id', '=', orgId).where('status', 'in', ['pending', 'approved']).where('expires_at', '<=', now).execute();
}

/** Approvals in `status`, newest first, after `after`; limit + 1 rows tell whether a next page exists. */
export function listApprovals(tx: Tx, orgId: string, status: string, after: Position | undefined, limit: number): Promise<ApprovalRow[]> {
  let q = tx.selectFrom('approvals').selectAll().where('org_id', '=', orgId).where('status', '=', status);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

export async function setApprovalStatus(tx: Tx, id: string, status: string, now: Date): Promise<void> {
  await tx.updateTable('approvals').set({ status, decided_at: now }).where('id', '=', id).execute();
}

/** The action an approval is for. */
export function actionOf(tx: Tx, approval: ApprovalRow): Promise<ApprovalActionRow> {
  return tx.selectFrom('action_requests').selectAll().where('id', '=', approval.action_id).executeTakeFirstOrThrow();
}

export async function setActionState(tx: Tx, actionId: string, state: string, now: Date): Promise<void> {
  await tx.updateTable('action_requests').set({ state, updated_at: now }).where('id', '=', actionId).execute();
}

/** An approval's votes in the order they were cast. */
export function votesOf(tx: Tx, approvalId: string): Promise<VoteRow[]> {
  return tx.selectFrom('approval_votes').selectAll().where('approval_id', '=', approvalId).orderBy('created_at').orderBy('id').execute();
}

export async function hasVoted(tx: Tx, approvalId: string, approverId: string): Promise<boolean> {
  const vote = await tx.selectFrom('approval_votes').select('id').where('approval_id', '=', approvalId).where('approver_id', '=', approverId).executeTakeFirst();
  return vote !== undefined;
}

export async function insertVote(tx: Tx, vote: Insertable<ApprovalVotesTable>): Promise<void> {
  await tx.insertInto('approval_votes').values(vote).execute();
}

export async function countApprovingVotes(tx: Tx, approvalId: string): Promise<number> {
  const r = await tx
    .selectFrom('approval_votes')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('approval_id', '=', approvalId)
    .where('decision', '=', 'approve')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Whether the organisation counts an agent's owners as "self" for its approvals. */
export async function ownersCountAsSelf(tx: Tx, orgId: string): Promise<boolean> {
  const org = await tx.selectFrom('organisations').select('owners_count_as_self').where('id', '=', orgId).executeTakeFirstOrThrow();
  return org.owners_count_as_self;
}

/** Whether `email` (lower-case) is an owner of the agent. */
export async function isOwnerEmail(tx: Tx, orgId: string, agentId: string, email: string): Promise<boolean> {
  const owner = await tx
    .selectFrom('agent_owners')
    .select('id')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where(sql<boolean>`lower(email) = ${email}`)
    .executeTakeFirst();
  return owner !== undefined;
}
