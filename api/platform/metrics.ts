import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The API's Prometheus metrics (docs/metrics.md). One registry per app, not prom-client's global one:
 * tests build many apps in one process, and each must count only its own requests. Counting is in
 * memory on label children bound once here, so the decision path pays a map lookup and an addition.
 * No label carries an organisation, an agent or any other caller-chosen value: every label value comes
 * from a closed list below, so the number of series is bounded whatever the callers send.
 */

export const DECISIONS = ['allow', 'deny', 'require_approval'] as const;
export type DecisionOutcome = (typeof DECISIONS)[number];

/**
 * The reason codes the decision engine gives of itself (docs/gateway.md). A published rule's own
 * `reason_code` is chosen by its organisation's authors, so it counts as `other`: it could name the
 * organisation, and a free-form label would let policy authors grow the series without bound.
 * test/api/metrics.test.ts checks this list against the codes the engine's sources name.
 */
export const ENGINE_REASON_CODES = [
  'PERMISSION_GRANTED',
  'APPROVAL_GRANTED',
  'PERMISSION_NOT_GRANTED',
  'PERMISSION_CONSTRAINT_EXCEEDED',
  'TOOL_DEFINITION_CHANGED',
  'TOOL_APPROVAL_REQUIRED',
  'TOOL_BLOCKED',
  'UNKNOWN_TOOL',
  'UNTRUSTED_MCP_PRIVILEGED_TOOL',
  'PRIVILEGE_CLASS_DENIED',
  'SECRET_DETECTED',
  'DELEGATION_MISSING',
  'AGENT_SUSPENDED',
  'AGENT_REVOKED',
  'GATEWAY_ACCESS_DISABLED',
  'POLICY_UNAVAILABLE',
] as const;
export const OTHER_REASON = 'other';

export const TOKEN_EXCHANGE_OUTCOMES = ['issued', 'unknown_client', 'wrong_secret', 'identity_revoked', 'agent_suspended', 'agent_revoked'] as const;
export type TokenExchangeOutcome = (typeof TOKEN_EXCHANGE_OUTCOMES)[number];

/** The per-minute limits, by the setting that sets each (RATE_LIMIT_*_PER_MINUTE). */
export const RATE_LIMITS = ['person', 'sign_in', 'public', 'gateway', 'token', 'token_ip'] as const;
export type RateLimitName = (typeof RATE_LIMITS)[number];

/** Decision latency: from 1 ms (a decision on a warm snapshot) to 2.5 s (a batch stuck behind a slow commit). */
export const DECISION_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Powers of two up to the group commit's largest batch (MAX_BATCH, 128). */
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128];
/** Powers of two up to the most organisations' batches one transaction carries (MAX_SHARED_PARTS, 16). */
export const TRANSACTION_BATCHES_BUCKETS = [1, 2, 4, 8, 16];

/** What the gateway's submission path counts. */
export interface DecisionMetrics {
  /** A decision made (not a replay): its outcome, reason codes and latency as `action_requests.decision_ms` records it. */
  decided(decision: string, reasonCodes: readonly string[], seconds: number): void;
  /** The size of one group-commit batch. */
  batch(size: number): void;
  /** How many organisations' batches one transaction carried (D36): 1 for a batch alone. */
  transaction(batches: number): void;
}

/** What the token exchange counts. */
export interface TokenExchangeMetrics {
  tokenExchange(outcome: TokenExchangeOutcome): void;
}

/** What the rate limiter counts. */
export interface RateLimitMetrics {
  rateLimitRefused(limit: RateLimitName): void;
}

/** What /metrics reads of a pg Pool (pg.Pool is one). */
export interface PoolGauges {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
  readonly options: { readonly max?: number };
}

interface Child {
  inc(): void;
}
interface Observer {
  observe(value: number): void;
}

export class ApiMetrics implements DecisionMetrics, TokenExchangeMetrics, RateLimitMetrics {
  readonly registry = new Registry();
  private readonly decisions: Record<string, Child>;
  private readonly reasons: Record<string, Map<string, Child>>;
  private readonly latency: Record<string, Observer>;
  private readonly batchSize: Histogram;
  private readonly transactionBatches: Histogram;
  private readonly exchanges: Record<string, Child>;
  private readonly refusals: Record<string, Child>;
  private processMetrics = false;

  /** `pool`: the pg Pool behind the app's database, read on each scrape; none on the embedded database. */
  constructor(opts: { pool?: PoolGauges } = {}) {
    const registers = [this.registry];
    const decisions = new Counter({
      name: 'tollgate_decisions_total',
      help: 'Gateway decisions made (replays excluded), by outcome.',
      labelNames: ['decision'],
      registers,
    });
    const reasons = new Counter({
      name: 'tollgate_decision_reasons_total',
      help: "Reason codes given with gateway decisions, by outcome; a policy rule's own code counts as other.",
      labelNames: ['decision', 'reason_code'],
      registers,
    });
    const latency = new Histogram({
      name: 'tollgate_decision_duration_seconds',
      help: 'Latency of a gateway decision from arrival to decided, as action_requests.decision_ms records it.',
      labelNames: ['decision'],
      buckets: DECISION_SECONDS_BUCKETS,
      registers,
    });
    this.batchSize = new Histogram({
      name: 'tollgate_decision_batch_size',
      help: 'Submissions written by one group-commit transaction of an organisation.',
      buckets: BATCH_SIZE_BUCKETS,
      registers,
    });
    this.transactionBatches = new Histogram({
      name: 'tollgate_decision_transaction_batches',
      help: "Organisations' group-commit batches written by one transaction (1 for a batch alone).",
      buckets: TRANSACTION_BATCHES_BUCKETS,
      registers,
    });
    const exchanges = new Counter({
      name: 'tollgate_token_exchanges_total',
      help: 'Client-credential exchanges for agent tokens, by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    const refusals = new Counter({
      name: 'tollgate_rate_limit_refusals_total',
      help: 'Requests refused with 429 rate_limited, by the limit that refused them.',
      labelNames: ['limit'],
      registers,
    });

    // Every series of a closed list starts at 0, so rate() and increase() see its first increment.
    this.decisions = Object.fromEntries(DECISIONS.map((d) => [d, decisions.labels(d)]));
    for (const d of DECISIONS) decisions.labels(d).inc(0);
    this.latency = Object.fromEntries(DECISIONS.map((d) => [d, latency.labels(d)]));
    const codes = [...ENGINE_REASON_CODES, OTHER_REASON];
    this.reasons = Object.fromEntries(DECISIONS.map((d) => [d, new Map(codes.map((c) => [c, reasons.labels(d, c)]))]));
    this.exchanges = Object.fromEntries(TOKEN_EXCHANGE_OUTCOMES.map((o) => [o, exchanges.labels(o)]));
    for (const o of TOKEN_EXCHANGE_OUTCOMES) exchanges.labels(o).inc(0);
    this.refusals = Object.fromEntries(RATE_LIMITS.map((l) => [l, refusals.labels(l)]));
    for (const l of RATE_LIMITS) refusals.labels(l).inc(0);

    const pool = opts.pool;
    if (pool) {
      new Gauge({
        name: 'tollgate_db_pool_connections',
        help: 'Connections of the database pool: open (total), idle, and requests waiting for one.',
        labelNames: ['state'],
        registers,
        collect() {
          this.set({ state: 'total' }, pool.totalCount);
          this.set({ state: 'idle' }, pool.idleCount);
          this.set({ state: 'waiting' }, pool.waitingCount);
        },
      });
      new Gauge({
        name: 'tollgate_db_pool_max',
        help: 'The most connections the database pool opens (DATABASE_POOL_MAX).',
        registers,
        collect() {
          this.set(pool.options.max ?? 10);
        },
      });
    }
  }

  decided(decision: string, reasonCodes: readonly string[], seconds: number): void {
    const counter = this.decisions[decision];
    // The engine gives only the three outcomes; anything else is a bug upstream, not a new series.
    if (!counter) return;
    counter.inc();
    this.latency[decision]!.observe(seconds);
    const byCode = this.reasons[decision]!;
    for (const code of reasonCodes) (byCode.get(code) ?? byCode.get(OTHER_REASON)!).inc();
  }

  batch(size: number): void {
    this.batchSize.observe(size);
  }

  transaction(batches: number): void {
    this.transactionBatches.observe(batches);
  }

  tokenExchange(outcome: TokenExchangeOutcome): void {
    this.exchanges[outcome]?.inc();
  }

  rateLimitRefused(limit: RateLimitName): void {
    this.refusals[limit]?.inc();
  }

  /**
   * prom-client's process metrics (CPU, memory, event loop lag, GC, handles). Only the process that
   * serves (`tollgate api`) adds them: they install an event-loop monitor and a GC observer that
   * cannot be removed, which apps built and closed by the hundred in tests must not leave behind.
   */
  collectProcessMetrics(): void {
    if (this.processMetrics) return;
    this.processMetrics = true;
    collectDefaultMetrics({ register: this.registry });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The text exposition format, pool gauges read now. */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }
}
