import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { sql, type Insertable, type InsertQueryBuilder, type InsertResult, type QueryCreator, type Selectable } from 'kysely';
import type { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import type { ActionRequestsTable, ApprovalsTable, DB } from '../../db/schema.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { agentRateKey, enforceLimit, rateLimited } from '../../platform/rate-limit.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { appendEvidence, chainEvents, lockHead, recordValues, type EvidenceEvent } from '../evidence/chain.js';
import type { actionIn, SubmissionOut } from './actions.schemas.js';
import { decide } from './engine/decide.js';
import type { Decision } from './engine/types.js';
import { redact, SAMPLE_EXECUTORS } from './executors.js';
import type { DecisionSnapshots, DecisionState, OrgView } from './snapshot.js';

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
function execute(toolKey: string, tool: DecisionState['tool'], parameters: Record<string, unknown>): Execution {
  const executor = SAMPLE_EXECUTORS[toolKey];
  if (!tool?.builtin || !executor) return { status: 'not_run', output: null };
  if (tool.credentialActive === false) return { status: 'failed', output: { error: 'credential_unavailable' } };
  return { status: 'succeeded', output: executor(parameters) };
}

/** Runs the pure engine over one submission and the registry state of its agent. */
function decideWith(state: DecisionState, who: Submitter, body: ActionIn, now: Date, approvalPresent: boolean): Decision {
  return decide(
    {
      agent: state.agent!,
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

/** A fresh submission decided in memory: its rows, its evidence and its answer. */
interface Prepared {
  action: Insertable<ActionRequestsTable>;
  approval: Insertable<ApprovalsTable> | undefined;
  events: EvidenceEvent[];
  result: SubmissionOut;
}

/** Decides a submission under a key not used before, and runs it when allowed; writes nothing. */
function prepare(who: Submitter, key: string, body: ActionIn, hash: string, state: DecisionState, now: Date): Prepared {
  const decision = decideWith(state, who, body, now, false);
  const execution = decision.decision === 'allow' ? execute(body.tool, state.tool, body.parameters) : undefined;
  const output = execution ? redact(execution.output, state.contentRetention) : null;
  const id = randomUUID();
  const status = stateAfter(decision.decision, execution);
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
    state: status,
    decision: decision.decision,
    reason_codes: decision.reasonCodes,
    trace: JSON.stringify(decision.trace),
    approvals_required: decision.approvalsRequired,
    execution_status: execution?.status ?? null,
    output_redacted: execution ? JSON.stringify(output) : null,
    requested_by: who.requestedBy,
    correlation_id: who.correlationId,
    created_at: now,
    updated_at: now,
    executed_at: execution?.status === 'succeeded' ? now : null,
  };
  const about = { agentId: who.agentId, actionRequestId: id, correlationId: who.correlationId };
  const events: EvidenceEvent[] = [
    {
      eventType: 'decision',
      ...about,
      payload: { tool: body.tool, operation: body.operation, target: body.target, decision: decision.decision, reason_codes: decision.reasonCodes, request_hash: hash, source: who.source },
    },
  ];
  let approval: Insertable<ApprovalsTable> | undefined;
  const expiresAt = new Date(now.getTime() + state.approvalTtlSeconds * 1000);
  if (decision.decision === 'require_approval') {
    approval = {
      id: randomUUID(),
      org_id: who.orgId,
      action_id: id,
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
  return {
    action,
    approval,
    events,
    result: {
      action: { id, status: status as SubmissionOut['action']['status'] },
      decision: { decision: decision.decision, reason_codes: decision.reasonCodes },
      execution: execution ? { status: execution.status, output_redacted: output } : null,
      approval: approval
        ? { id: approval.id, status: 'pending', approvals_required: decision.approvalsRequired, expires_at: expiresAt.toISOString() }
        : null,
      replayed: false,
      idempotency_key: key,
    },
  };
}

/** The hits of a batch on the agents' gateway budgets: keys in sorted order, so rows lock in one order. */
interface BatchHits {
  keys: string[];
  counts: number[];
  windowStart: number;
}

/**
 * In one statement: the batch's hits counted on the agents' gateway budgets, the organisation's
 * registry version, which of the batch's (agent, key) pairs are already taken, and the evidence
 * chain's head, locked for this transaction (null before the first record).
 */
async function probe(tx: Tx, orgId: string, batch: Job[], hits: BatchHits) {
  const { rows } = await sql<{
    hits: Record<string, number> | null;
    version: string | null;
    taken: string[] | null;
    head: { seq: number; hash: string } | null;
  }>`
    with hits as (
      insert into rate_limit_buckets as b (key, window_start, count)
        select k, ${hits.windowStart}::bigint, n from unnest(${hits.keys}::text[], ${hits.counts}::int[]) as u(k, n)
      on conflict (key) do update set
        count = case when b.window_start = excluded.window_start then b.count + excluded.count else excluded.count end,
        window_start = excluded.window_start
      returning key, count)
    select
      (select json_object_agg(key, count) from hits) as hits,
      (select version from registry_versions where org_id = ${orgId}) as version,
      (select array_agg(a.agent_id || ' ' || a.idempotency_key)
         from unnest(${batch.map((j) => j.who.agentId)}::uuid[], ${batch.map((j) => j.key)}::text[]) as k(agent_id, key)
         join action_requests a on a.org_id = ${orgId} and a.agent_id = k.agent_id and a.idempotency_key = k.key) as taken,
      (select json_build_object('seq', seq, 'hash', hash) from evidence_heads where org_id = ${orgId} for update) as head`.execute(tx);
  const r = rows[0];
  return {
    hits: r?.hits ?? {},
    version: r?.version ?? '0',
    taken: new Set(r?.taken ?? []),
    head: r?.head ? { seq: Number(r.head.seq), hash: r.head.hash } : await lockHead(tx, orgId),
  };
}

/** The gateway budget's window. */
const RATE_WINDOW_MS = 60_000;

/** The most submissions one group commit carries. */
const MAX_BATCH = 128;

interface Job {
  who: Submitter;
  key: string;
  body: ActionIn;
  resolve: (result: SubmissionOut) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: SubmissionOut } | { error: unknown };

export class ActionsService {
  readonly tokens: ApprovalTokens;
  private readonly snapshots: DecisionSnapshots;
  constructor(private readonly app: FastifyInstance) {
    this.snapshots = app.deps.snapshots;
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

  /**
   * One transaction for the batch. Submissions under new keys are decided in memory against the
   * registry snapshot and written with one insert per table; replays, redemptions, repeated keys
   * within the batch and keys another process took meanwhile go one by one; then one evidence append.
   */
  private async runBatch(orgId: string, batch: Job[]): Promise<void> {
    const { db, clock, evidence } = this.app.deps;
    const limit = this.app.deps.config.rateLimits.gatewayPerMinute;
    const outcomes = new Map<Job, Outcome>();
    try {
      await inScope(db, { orgId }, async (tx) => {
        outcomes.clear();
        const now = clock.now();
        // Gateway submissions count against their agent's budget here, in the batch's first statement.
        const budgets = new Map<string, Job[]>();
        for (const job of batch) {
          if (job.who.source !== 'gateway') continue;
          const k = agentRateKey(job.who.agentId);
          const jobs = budgets.get(k);
          if (jobs) jobs.push(job);
          else budgets.set(k, [job]);
        }
        const keys = [...budgets.keys()].sort();
        const windowStart = Math.floor(now.getTime() / RATE_WINDOW_MS) * RATE_WINDOW_MS;
        const { hits, version, taken, head } = await probe(tx, orgId, batch, {
          keys,
          counts: keys.map((k) => budgets.get(k)!.length),
          windowStart,
        });
        for (const [k, jobs] of budgets) {
          // The key's jobs took the last jobs.length places of its window, in arrival order.
          const total = Number(hits[k] ?? jobs.length);
          jobs.forEach((job, i) => {
            if (total - jobs.length + 1 + i > limit) outcomes.set(job, { error: rateLimited(limit, windowStart + RATE_WINDOW_MS - now.getTime()) });
          });
        }
        const view = await this.snapshots.load(tx, orgId, batch.map((j) => j.who.agentId), version);
        const fresh: Prepared[] = [];
        const inBatch = new Map<string, Prepared>();
        const oneByOne: Job[] = [];
        for (const job of batch) {
          if (outcomes.has(job)) continue;
          const pair = `${job.who.agentId} ${job.key}`;
          if (taken.has(pair)) {
            oneByOne.push(job);
            continue;
          }
          const hash = requestHash(job.body);
          const earlier = inBatch.get(pair);
          if (earlier) {
            // The same key earlier in this batch: its replay, or a conflict, as if it had been stored.
            outcomes.set(
              job,
              earlier.action.request_hash === hash ? { ok: { ...earlier.result, replayed: true } } : { error: new ApiError('idempotency_conflict') },
            );
            continue;
          }
          const state = view.state(job.who.agentId, job.body.tool);
          if (!state.agent) {
            outcomes.set(job, { error: notFound('No such agent.') });
            continue;
          }
          const prepared = prepare(job.who, job.key, job.body, hash, state, now);
          fresh.push(prepared);
          inBatch.set(pair, prepared);
          outcomes.set(job, { ok: prepared.result });
        }

        // Replays and redemptions lock and update their rows one by one, first.
        const events: EvidenceEvent[] = [];
        for (const job of oneByOne) {
          try {
            outcomes.set(job, { ok: await this.process(tx, view, job.who, job.key, job.body, now, events) });
          } catch (err) {
            // A refusal (idempotency conflict, unknown agent) happens before its job writes anything.
            if (!(err instanceof ApiError)) throw err;
            outcomes.set(job, { error: err });
          }
        }
        // Then every new action, its approval and all the evidence in one statement. A key another
        // process took since the probe fails it, and the batch runs again one by one.
        for (const f of fresh) events.push(...f.events);
        if (events.length === 0) return;
        const chained = chainEvents(evidence, orgId, head, events, now);
        const approvals = fresh.flatMap((f) => (f.approval ? [f.approval] : []));
        // The CTEs only add tables to the query's type; the statement ends with the head's update.
        let write: QueryCreator<DB> = tx;
        const add = <T extends keyof DB>(name: string, insert: (db: QueryCreator<DB>) => InsertQueryBuilder<DB, T, InsertResult>) => {
          write = write.with(name, insert) as unknown as QueryCreator<DB>;
        };
        add('appended', (db) => db.insertInto('evidence_records').values(recordValues(chained.records, now)));
        if (fresh.length > 0) add('actions', (db) => db.insertInto('action_requests').values(fresh.map((f) => f.action)));
        if (approvals.length > 0) add('approvals', (db) => db.insertInto('approvals').values(approvals));
        await write
          .updateTable('evidence_heads')
          .set({ seq: chained.head.seq, hash: chained.head.hash })
          .where('org_id', '=', orgId)
          .execute();
      });
    } catch {
      // A statement failed and the batch rolled back: each submission runs again on its own.
      for (const job of batch) this.submitAlone(job.who, job.key, job.body).then(job.resolve, job.reject);
      return;
    }
    for (const job of batch) {
      const outcome = outcomes.get(job)!;
      if ('ok' in outcome) job.resolve(outcome.ok);
      else job.reject(outcome.error);
    }
  }

  /** One submission in its own transaction; a racing insert of the same key answers as its replay. */
  private async submitAlone(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut> {
    // The batch's hits rolled back with it.
    if (who.source === 'gateway') await enforceLimit(this.app.deps.hits, agentRateKey(who.agentId), this.app.deps.config.rateLimits.gatewayPerMinute);
    const once = () =>
      inScope(this.app.deps.db, { orgId: who.orgId }, async (tx) => {
        const now = this.app.deps.clock.now();
        const events: EvidenceEvent[] = [];
        const view = await this.snapshots.load(tx, who.orgId, [who.agentId]);
        const result = await this.process(tx, view, who, key, body, now, events);
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
  private async process(
    tx: Tx,
    view: OrgView,
    who: Submitter,
    key: string,
    body: ActionIn,
    now: Date,
    events: EvidenceEvent[],
  ): Promise<SubmissionOut> {
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
        const redeemed = await this.redeem(tx, view, who, existing, approval, body, now, events);
        if (redeemed) return redeemed;
      }
      const current = await tx.selectFrom('action_requests').selectAll().where('id', '=', existing.id).executeTakeFirstOrThrow();
      return toSubmission(current, approval, true);
    }

    const state = view.state(who.agentId, body.tool);
    if (!state.agent) throw notFound('No such agent.');
    const prepared = prepare(who, key, body, hash, state, now);
    await tx.insertInto('action_requests').values(prepared.action).execute();
    if (prepared.approval) await tx.insertInto('approvals').values(prepared.approval).execute();
    events.push(...prepared.events);
    return prepared.result;
  }

  /**
   * Resubmission with an approval token: the token must be this approval's, for this exact request,
   * unexpired and unused. The action is decided again (a suspension since the approval still wins)
   * with the approval present, and runs once.
   */
  private async redeem(
    tx: Tx,
    view: OrgView,
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
    const state = view.state(who.agentId, body.tool);
    if (!state.agent) return undefined;
    const decision = decideWith(state, who, body, now, true);
    const org = { content_retention: state.contentRetention };
    const execution = decision.decision === 'allow' ? execute(body.tool, state.tool, body.parameters) : undefined;
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
