import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import type { Selectable } from 'kysely';
import type { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import type { ActionRequestsTable, ApprovalsTable } from '../../db/schema.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { appendEvidence, type EvidenceEvent } from '../evidence/chain.js';
import type { actionIn, SubmissionOut } from './actions.schemas.js';
import { decide } from './engine/decide.js';
import type { Decision } from './engine/types.js';
import { redact, SAMPLE_EXECUTORS } from './executors.js';
import { loadDecisionState, type DecisionState } from './snapshot.js';

const canonicalize = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string | undefined;

export type ActionIn = z.output<typeof actionIn>;
export type ActionRow = Selectable<ActionRequestsTable>;
export type ApprovalRow = Selectable<ApprovalsTable>;

export interface Submitter {
  orgId: string;
  agentId: string;
  identityId: string | null;
  source: 'gateway' | 'console';
  requestedBy: string | null;
  correlationId: string;
}

/** The hash an idempotency key and an approval token are bound to: the request without its token. */
export function requestHash(body: ActionIn): string {
  const { approval_token: _token, ...request } = body;
  const canonical = canonicalize({
    ...request,
    environment: request.environment ?? null,
    on_behalf_of: request.on_behalf_of ?? null,
    justification: request.justification ?? null,
  });
  return createHash('sha256').update(canonical ?? '').digest('hex');
}

/**
 * Approval tokens are not stored: a token is an HMAC over the approval and the exact request, so the
 * agent's status lookup can show it and a resubmission can check it, and a copy of the database alone
 * forges none. Single use is recorded on the approval.
 */
export class ApprovalTokens {
  private readonly key: Buffer;
  constructor(seed: string) {
    this.key = createHash('sha256').update(`tollgate:approval-token:v1:${seed}`).digest();
  }
  token(approvalId: string, hash: string): string {
    return `tga_${createHmac('sha256', this.key).update(`${approvalId}:${hash}`).digest('base64url')}`;
  }
  matches(token: string, approvalId: string, hash: string): boolean {
    const expected = Buffer.from(this.token(approvalId, hash));
    const given = Buffer.from(token);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }
}

/** Marks a pending approval whose time has passed as expired, with its action. */
export async function expireIfDue(tx: Tx, approval: ApprovalRow, now: Date): Promise<ApprovalRow> {
  if (approval.status !== 'pending' && approval.status !== 'approved') return approval;
  if (approval.expires_at.getTime() > now.getTime()) return approval;
  if (approval.status === 'approved' && approval.token_used_at) return approval;
  await tx.updateTable('approvals').set({ status: 'expired', decided_at: now }).where('id', '=', approval.id).execute();
  await tx
    .updateTable('action_requests')
    .set({ state: 'expired', updated_at: now })
    .where('id', '=', approval.action_id)
    .where('state', 'in', ['approval_required', 'approved'])
    .execute();
  return { ...approval, status: 'expired', decided_at: now };
}

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

interface Execution {
  status: 'succeeded' | 'failed' | 'not_run';
  output: unknown;
}

/**
 * Runs an allowed action: the built-in sample tools through their simulated executors with the
 * tool's credential reference (which must not be revoked); other tools are authorised for the
 * caller's proxy to run (state `approved`).
 */
async function execute(tx: Tx, toolKey: string, tool: DecisionState['tool'], parameters: Record<string, unknown>): Promise<Execution> {
  const executor = SAMPLE_EXECUTORS[toolKey];
  if (!tool?.builtin || !executor) return { status: 'not_run', output: null };
  if (tool.credentialRefId) {
    const cred = await tx.selectFrom('credential_refs').select('status').where('id', '=', tool.credentialRefId).executeTakeFirst();
    if (cred?.status !== 'active') return { status: 'failed', output: { error: 'credential_unavailable' } };
  }
  return { status: 'succeeded', output: executor(parameters) };
}

/** Reads the agent, settings and registry state in one statement, then runs the pure engine. */
async function decideNow(tx: Tx, who: Submitter, body: ActionIn, now: Date, approvalPresent: boolean) {
  const state = await loadDecisionState(tx, who.orgId, who.agentId, body.tool);
  if (!state.agent) throw notFound('No such agent.');
  const decision = decide(
    {
      agent: state.agent,
      identityId: who.identityId,
      action: {
        tool: body.tool,
        operation: body.operation,
        target: body.target,
        parameters: body.parameters,
        environment: body.environment ?? null,
        onBehalfOf: body.on_behalf_of ?? null,
        justification: body.justification ?? null,
      },
      now: now.toISOString(),
      approvalPresent,
    },
    state.snapshot,
  );
  return { decision, state };
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

/** The most submissions one group commit carries. */
const MAX_BATCH = 64;

interface Job {
  who: Submitter;
  key: string;
  body: ActionIn;
  resolve: (result: SubmissionOut) => void;
  reject: (err: unknown) => void;
}

export class ActionsService {
  readonly tokens: ApprovalTokens;
  constructor(private readonly app: FastifyInstance) {
    this.tokens = new ApprovalTokens(app.deps.config.tokenSigningSeed);
  }

  private readonly queues = new Map<string, Job[]>();
  private readonly draining = new Set<string>();

  /**
   * Submits (or resubmits) an action under an idempotency key. Submissions of one organisation are
   * group-committed: while one batch's transaction runs, the next ones queue, and then go together in
   * one transaction with one evidence append and one commit. An acknowledged decision is durable.
   */
  submit(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut> {
    return new Promise((resolve, reject) => {
      const queue = this.queues.get(who.orgId) ?? [];
      queue.push({ who, key, body, resolve, reject });
      this.queues.set(who.orgId, queue);
      if (!this.draining.has(who.orgId)) void this.drain(who.orgId);
    });
  }

  private async drain(orgId: string): Promise<void> {
    this.draining.add(orgId);
    try {
      for (let queue = this.queues.get(orgId); queue && queue.length > 0; queue = this.queues.get(orgId)) {
        await this.runBatch(orgId, queue.splice(0, MAX_BATCH));
      }
    } finally {
      this.draining.delete(orgId);
      this.queues.delete(orgId);
    }
  }

  private async runBatch(orgId: string, batch: Job[]): Promise<void> {
    const { db, clock, evidence } = this.app.deps;
    const outcomes: Array<{ ok: SubmissionOut } | { error: unknown }> = [];
    try {
      await inScope(db, { orgId }, async (tx) => {
        const now = clock.now();
        const events: EvidenceEvent[] = [];
        for (const job of batch) {
          try {
            outcomes.push({ ok: await this.process(tx, job.who, job.key, job.body, now, events) });
          } catch (err) {
            // A refusal (idempotency conflict, unknown agent) happens before its job writes anything.
            if (!(err instanceof ApiError)) throw err;
            outcomes.push({ error: err });
          }
        }
        await appendEvidence(tx, evidence, orgId, events, now);
      });
    } catch {
      // A statement failed and the batch rolled back (for example a key another API process inserted
      // meanwhile): each submission runs again on its own.
      for (const job of batch) this.submitAlone(job.who, job.key, job.body).then(job.resolve, job.reject);
      return;
    }
    batch.forEach((job, i) => {
      const outcome = outcomes[i]!;
      if ('ok' in outcome) job.resolve(outcome.ok);
      else job.reject(outcome.error);
    });
  }

  /** One submission in its own transaction; a racing insert of the same key answers as its replay. */
  private async submitAlone(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut> {
    const once = () =>
      inScope(this.app.deps.db, { orgId: who.orgId }, async (tx) => {
        const now = this.app.deps.clock.now();
        const events: EvidenceEvent[] = [];
        const result = await this.process(tx, who, key, body, now, events);
        await appendEvidence(tx, this.app.deps.evidence, who.orgId, events, now);
        return result;
      });
    try {
      return await once();
    } catch (err) {
      if (isUniqueViolation(err)) return once();
      throw err;
    }
  }

  /** Decides (or replays, or redeems an approval for) one submission; evidence goes to `events`. */
  private async process(tx: Tx, who: Submitter, key: string, body: ActionIn, now: Date, events: EvidenceEvent[]): Promise<SubmissionOut> {
    const hash = requestHash(body);
    const existing = await tx
      .selectFrom('action_requests')
      .selectAll()
      .where('org_id', '=', who.orgId)
      .where('agent_id', '=', who.agentId)
      .where('idempotency_key', '=', key)
      .forUpdate()
      .executeTakeFirst();
    if (existing) {
      if (existing.request_hash !== hash) throw new ApiError('idempotency_conflict');
      let approval = await tx.selectFrom('approvals').selectAll().where('action_id', '=', existing.id).forUpdate().executeTakeFirst();
      if (approval) approval = await expireIfDue(tx, approval, now);
      if (body.approval_token && approval) {
        const redeemed = await this.redeem(tx, who, existing, approval, body, now, events);
        if (redeemed) return redeemed;
      }
      const current = await tx.selectFrom('action_requests').selectAll().where('id', '=', existing.id).executeTakeFirstOrThrow();
      return toSubmission(current, approval, true);
    }

    const { decision, state } = await decideNow(tx, who, body, now, false);
    const org = { content_retention: state.contentRetention, approval_ttl_seconds: state.approvalTtlSeconds };
    const execution = decision.decision === 'allow' ? await execute(tx, body.tool, state.tool, body.parameters) : undefined;
    const id = randomUUID();
    const action = await tx
      .insertInto('action_requests')
      .values({
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
        parameters: JSON.stringify(redact(body.parameters, org.content_retention)),
        environment: body.environment ?? null,
        on_behalf_of: body.on_behalf_of ?? null,
        justification: body.justification ?? null,
        state: stateAfter(decision.decision, execution),
        decision: decision.decision,
        reason_codes: decision.reasonCodes,
        trace: JSON.stringify(decision.trace),
        approvals_required: decision.approvalsRequired,
        execution_status: execution?.status ?? null,
        output_redacted: execution ? JSON.stringify(redact(execution.output, org.content_retention)) : null,
        requested_by: who.requestedBy,
        correlation_id: who.correlationId,
        created_at: now,
        updated_at: now,
        executed_at: execution?.status === 'succeeded' ? now : null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();

    let approval: ApprovalRow | undefined;
    events.push({
      eventType: 'decision',
      agentId: who.agentId,
      actionRequestId: id,
      correlationId: who.correlationId,
      payload: { tool: body.tool, operation: body.operation, target: body.target, decision: decision.decision, reason_codes: decision.reasonCodes, request_hash: hash, source: who.source },
    });
    if (decision.decision === 'require_approval') {
      approval = await tx
        .insertInto('approvals')
        .values({
          id: randomUUID(),
          org_id: who.orgId,
          action_id: id,
          agent_id: who.agentId,
          status: 'pending',
          approvals_required: decision.approvalsRequired,
          request_hash: hash,
          expires_at: new Date(now.getTime() + org.approval_ttl_seconds * 1000),
          token_used_at: null,
          created_at: now,
          decided_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      events.push({
        eventType: 'approval_request',
        agentId: who.agentId,
        actionRequestId: id,
        correlationId: who.correlationId,
        payload: { approval_id: approval.id, approvals_required: approval.approvals_required, expires_at: approval.expires_at.toISOString() },
      });
    }
    if (execution) {
      events.push({
        eventType: 'execution',
        agentId: who.agentId,
        actionRequestId: id,
        correlationId: who.correlationId,
        payload: { tool: body.tool, status: execution.status },
      });
    }
    return toSubmission(action, approval, false);
  }

  /**
   * Resubmission with an approval token: the token must be this approval's, for this exact request,
   * unexpired and unused. The action is decided again (a suspension since the approval still wins)
   * with the approval present, and runs once.
   */
  private async redeem(
    tx: Tx,
    who: Submitter,
    action: ActionRow,
    approval: ApprovalRow,
    body: ActionIn,
    now: Date,
    events: EvidenceEvent[],
  ) {
    const token = body.approval_token!;
    if (approval.status !== 'approved' || approval.token_used_at || !this.tokens.matches(token, approval.id, approval.request_hash)) {
      return undefined;
    }
    const { decision, state } = await decideNow(tx, who, body, now, true);
    const org = { content_retention: state.contentRetention };
    const execution = decision.decision === 'allow' ? await execute(tx, body.tool, state.tool, body.parameters) : undefined;
    await tx.updateTable('approvals').set({ token_used_at: now }).where('id', '=', approval.id).execute();
    const updated = await tx
      .updateTable('action_requests')
      .set({
        state: stateAfter(decision.decision, execution),
        decision: decision.decision,
        reason_codes: decision.reasonCodes,
        trace: JSON.stringify(decision.trace),
        execution_status: execution?.status ?? null,
        output_redacted: execution ? JSON.stringify(redact(execution.output, org.content_retention)) : null,
        executed_at: execution?.status === 'succeeded' ? now : null,
        updated_at: now,
      })
      .where('id', '=', action.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    events.push(
      {
        eventType: 'decision',
        agentId: who.agentId,
        actionRequestId: action.id,
        correlationId: who.correlationId,
        payload: { decision: decision.decision, reason_codes: decision.reasonCodes, approval_id: approval.id, request_hash: approval.request_hash },
      },
      ...(execution
        ? [{ eventType: 'execution', agentId: who.agentId, actionRequestId: action.id, correlationId: who.correlationId, payload: { tool: body.tool, status: execution.status } }]
        : []),
    );
    return toSubmission(updated, { ...approval, token_used_at: now }, false);
  }
}
