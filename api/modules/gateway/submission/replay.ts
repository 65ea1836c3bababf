import type { Tx } from '../../../db/database.js';
import { ApiError } from '../../../platform/errors.js';
import { approvalOfAction, expireIfDue, type ApprovalRow } from '../../approvals/index.js';
import type { EvidenceEvent } from '../../evidence/index.js';
import { telemetryEvents, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionRow } from '../actions.repository.js';
import type { ActionIn, SubmissionOut } from '../actions.schemas.js';
import type { OrgView } from '../snapshot.js';
import type { ApprovalTokens } from './approval-tokens.js';
import { decideSubmission, type Submitter } from './records.js';
import type { SessionLedger } from './sessions.js';
import { actionById, redeemAction } from './submission.repository.js';

function toSubmission(a: ActionRow, approval: ApprovalRow | undefined, replayed: boolean): SubmissionOut {
  return {
    action: { id: a.id, status: a.state as SubmissionOut['action']['status'] },
    decision: { decision: a.decision as SubmissionOut['decision']['decision'], reason_codes: a.reason_codes },
    execution: a.execution_status ? { status: a.execution_status, output_redacted: a.output_redacted } : null,
    approval: approval
      ? {
          id: approval.id,
          status: approval.status as NonNullable<SubmissionOut['approval']>['status'],
          approvals_required: approval.approvals_required,
          expires_at: approval.expires_at.toISOString(),
        }
      : null,
    replayed,
    idempotency_key: a.idempotency_key,
  };
}

/**
 * The telemetry event of an action's first decision, as its row has it while `decision_ms` is set (the
 * event read from the row, written out before redemption rewrites the row's decision).
 */
function firstDecisionEvent(a: ActionRow, latencyMs: number): TelemetryEvent {
  return {
    ...telemetryEvents.decision({
      at: a.created_at,
      agentId: a.agent_id,
      correlationId: a.correlation_id,
      actionId: a.id,
      tool: a.tool,
      operation: a.operation,
      decision: a.decision,
      reasonCodes: a.reason_codes,
      latencyMs,
      source: a.source,
      redeemed: false,
    }),
    id: a.id,
  };
}

/**
 * A resubmission under a key already used (`existing`, locked): another request under the key is a
 * conflict; the same request answers as its replay, or with an approval token redeems the approval.
 */
export async function resubmit(
  tx: Tx,
  view: OrgView,
  tokens: ApprovalTokens,
  who: Submitter,
  existing: ActionRow,
  body: ActionIn,
  hash: string,
  now: Date,
  events: EvidenceEvent[],
  telemetry: TelemetryEvent[],
  sessions: SessionLedger,
): Promise<SubmissionOut> {
  if (existing.request_hash !== hash) throw new ApiError('idempotency_conflict');
  let approval = await approvalOfAction(tx, existing.id, true);
  if (approval) approval = await expireIfDue(tx, approval, now);
  if (body.approval_token && approval) {
    const redeemed = await redeem(tx, view, tokens, who, existing, approval, body, now, events, telemetry, sessions);
    if (redeemed) return redeemed;
  }
  return toSubmission(await actionById(tx, existing.id), approval, true);
}

/**
 * Resubmission with an approval token: the token must be this approval's, for this exact request,
 * unexpired and unused. The action is decided again (a suspension since the approval still wins)
 * with the approval present, and runs once. The first decision's telemetry event, until now read from the
 * action row, is written out to `telemetry` first.
 */
async function redeem(
  tx: Tx,
  view: OrgView,
  tokens: ApprovalTokens,
  who: Submitter,
  action: ActionRow,
  approval: ApprovalRow,
  body: ActionIn,
  now: Date,
  events: EvidenceEvent[],
  telemetry: TelemetryEvent[],
  sessions: SessionLedger,
): Promise<SubmissionOut | undefined> {
  const token = body.approval_token!;
  if (approval.status !== 'approved' || approval.token_used_at || !tokens.matches(token, approval.id, approval.request_hash)) {
    return undefined;
  }
  const state = view.state(who.agentId, body.tool);
  if (!state.agent) return undefined;
  const decided = decideSubmission(who, action.id, body, action.request_hash, state, now, sessions, approval);
  if (action.decision_ms !== null) telemetry.push(firstDecisionEvent(action, action.decision_ms));
  const updated = await redeemAction(tx, approval.id, action.id, { ...decided.columns, decision_ms: null }, now);
  events.push(...decided.events);
  return toSubmission(updated, { ...approval, token_used_at: now }, false);
}
