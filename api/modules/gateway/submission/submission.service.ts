import type { Clock } from '../../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../../db/database.js';
import { ApiError, notFound } from '../../../platform/errors.js';
import type { DecisionMetrics } from '../../../platform/metrics.js';
import {
  agentRateKey,
  arrivalCounts,
  enforceLimit,
  RATE_WINDOW_MS,
  rateLimited,
  windowStartOf,
  type HitCounter,
} from '../../../platform/rate-limit.js';
import { isUniqueViolation } from '../../../platform/schemas.js';
import { appendEvidence, type EvidenceEvent, type EvidenceSigner } from '../../evidence/index.js';
import { recordTelemetry, telemetryEvents, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionIn, SubmissionOut } from '../actions.schemas.js';
import type { DecisionSnapshots, OrgView } from '../snapshot.js';
import { requestHash, type ApprovalTokens } from './approval-tokens.js';
import { GroupCommit } from './group-commit.js';
import { prepare, type Prepared, type Submitter } from './records.js';
import { resubmit } from './replay.js';
import { insertAction, lockActionByKey, probeBatch, writeBatch } from './submission.repository.js';

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
  resolve: (result: SubmissionOut) => void;
  reject: (err: unknown) => void;
}

type Outcome = { ok: SubmissionOut } | { error: unknown };

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
  private readonly batches = new GroupCommit<Job>((orgId, batch) => this.runBatch(orgId, batch));

  constructor(private readonly deps: SubmissionDeps) {}

  /**
   * Submits (or resubmits) an action under an idempotency key. Submissions of one organisation are
   * group-committed: while one batch's transaction runs, the next ones queue, and then go together in
   * one transaction with one evidence append and one commit. An acknowledged decision is durable.
   */
  submit(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut> {
    const arrived = performance.now();
    return new Promise((resolve, reject) => this.batches.add(who.orgId, { who, key, body, arrived, resolve, reject }));
  }

  /**
   * One transaction for the batch. Submissions under new keys are decided in memory against the
   * registry snapshot and written with one insert per table; replays, redemptions, repeated keys
   * within the batch and keys another process took meanwhile go one by one; then one evidence append.
   */
  private async runBatch(orgId: string, batch: Job[]): Promise<void> {
    const { db, clock, evidence, snapshots, gatewayPerMinute: limit } = this.deps;
    this.deps.metrics?.batch(batch.length);
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
        const windowStart = windowStartOf(now.getTime(), RATE_WINDOW_MS);
        const { hits, version, taken, head } = await probeBatch(
          tx,
          orgId,
          [...budgets].map(([key, jobs]) => ({ key, windowStart, count: jobs.length })),
          batch.map((j) => ({ agentId: j.who.agentId, key: j.key })),
        );
        for (const [k, jobs] of budgets) {
          arrivalCounts(Number(hits[k] ?? jobs.length), jobs.length).forEach((count, i) => {
            if (count > limit) {
              this.deps.hits.refused(k);
              outcomes.set(jobs[i]!, { error: rateLimited(limit, windowStart + RATE_WINDOW_MS - now.getTime()) });
            }
          });
        }
        const view = await snapshots.load(tx, orgId, batch.map((j) => j.who.agentId), version);
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
          const prepared = prepare(job.who, job.key, job.body, hash, state, now, (job.decidedMs = sinceArrival(job.arrived)));
          fresh.push(prepared);
          inBatch.set(pair, prepared);
          outcomes.set(job, { ok: prepared.result });
        }

        // Replays and redemptions lock and update their rows one by one, first.
        const events: EvidenceEvent[] = [];
        for (const job of oneByOne) {
          try {
            outcomes.set(job, { ok: await this.process(tx, view, job, now, events, telemetry) });
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
        await writeBatch(
          tx,
          evidence,
          orgId,
          head,
          events,
          now,
          fresh.map((f) => f.action),
          fresh.flatMap((f) => (f.approval ? [f.approval] : [])),
          telemetry,
          fresh.flatMap((f) => (f.notice ? [f.notice] : [])),
        );
      });
    } catch {
      // A statement failed and the batch rolled back: each submission runs again on its own.
      for (const job of batch) {
        this.submitAlone(job).then((result) => {
          this.count(job, result);
          job.resolve(result);
        }, job.reject);
      }
      return;
    }
    for (const job of batch) {
      const outcome = outcomes.get(job)!;
      if ('ok' in outcome) {
        this.count(job, outcome.ok);
        job.resolve(outcome.ok);
      } else job.reject(outcome.error);
    }
  }

  /** A decision counts once it is committed: a batch rolled back runs again, and is counted then. */
  private count(job: Job, result: SubmissionOut): void {
    if (result.replayed || job.decidedMs === undefined) return;
    this.deps.metrics?.decided(result.decision.decision, result.decision.reason_codes, job.decidedMs / 1000);
  }

  /** One submission in its own transaction; a racing insert of the same key answers as its replay. */
  private async submitAlone(job: Job): Promise<SubmissionOut> {
    const { who } = job;
    const { db, clock, evidence, snapshots, hits, gatewayPerMinute } = this.deps;
    // The batch's hits rolled back with it.
    job.decidedMs = undefined;
    if (who.source === 'gateway') await enforceLimit(hits, agentRateKey(who.agentId), gatewayPerMinute);
    const once = () =>
      inScope(db, { orgId: who.orgId }, async (tx) => {
        const now = clock.now();
        const events: EvidenceEvent[] = [];
        const telemetry: TelemetryEvent[] = [];
        const view = await snapshots.load(tx, who.orgId, [who.agentId]);
        const result = await this.process(tx, view, job, now, events, telemetry);
        await appendEvidence(tx, evidence, who.orgId, events, now);
        await recordTelemetry(tx, who.orgId, telemetry);
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
  ): Promise<SubmissionOut> {
    const { who, key, body } = job;
    const hash = requestHash(body);
    const existing = await lockActionByKey(tx, who.orgId, who.agentId, key);
    if (existing) {
      const result = await resubmit(tx, view, this.deps.tokens, who, existing, body, hash, now, events, telemetry);
      // Not a replay: a redemption, a decision of its own.
      if (!result.replayed) {
        job.decidedMs = sinceArrival(job.arrived);
        telemetry.push(redeemedEvent(job, result, now));
      }
      return result;
    }

    const state = view.state(who.agentId, body.tool);
    if (!state.agent) throw notFound('No such agent.');
    const prepared = prepare(who, key, body, hash, state, now, (job.decidedMs = sinceArrival(job.arrived)));
    await insertAction(tx, prepared.action, prepared.approval, prepared.notice, now);
    events.push(...prepared.events);
    return prepared.result;
  }
}
