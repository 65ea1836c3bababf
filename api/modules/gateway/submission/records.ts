import type { Insertable } from 'kysely';
import { timeOrderedId } from '../../../db/ids.js';
import type { ActionRequestsTable, ApprovalsTable } from '../../../db/schema.js';
import type { ApprovalRow } from '../../approvals/index.js';
import type { EvidenceEvent } from '../../evidence/index.js';
import type { Notice } from '../../notifications/index.js';
import type { ActionIn, SubmissionOut } from '../actions.schemas.js';
import { decide } from '../engine/decide.js';
import { factsToJson } from '../engine/session.js';
import type { AgentView, Decision, SessionView } from '../engine/types.js';
import type { DecisionState } from '../snapshot.js';
import { decisionInput } from './decision-input.js';
import { execute, redact, type Execution } from './execution.js';
import type { SessionLedger } from './sessions.js';

/**
 * What a first decision read besides its request and the registry, kept on its action
 * (`decision_facts`) so that policy replay decides it again as it was decided: the agent as it was
 * (its status, environment, criticality and data classification may have changed since) and its
 * session's facts before the call.
 */
export interface DecisionFacts {
  v: 1;
  agent: AgentView;
  session: SessionView | null;
}

/** Who submits: an agent through the gateway, or a person on its behalf from the console. */
export interface Submitter {
  orgId: string;
  agentId: string;
  identityId: string | null;
  source: 'gateway' | 'console';
  requestedBy: string | null;
  correlationId: string;
  /**
   * The session the call belongs to, for flow rules (`session.*` fields): the identifier the caller
   * passed, else `token:<jti>` for an agent (its access token's lifetime); null for the console.
   */
  session?: string | null;
}

/** The columns a decision sets on its action: at the first submission, and again at redemption. */
export type DecisionColumns = Pick<
  Insertable<ActionRequestsTable>,
  'state' | 'decision' | 'reason_codes' | 'trace' | 'execution_status' | 'output_redacted' | 'executed_at' | 'updated_at'
>;

/** One decision of a submission, its execution when allowed, and what they write. */
export interface Decided {
  decision: Decision;
  execution: Execution | undefined;
  /** The execution's output as stored and answered (redacted). */
  output: unknown;
  columns: DecisionColumns;
  /** The approval a first decision asks for. */
  approval: Insertable<ApprovalsTable> | undefined;
  /** The decision, the approval request, the execution. */
  events: EvidenceEvent[];
  /** The session as the decision saw it (before this call). */
  session: SessionView | null;
}

const stateAfter = (decision: Decision['decision'], execution?: Execution) =>
  decision === 'deny'
    ? 'denied'
    : decision === 'require_approval'
      ? 'approval_required'
      : execution?.status === 'succeeded'
        ? 'executed'
        : execution?.status === 'failed'
          ? 'failed'
          : 'approved';

/**
 * Decides a submission of action `actionId` against its agent's registry state, runs it when allowed,
 * and builds what that writes: the one builder of decision rows and evidence for first submission and
 * redemption alike. A redemption (`redeeming`: the approval whose token was presented) decides with the
 * approval present and its evidence names the approval; a first decision may ask for an approval.
 * The decision reads its session's facts from `sessions`, and an allowed call counts there.
 */
export function decideSubmission(
  who: Submitter,
  actionId: string,
  body: ActionIn,
  hash: string,
  state: DecisionState,
  now: Date,
  sessions: SessionLedger,
  redeeming?: ApprovalRow,
): Decided {
  const session = sessions.view(who);
  const decision = decide(
    decisionInput(state.agent!, body, { identityId: who.identityId, now, approvalPresent: redeeming !== undefined, session }),
    state.snapshot,
  );
  if (decision.decision === 'allow') sessions.called(who, body.tool, state.snapshot);
  const execution = decision.decision === 'allow' ? execute(body.tool, state.tool, body.parameters) : undefined;
  const output = execution ? redact(execution.output, state.contentRetention) : null;
  const columns: DecisionColumns = {
    state: stateAfter(decision.decision, execution),
    decision: decision.decision,
    reason_codes: decision.reasonCodes,
    trace: JSON.stringify(decision.trace),
    execution_status: execution?.status ?? null,
    output_redacted: execution ? JSON.stringify(output) : null,
    executed_at: execution?.status === 'succeeded' ? now : null,
    updated_at: now,
  };
  const about = { agentId: who.agentId, actionRequestId: actionId, correlationId: who.correlationId };
  const events: EvidenceEvent[] = [
    {
      eventType: 'decision',
      ...about,
      payload: redeeming
        ? { decision: decision.decision, reason_codes: decision.reasonCodes, approval_id: redeeming.id, request_hash: redeeming.request_hash }
        : { tool: body.tool, operation: body.operation, target: body.target, decision: decision.decision, reason_codes: decision.reasonCodes, request_hash: hash, source: who.source },
    },
  ];
  // Where flow rules decide, what the session had done is part of why: signed with the decision.
  if (state.readsSession && session) events[0]!.payload.session = { id: session.id, facts: factsToJson(session.facts) };
  let approval: Insertable<ApprovalsTable> | undefined;
  if (!redeeming && decision.decision === 'require_approval') {
    const expiresAt = new Date(now.getTime() + state.approvalTtlSeconds * 1000);
    approval = {
      id: timeOrderedId(),
      org_id: who.orgId,
      action_id: actionId,
      agent_id: who.agentId,
      status: 'pending',
      approvals_required: decision.approvalsRequired,
      request_hash: hash,
      expires_at: expiresAt,
      token_used_at: null,
      created_at: now,
      decided_at: null,
    };
    events.push({
      eventType: 'approval_request',
      ...about,
      payload: { approval_id: approval.id, approvals_required: decision.approvalsRequired, expires_at: expiresAt.toISOString() },
    });
  }
  if (execution) events.push({ eventType: 'execution', ...about, payload: { tool: body.tool, status: execution.status } });
  return { decision, execution, output, columns, approval, events, session };
}

const clipped = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** The notice of a new approval request, for every member who may decide it. */
function approvalNotice(who: Submitter, body: ActionIn, reasonCodes: string[], approval: Insertable<ApprovalsTable>): Notice {
  const expires = new Date(approval.expires_at as Date).toISOString();
  return {
    kind: 'approval.pending',
    title: clipped(`Approval needed: ${body.tool} (${body.operation})`, 200),
    body: clipped(
      `Agent ${who.agentId}${who.source === 'console' ? ' (submitted from the console)' : ''} asks to ${body.operation} ${body.tool} ` +
        `on ${clipped(body.target, 200)}${body.on_behalf_of ? ` on behalf of ${clipped(body.on_behalf_of, 100)}` : ''}: ` +
        `${reasonCodes.join(', ')}. Approval ${approval.id}, open until ${expires}.`,
      1000,
    ),
  };
}

/** A fresh submission decided in memory: its rows, its evidence and its answer. */
export interface Prepared {
  action: Insertable<ActionRequestsTable>;
  approval: Insertable<ApprovalsTable> | undefined;
  /** What the approvers are told of the approval it asks for (kind `approval.pending`). */
  notice: Notice | undefined;
  events: EvidenceEvent[];
  result: SubmissionOut;
}

/**
 * Decides a submission under a key not used before, and runs it when allowed; writes nothing. `decisionMs`
 * is its latency so far, which the action row keeps as its telemetry (D26).
 */
export function prepare(
  who: Submitter,
  key: string,
  body: ActionIn,
  hash: string,
  state: DecisionState,
  now: Date,
  decisionMs: number,
  sessions: SessionLedger,
): Prepared {
  const id = timeOrderedId();
  const { decision, execution, output, columns, approval, events, session } = decideSubmission(who, id, body, hash, state, now, sessions);
  const facts: DecisionFacts = { v: 1, agent: state.agent!, session };
  const action: Insertable<ActionRequestsTable> = {
    id,
    org_id: who.orgId,
    agent_id: who.agentId,
    identity_id: who.identityId,
    source: who.source,
    idempotency_key: key,
    request_hash: hash,
    tool: body.tool,
    operation: body.operation,
    target: body.target,
    parameters: JSON.stringify(redact(body.parameters, state.contentRetention)),
    environment: body.environment ?? null,
    on_behalf_of: body.on_behalf_of ?? null,
    justification: body.justification ?? null,
    ...columns,
    approvals_required: decision.approvalsRequired,
    requested_by: who.requestedBy,
    correlation_id: who.correlationId,
    created_at: now,
    decision_ms: decisionMs,
    decision_facts: facts,
  };
  return {
    action,
    approval,
    notice: approval ? approvalNotice(who, body, decision.reasonCodes, approval) : undefined,
    events,
    result: {
      action: { id, status: columns.state as SubmissionOut['action']['status'] },
      decision: { decision: decision.decision, reason_codes: decision.reasonCodes },
      execution: execution ? { status: execution.status, output_redacted: output } : null,
      approval: approval
        ? { id: approval.id, status: 'pending', approvals_required: decision.approvalsRequired, expires_at: approval.expires_at.toISOString() }
        : null,
      replayed: false,
      idempotency_key: key,
    },
  };
}
