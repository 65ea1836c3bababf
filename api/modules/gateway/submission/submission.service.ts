import type { Clock } from '../../../../lib/clock.js';
import { inScope, inScopePiped, poolOf, prepared, type Ahead, type Db, type Tx } from '../../../db/database.js';
import { SharedRollback, SharedTransactions, type ScopedPart } from '../../../db/shared-transaction.js';
import { ApiError, notFound } from '../../../platform/errors.js';
import type { DecisionMetrics } from '../../../platform/metrics.js';
import {
  agentRateKey,
  arrivalCounts,
  countHits,
  RATE_WINDOW_MS,
  rateLimited,
  windowStartOf,
  type HitCounter,
} from '../../../platform/rate-limit.js';
import { isUniqueViolation } from '../../../platform/schemas.js';
import { appendEvidence, chainEvents, HeadMoved, headMovedOr, type ChainHead, type EvidenceEvent, type EvidenceSigner } from '../../evidence/index.js';
import { recordTelemetry, telemetryEvents, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionIn, SubmissionOut } from '../actions.schemas.js';
import type { DecisionSnapshots, OrgView } from '../snapshot.js';
import { requestHash, type ApprovalTokens } from './approval-tokens.js';
import { GroupCommit, type Pipeline } from './group-commit.js';
import { prepare, type Prepared, type Submitter } from './records.js';
import { resubmit } from './replay.js';
import { SessionLedger, sessionPairs } from './sessions.js';
import {
  batchWrite,
  insertAction,
  lockActionByKey,
  lockHead,
  probed,
  probeQuery,
  readSessions,
  sessionsWrite,
  type ProbeRow,
} from './submission.repository.js';

export interface SubmissionDeps {
  db: Db;
  clock: Clock;
  evidence: EvidenceSigner;
  snapshots: DecisionSnapshots;
  hits: HitCounter;
  tokens: ApprovalTokens;
  /** The agents' gateway budget. */
  gatewayPerMinute: number;
  /** Decisions, their latency and the batches, for GET /metrics. */
  metrics?: DecisionMetrics;
}

interface Job {
  who: Submitter;
  key: string;
  body: ActionIn;
  /** performance.now() when it entered the pipeline: its decision's telemetry latency starts here. */
  arrived: number;
  /** Its decision's latency in ms as recorded (decision_ms, or a redemption's event), once decided; none for a replay. */
  decidedMs?: number;
  /**
   * A gateway submission's hit on its agent's budget, once counted (by its first batch, in a statement
   * of its own): its refusal when over the budget, or none. Counted once, whatever its batch's fate.
   */
  budget?: { refusal: ApiError | undefined };
  resolve: (result: SubmissionOut) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: SubmissionOut } | { error: unknown };

/** A batch's transaction, as the organisations' batches share them (SharedTransactions). */
type BatchPart = ScopedPart<ProbeRow, undefined, { key: string; count: number }>;

/** Milliseconds since `arrived`, to the microsecond: a decision's latency as telemetry shows it. */
const sinceArrival = (arrived: number) => Math.round((performance.now() - arrived) * 1000) / 1000;

/**
 * The telemetry event of a decision on resubmission with an approval token. A first decision writes no
 * event: its action row carries its latency (`decision_ms`) and is read as its event (D26).
 */
function redeemedEvent(job: Pick<Job, 'who' | 'body' | 'arrived' | 'decidedMs'>, result: SubmissionOut, now: Date): TelemetryEvent {
  return telemetryEvents.decision({
    at: now,
    agentId: job.who.agentId,
    correlationId: job.who.correlationId,
    actionId: result.action.id,
    tool: job.body.tool,
    operation: job.body.operation,
    decision: result.decision.decision,
    reasonCodes: result.decision.reason_codes,
    latencyMs: job.decidedMs ?? sinceArrival(job.arrived),
    source: job.who.source,
    redeemed: true,
  });
}

export class SubmissionService {
  private readonly batches = new GroupCommit<Job, ChainHead>((orgId, batch, pipeline) => this.runBatch(orgId, batch, pipeline));
  /** On PostgreSQL, batches of several organisations that lock their chain heads go in one transaction. */
  private readonly shared?: SharedTransactions<ProbeRow, undefined, { key: string; count: number }>;

  constructor(private readonly deps: SubmissionDeps) {
    const alone = (part: BatchPart) => inScopePiped(deps.db, { orgId: part.orgId }, part.first, part.body, part.ahead);
    if (poolOf(deps.db)) this.shared = new SharedTransactions(deps.db, alone, (parts) => deps.metrics?.transaction(parts));
  }

  /**
   * Submits (or resubmits) an action under an idempotency key. Submissions of one organisation are
   * group-committed: those that queue while a batch runs go together as the next batch, one transaction
   * with one evidence append and one commit, pipelined behind the batch before (D36). An acknowledged
   * decision is durable.
   */
  submit(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut> {
    const arrived = performance.now();
    return new Promise((resolve, reject) => this.batches.add(who.orgId, { who, key, body, arrived, resolve, reject }));
  }

  /**
   * The statement that counts the batch's gateway submissions not counted yet on their agents' budgets,
   * sent ahead of the batch's transaction and committed on its own (in the transaction it would hold
   * the budgets' rows locked until its commit, and the next batch of the same agents would wait for
   * it); each submission learns its refusal, if over the budget, when it has run. None when there is
   * nothing to count.
   */
  private budgetCount(batch: Job[]): Ahead<{ key: string; count: number }> | undefined {
    const byKey = new Map<string, Job[]>();
    for (const job of batch) {
      if (job.who.source !== 'gateway' || job.budget) continue;
      const k = agentRateKey(job.who.agentId);
      const jobs = byKey.get(k);
      if (jobs) jobs.push(job);
      else byKey.set(k, [job]);
    }
    if (byKey.size === 0) return undefined;
    const { db, clock } = this.deps;
    const now = clock.now().getTime();
    const windowStart = windowStartOf(now, RATE_WINDOW_MS);
    return {
      query: prepared(countHits([...byKey].map(([key, jobs]) => ({ key, windowStart, count: jobs.length }))).compile(db)),
      done: (rows) => {
        const totals = new Map(rows.map((r) => [r.key, Number(r.count)]));
        for (const [k, jobs] of byKey) {
          arrivalCounts(totals.get(k) ?? jobs.length, jobs.length).forEach((count, i) => {
            jobs[i]!.budget = this.budgetAt(count, windowStart + RATE_WINDOW_MS - now);
          });
        }
      },
    };
  }

  /** A submission's place `count` in its agent's budget window, with `ttlMs` of the window left: refused past the budget. */
  private budgetAt(count: number, ttlMs: number): Job['budget'] {
    const limit = this.deps.gatewayPerMinute;
    return { refusal: count > limit ? rateLimited(limit, ttlMs) : undefined };
  }

  /**
   * One transaction for the batch. Submissions under new keys are decided in memory against the
   * registry snapshot and written with one insert per table; replays, redemptions, repeated keys
   * within the batch and keys another process took meanwhile go one by one; then one evidence append.
   * While the batch before it is in flight (`after`), the batch takes no lock on the chain head: it is
   * decided while that one writes, chains its records after the head that one hands over once written,
   * and its own write applies only if the head is still that one when that one has committed (else the
   * batch runs again, locking the head). A batch that locks the head may share its transaction with other
   * organisations' batches starting at the same time (`alone` false); if another's failure rolls it back,
   * it runs again alone.
   */
  private async runBatch(orgId: string, batch: Job[], pipeline: Pipeline<ChainHead>, alone = false): Promise<void> {
    const { release, handOver } = pipeline;
    const { db, snapshots } = this.deps;
    // Flow rules read the sessions' facts behind the chain head's lock, so such an organisation's batch
    // locks the head (waiting for the batch in flight to commit) instead of following that batch.
    const flow = snapshots.readsSession(orgId);
    const after = flow ? undefined : pipeline.after;
    this.deps.metrics?.batch(batch.length);
    const outcomes = new Map<Job, Outcome>();
    const sessions = sessionPairs(batch.map((j) => j.who));
    try {
      const probe = probeQuery(db, orgId, batch.map((j) => ({ agentId: j.who.agentId, key: j.key })), !after, flow ? [] : sessions);
      // The budgets' count and the probe go with `begin`, the write with `commit`: two round trips a batch.
      const part: BatchPart = {
        orgId,
        first: probe,
        body: (tx, [row]) => this.decide(tx, orgId, batch, row, sessions, outcomes, { after, release, handOver }),
        ahead: this.budgetCount(batch),
      };
      if (after || alone || !this.shared) {
        this.deps.metrics?.transaction(1);
        await inScopePiped(db, { orgId }, part.first, part.body, part.ahead).catch((err: unknown) => {
          throw after ? headMovedOr(err) : err;
        });
      } else await this.shared.run(part);
    } catch (err) {
      // Rolled back with another organisation's batch it shared a transaction with.
      if (err instanceof SharedRollback) return this.runBatch(orgId, batch, { after: undefined, release, handOver }, true);
      // Chained after a head that moved (the batch before rolled back, or another process appended
      // first): the whole batch again, after the locked head.
      if (err instanceof HeadMoved) return this.runBatch(orgId, batch, { after: undefined, release, handOver });
      // A statement failed and the batch rolled back: each submission runs again on its own.
      for (const job of batch) {
        this.submitAlone(job).then(
          (result) => {
            this.count(job, result);
            job.resolve(result);
          },
          (err) => this.refuse(job, err),
        );
      }
      return;
    }
    for (const job of batch) {
      const outcome = outcomes.get(job)!;
      if ('ok' in outcome) {
        this.count(job, outcome.ok);
        job.resolve(outcome.ok);
      } else this.refuse(job, outcome.error);
    }
  }

  /**
   * The batch inside its transaction, once its probe has run: each submission decided (or refused,
   * replayed, redeemed) into `outcomes`, the evidence chained and signed, and the write to send with the
   * commit.
   */
  private async decide(
    tx: Tx,
    orgId: string,
    batch: Job[],
    row: ProbeRow | undefined,
    pairs: Array<{ agentId: string; session: string }>,
    outcomes: Map<Job, Outcome>,
    { after, release, handOver }: Pipeline<ChainHead>,
  ) {
    const { clock, evidence, snapshots } = this.deps;
    const now = clock.now();
    for (const job of batch) if (job.budget?.refusal) outcomes.set(job, { error: job.budget.refusal });
    const { version, taken, head: locked, created } = await probed(tx, orgId, row, !after);
    const view = await snapshots.load(tx, orgId, batch.map((j) => j.who.agentId), version);
    // A flow rule published since this batch chose to follow the one in flight: again, locking the head.
    if (view.readsSession && !locked) throw new HeadMoved();
    const sessions = new SessionLedger(view.readsSession ? await readSessions(tx, orgId, pairs) : (row?.sessions ?? []));
    const fresh: Prepared[] = [];
    // Redemptions' telemetry events, written in the batch's one statement (a first decision's is its action row).
    const telemetry: TelemetryEvent[] = [];
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
      const prepared = prepare(job.who, job.key, job.body, hash, state, now, (job.decidedMs = sinceArrival(job.arrived)), sessions);
      fresh.push(prepared);
      inBatch.set(pair, prepared);
      outcomes.set(job, { ok: prepared.result });
    }

    // Replays and redemptions lock and update their rows one by one, first.
    const events: EvidenceEvent[] = [];
    for (const job of oneByOne) {
      try {
        outcomes.set(job, { ok: await this.process(tx, view, job, now, events, telemetry, sessions) });
      } catch (err) {
        // A refusal (idempotency conflict, unknown agent) happens before its job writes anything.
        if (!(err instanceof ApiError)) throw err;
        outcomes.set(job, { error: err });
      }
    }
    // The head to chain after: the locked one, or the one the batch before hands over (if it ended
    // without one, the head locked now).
    const expected = locked ?? (await after);
    const head = expected ?? (await lockHead(tx, orgId));
    const unlocked = locked ? undefined : expected;
    // Then every new action, its approval and all the evidence in one statement. A key another
    // process took since the probe fails it, and the batch runs again one by one.
    for (const f of fresh) events.push(...f.events);
    const chained = chainEvents(evidence, orgId, head, events, now);
    release();
    // A head this batch created is not committed until the batch is: the next batch locks it itself.
    if (created) handOver(undefined);
    if (events.length === 0) {
      handOver(head);
      return { result: undefined };
    }
    // Handed over once this write holds the head's row: the next batch's write then waits for this
    // one's commit on it.
    const last = batchWrite(
      tx,
      orgId,
      chained,
      unlocked,
      now,
      fresh.map((f) => f.action),
      fresh.flatMap((f) => (f.approval ? [f.approval] : [])),
      telemetry,
      fresh.flatMap((f) => (f.notice ? [f.notice] : [])),
      sessions.rows(orgId, now),
    );
    return { last, written: () => handOver(chained.head), result: undefined };
  }

  /** Rejects a submission; a refusal over its agent's budget counts on /metrics. */
  private refuse(job: Job, err: unknown): void {
    if (err instanceof ApiError && err.code === 'rate_limited') this.deps.hits.refused(agentRateKey(job.who.agentId));
    job.reject(err);
  }

  /** A decision counts once it is committed: a batch rolled back runs again, and is counted then. */
  private count(job: Job, result: SubmissionOut): void {
    if (result.replayed || job.decidedMs === undefined) return;
    this.deps.metrics?.decided(result.decision.decision, result.decision.reason_codes, job.decidedMs / 1000);
  }

  /** One submission in its own transaction; a racing insert of the same key answers as its replay. */
  private async submitAlone(job: Job): Promise<SubmissionOut> {
    const { who } = job;
    const { db, clock, evidence, snapshots } = this.deps;
    job.decidedMs = undefined;
    // Counted by its batch, unless that count is what failed.
    if (who.source === 'gateway' && !job.budget) {
      const { current, ttl } = await this.deps.hits.hit(agentRateKey(who.agentId), RATE_WINDOW_MS);
      job.budget = this.budgetAt(current, ttl);
    }
    if (job.budget?.refusal) throw job.budget.refusal;
    const once = () =>
      inScope(db, { orgId: who.orgId }, async (tx) => {
        const now = clock.now();
        const events: EvidenceEvent[] = [];
        const telemetry: TelemetryEvent[] = [];
        const view = await snapshots.load(tx, who.orgId, [who.agentId]);
        // Flow rules read the session's facts behind the chain head's lock (see decide).
        if (view.readsSession) await lockHead(tx, who.orgId);
        const sessions = new SessionLedger(await readSessions(tx, who.orgId, sessionPairs([who])));
        const result = await this.process(tx, view, job, now, events, telemetry, sessions);
        await appendEvidence(tx, evidence, who.orgId, events, now);
        await recordTelemetry(tx, who.orgId, telemetry);
        const rows = sessions.rows(who.orgId, now);
        if (rows.length > 0) await sessionsWrite(tx, rows).execute();
        return result;
      });
    try {
      return await once();
    } catch (err) {
      if (isUniqueViolation(err)) return once();
      throw err;
    }
  }

  /**
   * Decides (or replays, or redeems an approval for) one submission; evidence goes to `events`, the
   * telemetry a redemption writes to `telemetry`.
   */
  private async process(
    tx: Tx,
    view: OrgView,
    job: Pick<Job, 'who' | 'key' | 'body' | 'arrived' | 'decidedMs'>,
    now: Date,
    events: EvidenceEvent[],
    telemetry: TelemetryEvent[],
    sessions: SessionLedger,
  ): Promise<SubmissionOut> {
    const { who, key, body } = job;
    const hash = requestHash(body);
    const existing = await lockActionByKey(tx, who.orgId, who.agentId, key);
    if (existing) {
      const result = await resubmit(tx, view, this.deps.tokens, who, existing, body, hash, now, events, telemetry, sessions);
      // Not a replay: a redemption, a decision of its own.
      if (!result.replayed) {
        job.decidedMs = sinceArrival(job.arrived);
        telemetry.push(redeemedEvent(job, result, now));
      }
      return result;
    }

    const state = view.state(who.agentId, body.tool);
    if (!state.agent) throw notFound('No such agent.');
    const prepared = prepare(who, key, body, hash, state, now, (job.decidedMs = sinceArrival(job.arrived)), sessions);
    await insertAction(tx, prepared.action, prepared.approval, prepared.notice, now);
    events.push(...prepared.events);
    return prepared.result;
  }
}
