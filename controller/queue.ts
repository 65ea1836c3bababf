import { systemClock, type Clock, type Timers } from '../lib/clock.js';
import { backoff } from './kube.js';

/** What a WorkQueue reports as it goes (client-go's workqueue MetricsProvider); controller/metrics.ts makes one. */
export interface QueueMetrics {
  added(): void;
  /** A key handed to a worker after waiting this long in the queue. */
  queued(seconds: number): void;
  /** A key done after being worked on this long. */
  worked(seconds: number): void;
  retried(): void;
}

/** What a reconcile asks of the queue: nothing (done), or to look again after a delay. */
export interface ReconcileResult {
  requeueAfterMs?: number;
}
export type Reconcile = (key: string) => Promise<ReconcileResult | void>;

export interface WorkQueueOptions {
  /** Delay before the first retry of a failing key; doubles with each further failure. Default 100 ms. */
  baseDelayMs?: number;
  /** Cap of the retry delay. Default 5 minutes. */
  maxDelayMs?: number;
  clock?: Clock & Timers;
  /** Called when a reconcile throws (the key is then retried with backoff). */
  onError?: (key: string, err: unknown) => void;
  /** Told of adds, waits, work and retries (the workqueue_* metrics). */
  metrics?: QueueMetrics;
}

/**
 * A work queue keyed by `namespace/name`, with client-go's semantics: a key is queued at most once,
 * a key is never handed to two workers at once (one added while it is being processed is queued
 * again when `done`), failures back off per key, and delayed adds keep the earliest deadline.
 * Keys rather than objects are queued: a reconcile reads the current state, so many changes to
 * one object collapse into one pass.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys that need processing: queued, or added again while being processed. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; handle: unknown }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  private readonly idle: (() => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly clock: Clock & Timers;
  private readonly onError: (key: string, err: unknown) => void;
  private readonly metrics?: QueueMetrics;
  /** When each queued key was queued, and each key in flight taken (the clock's milliseconds). */
  private readonly queuedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();

  constructor(opts: WorkQueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? 5 * 60_000;
    this.clock = opts.clock ?? systemClock;
    this.onError = opts.onError ?? (() => {});
    this.metrics = opts.metrics;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.metrics?.added();
    this.dirty.add(key);
    if (this.processing.has(key)) return; // done() queues it again
    this.push(key);
  }

  /** Adds the key after `ms`; a key already waiting keeps the earlier of the two deadlines. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = this.clock.now().getTime() + ms;
    const pending = this.delayed.get(key);
    if (pending) {
      if (pending.at <= at) return;
      this.clock.clearTimeout(pending.handle);
    }
    const handle = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Adds the key after its backoff: 100 ms, 200 ms, 400 ms... for consecutive failures, up to the cap. */
  addRateLimited(key: string): void {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    this.metrics?.retried();
    this.addAfter(key, backoff(n, this.baseDelayMs, this.maxDelayMs));
  }

  /** Resets the key's backoff (after a successful reconcile). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Queued keys, not counting those in flight or waiting on a delay. */
  get length(): number {
    return this.queue.length;
  }

  /** The next key, marked in flight until `done(key)`; undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.take(key));
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    const started = this.startedAt.get(key);
    if (started !== undefined) this.metrics?.worked((this.now() - started) / 1000);
    this.startedAt.delete(key);
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.shuttingDown) this.push(key);
    if (this.processing.size === 0) for (const f of this.idle.splice(0)) f();
  }

  /**
   * Stops handing out keys (queued and delayed ones are dropped: the next leader relists anyway) and
   * resolves once every key in flight is done.
   */
  shutDown(): Promise<void> {
    this.shuttingDown = true;
    for (const { handle } of this.delayed.values()) this.clock.clearTimeout(handle);
    this.delayed.clear();
    this.queue.length = 0;
    this.queuedAt.clear();
    this.dirty.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** How long each key in flight has been worked on, in seconds (the unfinished-work metrics). */
  inFlightSeconds(): number[] {
    const now = this.now();
    return [...this.startedAt.values()].map((t) => (now - t) / 1000);
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /**
   * Runs `workers` loops that take a key, reconcile it and settle it as controller-runtime does: an
   * error retries with backoff, `requeueAfterMs` forgets the failures and comes back after that delay,
   * anything else forgets. Resolves when the queue is shut down and every worker has finished.
   */
  async run(workers: number, reconcile: Reconcile): Promise<void> {
    const worker = async () => {
      for (let key = await this.get(); key !== undefined; key = await this.get()) {
        try {
          const result = await reconcile(key);
          this.forget(key);
          if (result?.requeueAfterMs !== undefined && result.requeueAfterMs > 0) this.addAfter(key, result.requeueAfterMs);
        } catch (err) {
          this.onError(key, err);
          this.addRateLimited(key);
        } finally {
          this.done(key);
        }
      }
    };
    await Promise.all(Array.from({ length: workers }, worker));
  }

  private now(): number {
    return this.clock.now().getTime();
  }

  private push(key: string): void {
    this.queuedAt.set(key, this.now());
    const waiter = this.waiters.shift();
    if (waiter) waiter(this.take(key));
    else this.queue.push(key);
  }

  private take(key: string): string {
    const now = this.now();
    const queued = this.queuedAt.get(key);
    if (queued !== undefined) this.metrics?.queued((now - queued) / 1000);
    this.queuedAt.delete(key);
    this.startedAt.set(key, now);
    this.processing.add(key);
    this.dirty.delete(key);
    return key;
  }
}
