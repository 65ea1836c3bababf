import type { RequestContext } from '../../platform/context.js';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import type { Position } from '../../platform/pagination.js';
import { agentOr404 } from '../agents/index.js';
import { approvalOfAction, cancelApprovals, expireIfDue } from '../approvals/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { actionOr404, listActions, listExecutions, type ActionFilters } from './actions.repository.js';
import type { ApprovalTokens } from './submission/approval-tokens.js';

/** Refuses (404) an agent the organisation does not have. */
export async function requireAgent(db: Db, orgId: string, agentId: string): Promise<void> {
  await inScope(db, { orgId }, (tx) => agentOr404(tx, orgId, agentId));
}

/**
 * An agent's own action, with its approval (expired now if its time has passed) and, once approved
 * and not yet used, the approval token the agent resubmits with.
 */
export function agentAction(db: Db, clock: Clock, tokens: ApprovalTokens, agent: { orgId: string; agentId: string }, actionId: string) {
  return inScope(db, { orgId: agent.orgId }, async (tx) => {
    const action = await actionOr404(tx, agent.orgId, actionId);
    if (action.agent_id !== agent.agentId) throw notFound('No such action.');
    let approval = await approvalOfAction(tx, action.id);
    if (approval) approval = await expireIfDue(tx, approval, clock.now());
    const fresh = await actionOr404(tx, agent.orgId, action.id);
    const token = approval?.status === 'approved' && !approval.token_used_at ? tokens.token(approval.id, approval.request_hash) : undefined;
    return { action: fresh, approval, token };
  });
}

/** One page (`limit` rows) of the organisation's actions, newest first. */
export function actionsPage(db: Db, orgId: string, filters: ActionFilters, after: Position | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listActions(tx, orgId, filters, after, limit));
}

/** One page (`limit` rows) of the organisation's executions, most recent first. */
export function executionsPage(db: Db, orgId: string, after: Position | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listExecutions(tx, orgId, after, limit));
}

export function readAction(db: Db, orgId: string, actionId: string) {
  return inScope(db, { orgId }, (tx) => actionOr404(tx, orgId, actionId));
}

/** Cancels an action waiting for approval, or approved and not yet run; audited, with evidence. */
export function cancelAction(db: Db, clock: Clock, req: RequestContext, orgId: string, actionId: string, reason: string) {
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    const action = await actionOr404(tx, orgId, actionId, true);
    let approval = await approvalOfAction(tx, action.id, true);
    if (approval) approval = await expireIfDue(tx, approval, now);
    const open = approval && (approval.status === 'pending' || (approval.status === 'approved' && !approval.token_used_at));
    if (!approval || !open) throw new ApiError('conflict', `The action is ${action.state}; only an action awaiting approval or resubmission can be cancelled.`);
    await cancelApprovals(tx, [approval], now);
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'action.cancelled', targetType: 'action', targetId: action.id, details: { reason } },
      { eventType: 'approval_cancelled', agentId: action.agent_id, actionRequestId: action.id, payload: { approval_id: approval.id, reason } },
    );
    return actionOr404(tx, orgId, action.id);
  });
}
