import { randomUUID } from 'node:crypto';
import type { PersonPrincipal, RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { appendEvidence, type EvidenceSigner } from '../evidence/index.js';
import {
  actionOf,
  countApprovingVotes,
  dueApprovals,
  expireIfDue,
  findApproval,
  hasVoted,
  insertVote,
  isOwnerEmail,
  listApprovals,
  ownersCountAsSelf,
  reloadApproval,
  setActionState,
  setApprovalStatus,
  votesOf,
  type ApprovalRow,
} from './approvals.repository.js';
import type { APPROVAL_STATUS, approvalDecisionIn } from './approvals.schemas.js';

type ApprovalStatus = (typeof APPROVAL_STATUS)[number];
type DecisionIn = z.output<typeof approvalDecisionIn>;

async function approvalView(tx: Tx, approval: ApprovalRow) {
  const action = await actionOf(tx, approval);
  const votes = await votesOf(tx, approval.id);
  return {
    id: approval.id,
    status: approval.status as ApprovalStatus,
    approvals_required: approval.approvals_required,
    expires_at: iso(approval.expires_at),
    created_at: iso(approval.created_at),
    decided_at: approval.decided_at ? iso(approval.decided_at) : null,
    action: {
      id: action.id,
      agent_id: action.agent_id,
      tool: action.tool,
      operation: action.operation,
      target: action.target,
      parameters: action.parameters,
      on_behalf_of: action.on_behalf_of,
      justification: action.justification,
      reason_codes: action.reason_codes,
    },
    votes: votes.map((v) => ({ approver_id: v.approver_id, decision: v.decision as 'approve' | 'reject', reason: v.reason, at: iso(v.created_at) })),
  };
}

/**
 * Who counts as "self" for an approval (docs/gateway.md): the person the action acts for, the person
 * who submitted it, and, where the organisation opts in, the agent's owners.
 */
async function isSelf(
  tx: Tx,
  orgId: string,
  approver: { email: string; userId: string },
  action: { agent_id: string; on_behalf_of: string | null; requested_by: string | null },
): Promise<boolean> {
  const email = approver.email.toLowerCase();
  const behalf = action.on_behalf_of?.toLowerCase();
  if (action.requested_by === approver.userId || behalf === email || behalf === `user:${email}`) return true;
  if (!(await ownersCountAsSelf(tx, orgId))) return false;
  return isOwnerEmail(tx, orgId, action.agent_id, email);
}

/** One page of the organisation's approvals in `status`, newest first; `query.cursor` continues a listing. */
export function listApprovalsPage(
  db: Db,
  clock: Clock,
  cursors: Cursors,
  orgId: string,
  query: { status: ApprovalStatus; limit: number; cursor?: string },
) {
  const scope = `approvals:${orgId}:${query.status}`;
  const after = cursors.decode(scope, query.cursor);
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    // Approvals whose time has passed are expired before they are listed.
    for (const a of await dueApprovals(tx, orgId, now)) await expireIfDue(tx, a, now);
    const rows = await listApprovals(tx, orgId, query.status, after, query.limit);
    const page = cursors.page(scope, rows, query.limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => a);
    return { items: await Promise.all(page.items.map((a) => approvalView(tx, a))), next_cursor: page.next_cursor };
  });
}

export function readApproval(db: Db, clock: Clock, orgId: string, approvalId: string) {
  return inScope(db, { orgId }, async (tx) => {
    const a = await findApproval(tx, orgId, approvalId);
    if (!a) throw notFound('No such approval.');
    return approvalView(tx, await expireIfDue(tx, a, clock.now()));
  });
}

/**
 * Records a person's vote on a pending approval. A rejection decides at once; approvals decide when
 * enough different people approve. The vote is audited and goes to the evidence chain.
 */
export function decideApproval(
  db: Db,
  clock: Clock,
  evidence: EvidenceSigner,
  req: RequestContext,
  person: PersonPrincipal,
  approvalId: string,
  body: DecisionIn,
) {
  const orgId = person.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    let approval = await findApproval(tx, orgId, approvalId, true);
    if (!approval) throw notFound('No such approval.');
    approval = await expireIfDue(tx, approval, now);
    if (approval.status === 'expired') throw new ApiError('approval_expired');
    if (approval.status !== 'pending') throw new ApiError('approval_not_pending', `The approval is ${approval.status}.`);
    const action = await actionOf(tx, approval);
    if (await isSelf(tx, orgId, { email: person.email, userId: person.userId }, action)) throw new ApiError('self_approval_prohibited');
    if (await hasVoted(tx, approval.id, person.userId)) throw new ApiError('duplicate_approver');
    await insertVote(tx, { id: randomUUID(), org_id: orgId, approval_id: approval.id, approver_id: person.userId, decision: body.decision, reason: body.reason, created_at: now });
    const approvals = await countApprovingVotes(tx, approval.id);
    const status = body.decision === 'reject' ? 'rejected' : approvals >= approval.approvals_required ? 'approved' : 'pending';
    if (status !== 'pending') {
      await setApprovalStatus(tx, approval.id, status, now);
      await setActionState(tx, action.id, status, now);
    }
    await audit(tx, req, orgId, { action: `approval.${body.decision}`, targetType: 'approval', targetId: approval.id, details: { reason: body.reason, status } });
    await appendEvidence(tx, evidence, orgId, [
      {
        eventType: 'approval',
        agentId: action.agent_id,
        actionRequestId: action.id,
        correlationId: req.id,
        payload: { approval_id: approval.id, approver_id: person.userId, decision: body.decision, reason: body.reason, status },
      },
    ], now);
    return approvalView(tx, await reloadApproval(tx, approval.id));
  });
}
