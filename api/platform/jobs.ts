import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import PgBoss from 'pg-boss';
import type { JobSettings } from '../config.js';
import { executeSqlText, type Db, type Tx } from '../db/database.js';
import { JOBS_SCHEMA } from '../db/migrations/0009_jobs.js';
import type { Deps } from './context.js';

/**
 * Background jobs on pg-boss (docs/decisions.md D22; worker/README.md has the contract in full).
 * Delivery is at least once: a job runs again when its attempt failed, when its process died (after its
 * expiry), and when its completion could not be recorded; handlers are idempotent.
 */

/** What a handler gets besides the job's data. */
export interface JobContext {
  /** The app's services, as routes reach them through `app.deps`. */
  deps: Deps;
  jobId: string;
  /** 0 on the first attempt, 1 on the first retry, and so on. */
  retryCount: number;
  /**
   * Aborted when the job's time is up (its expiry: it is retried, the attempt must stop writing) or when
   * its process stops without waiting for it (it goes back to the queue).
   */
  signal: AbortSignal;
  /** The process's logger, with the queue and the job's id. */
  log: FastifyBaseLogger;
}

/** A dead-letter handler's context: also what the job's last attempt failed with. */
export interface DeadLetterContext extends JobContext {
  error: string;
}

/**
 * A queue's handler, as a module exports it (`<module>.jobs.ts`, through its index.ts) and api/jobs.ts lists
 * it. `deadLetter` runs once a job's retries are spent, including after its workers were killed: it is
 * where the record the job was working on is marked failed.
 */
export interface JobHandler {
  queue: string;
  /**
   * A cron expression (UTC, minute resolution): the queue gets a job on it, once across every process that
   * works queues (pg-boss's scheduler; its own queue `__pgboss__send-it` comes from migration 0012).
   */
  schedule?: string;
  handler(data: unknown, ctx: JobContext): Promise<void>;
  deadLetter?(data: unknown, ctx: DeadLetterContext): Promise<void>;
}

/** A job as `JobQueue.work` hands it to a handler. */
export interface Job {
  id: string;
  queue: string;
  data: unknown;
  retryCount: number;
  signal: AbortSignal;
  /** What the job's last attempt failed with (a dead-letter job: the last attempt of the job it stands for). */
  output: unknown;
}

export interface SendOptions {
  /** Enqueue inside this open transaction: the job exists if and only if the transaction commits. */
  tx?: Tx;
  /** A key the queue's policy may deduplicate on (the `standard` policy stores it only). */
  singletonKey?: string;
  /** How long an attempt may stay active; default JOB_TIMEOUT_SECONDS. */
  expireInSeconds?: number;
  /** Retries after the first attempt; default the queue's. */
  retryLimit?: number;
  /** Seconds before a retry; default the queue's. */
  retryDelay?: number;
}

export interface WorkOptions {
  /** Jobs of this queue this process runs at once; default WORKER_CONCURRENCY. */
  concurrency?: number;
  /** Default JOB_POLL_INTERVAL_SECONDS. */
  pollingIntervalSeconds?: number;
}

/** The queue a job goes to once its retries are spent (created beside its queue by the migration). */
export const deadLetterQueue = (queue: string) => `${queue}.dead`;

type Executor = PgBoss.Db;

/**
 * The job queue of a process. Sending needs nothing started (the API sends inside its transactions);
 * `start` lets the process work queues and take its turn at maintenance (expiring the jobs of dead
 * workers, archiving). pg-boss reaches the database only through the app's own connections
 * (`executeSqlText`): the app's pool on PostgreSQL, the one connection of the embedded database, in turn
 * with every other statement, so a job statement never runs inside a transaction the app has open.
 */
export class JobQueue {
  private readonly boss: PgBoss;
  /** Statements whose errors reach the caller: what this class runs itself. */
  private readonly strict: Executor;
  private state: 'idle' | 'starting' | 'started' | 'stopping' | 'stopped' = 'idle';
  /** Jobs whose handler is running in this process, by id. */
  private readonly inFlight = new Map<string, AbortController>();
  /** Statements sent and not yet answered, awaited before the queue reports it has stopped. */
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    private readonly db: Db,
    private readonly settings: JobSettings,
    private readonly log: FastifyBaseLogger,
  ) {
    this.strict = { executeSql: (text, values) => this.execute(text, values) };
    this.boss = new PgBoss({
      db: { executeSql: (text, values) => this.executeBackground(text, values) },
      schema: JOBS_SCHEMA,
      // The schema is the migrations' (0009_jobs); pg-boss only checks its version.
      migrate: false,
      // The scheduler runs in processes that work queues (`start`): it sends the jobs of handlers' `schedule`.
      schedule: true,
      supervise: true,
      maintenanceIntervalSeconds: settings.maintenanceIntervalSeconds,
      pollingIntervalSeconds: settings.pollIntervalSeconds,
    });
    this.boss.on('error', (err: Error) => this.log.warn({ err: { message: err.message } }, 'job queue: background statement failed'));
  }

  /** Whether the queue is started and not stopping: the worker's readiness. */
  get started(): boolean {
    return this.state === 'started';
  }

  /** Jobs whose handler is running in this process. */
  get running(): number {
    return this.inFlight.size;
  }

  /** Checks the schema version, starts maintenance and lets `work` take queues. */
  async start(): Promise<void> {
    if (this.state !== 'idle') throw new Error(`the job queue is ${this.state}`);
    this.state = 'starting';
    try {
      await this.boss.start();
    } catch (err) {
      this.state = 'idle';
      throw new Error(`the job queue cannot start: ${(err as Error).message} (run tollgate migrate)`);
    }
    this.state = 'started';
  }

  /**
   * Enqueues a job and answers its id; null when the queue's policy found it a duplicate. With `tx`, the
   * job is written by the caller's open transaction and commits or rolls back with it.
   */
  async send(queue: string, data: object, opts: SendOptions = {}): Promise<string | null> {
    const db = opts.tx ? transactionExecutor(opts.tx) : this.strict;
    const id = await this.boss.send(queue, data, {
      db,
      expireInSeconds: opts.expireInSeconds ?? this.settings.timeoutSeconds,
      ...(opts.singletonKey !== undefined && { singletonKey: opts.singletonKey }),
      ...(opts.retryLimit !== undefined && { retryLimit: opts.retryLimit }),
      ...(opts.retryDelay !== undefined && { retryDelay: opts.retryDelay }),
    });
    if (id === null) {
      // pg-boss writes nothing, silently, for a queue that does not exist.
      const { rows } = await db.executeSql(`select 1 from ${JOBS_SCHEMA}.queue where name = $1`, [queue]);
      if (rows.length === 0) throw new Error(`no job queue "${queue}": queues are created by migrations`);
    }
    return id;
  }

  /** Runs handler for the jobs of queue, `concurrency` at a time, one job per fetch. */
  async work(queue: string, handler: (job: Job) => Promise<void>, opts: WorkOptions = {}): Promise<void> {
    if (this.state !== 'started') throw new Error('start the job queue before working a queue');
    const options = {
      batchSize: 1,
      includeMetadata: true as const,
      pollingIntervalSeconds: opts.pollingIntervalSeconds ?? this.settings.pollIntervalSeconds,
    };
    for (let i = 0; i < (opts.concurrency ?? this.settings.concurrency); i++) {
      await this.boss.work<unknown>(queue, options, (jobs) => this.runAll(queue, jobs, handler));
    }
  }

  /** Works each handler's queue, and its dead-letter queue when it has a dead-letter handler. */
  async serve(handlers: readonly JobHandler[], deps: Deps): Promise<void> {
    for (const h of handlers) {
      await this.work(h.queue, (job) => h.handler(job.data, this.context(job, deps)));
      // An upsert: every process that serves the queue states the same schedule.
      if (h.schedule) await this.boss.schedule(h.queue, h.schedule, {}, { tz: 'UTC' });
      const deadLetter = h.deadLetter?.bind(h);
      if (deadLetter) {
        await this.work(deadLetterQueue(h.queue), (job) =>
          deadLetter(job.data, { ...this.context(job, deps), error: failureMessage(job.output) }),
        );
      }
    }
  }

  /**
   * Stops taking jobs. Graceful: waits up to timeoutMs for the jobs running here; those still running then
   * are handed back to the queue (failed, so retried) and their signals aborted. Answers how many were
   * handed back. A queue never started only waits for the statements it sent.
   */
  async stop(opts: { graceful?: boolean; timeoutMs?: number } = {}): Promise<{ unfinished: number }> {
    if (this.state !== 'started') {
      await this.settle();
      return { unfinished: 0 };
    }
    this.state = 'stopping';
    const graceful = opts.graceful ?? true;
    if (!graceful) this.abortRunning('the process is stopping without waiting for its jobs');
    await this.boss.stop({ graceful, timeout: Math.max(1000, opts.timeoutMs ?? 30_000), wait: true, close: false });
    const unfinished = this.inFlight.size;
    this.abortRunning('the process stopped before the job finished; the job went back to the queue');
    await this.settle();
    this.state = 'stopped';
    return { unfinished };
  }

  private context(job: Job, deps: Deps): JobContext {
    return {
      deps,
      jobId: job.id,
      retryCount: job.retryCount,
      signal: job.signal,
      log: this.log.child({ queue: job.queue, job_id: job.id }),
    };
  }

  private async runAll(queue: string, jobs: PgBoss.JobWithMetadata<unknown>[], handler: (job: Job) => Promise<void>): Promise<void> {
    for (const job of jobs) await this.runOne(queue, job, handler);
  }

  private async runOne(queue: string, job: PgBoss.JobWithMetadata<unknown>, handler: (job: Job) => Promise<void>): Promise<void> {
    const controller = new AbortController();
    // pg-boss fails the attempt at its expiry (and retries it); the handler hears it through the signal.
    const seconds = Number(job.expireInSeconds);
    const expiry = setTimeout(() => controller.abort(new Error(`the job ran past its ${seconds} seconds`)), seconds * 1000);
    this.inFlight.set(job.id, controller);
    const started = Date.now();
    const fields = { queue, job_id: job.id, retry_count: job.retryCount };
    try {
      await handler({ id: job.id, queue, data: job.data, retryCount: job.retryCount, signal: controller.signal, output: job.output });
      this.log.info({ ...fields, ms: Date.now() - started }, 'job finished');
    } catch (err) {
      this.log.warn({ ...fields, ms: Date.now() - started, err }, 'job failed');
      throw err;
    } finally {
      clearTimeout(expiry);
      this.inFlight.delete(job.id);
    }
  }

  private abortRunning(reason: string): void {
    for (const controller of this.inFlight.values()) controller.abort(new Error(reason));
  }

  private execute(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> {
    const statement = executeSqlText(this.db, text, values);
    this.pending.add(statement);
    const forget = () => this.pending.delete(statement);
    statement.then(forget, forget);
    return statement;
  }

  /**
   * What pg-boss runs by itself: the schema check at start, then polling, maintenance, and recording a
   * job's completion or failure. pg-boss does not await the last two (an error there would be an unhandled
   * rejection, which ends the process), so once started a failure is logged and answered with nothing:
   * the job stays active and is retried after its expiry.
   */
  private executeBackground(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> {
    const statement = this.execute(text, values);
    if (this.state !== 'started' && this.state !== 'stopping') return statement;
    return statement.catch((err: Error) => {
      this.log.warn({ err: { message: err.message } }, 'job queue: statement failed; the job is retried after its expiry');
      return undefined as unknown as { rows: unknown[] };
    });
  }

  private async settle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}

/** pg-boss over the caller's open transaction (its `db` option): the job is one more statement of it. */
function transactionExecutor(tx: Tx): Executor {
  return {
    async executeSql(text, values) {
      const result = await tx.executeQuery(CompiledQuery.raw(text, values ?? []));
      return { rows: result.rows as unknown[] };
    },
  };
}

/** The message of a failed attempt as pg-boss recorded it (a thrown error, an expiry, a shutdown). */
export function failureMessage(output: unknown): string {
  if (output && typeof output === 'object') {
    const o = output as { message?: unknown; value?: unknown };
    if (typeof o.message === 'string') return o.message;
    if (typeof o.value === 'string') return o.value;
    if (o.value && typeof o.value === 'object' && typeof (o.value as { message?: unknown }).message === 'string') {
      return (o.value as { message: string }).message;
    }
  }
  return 'the job failed';
}
