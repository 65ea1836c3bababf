import type { FastifyRequest } from 'fastify';
import { sql, type RawBuilder } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { RateGroup } from './context.js';
import { ApiError } from './errors.js';
import type { RateLimitMetrics, RateLimitName } from './metrics.js';

type Incr = (err: Error | null, res: { current: number; ttl: number }) => void;

/** The window of the per-minute limits. */
export const RATE_WINDOW_MS = 60_000;

/** The start of the fixed window, aligned on the clock, that `now` (ms) falls in. */
export const windowStartOf = (now: number, timeWindow: number) => Math.floor(now / timeWindow) * timeWindow;

/** Hits of one key in one window, counted together. */
export interface Bucket {
  key: string;
  windowStart: number;
  count: number;
}

/**
 * The statement that counts hits: one row per key, in sorted key order (so two transactions never lock
 * the same rows in opposite orders); a row whose window has passed starts again. Returns each key's
 * count in its window. The hit counter runs it alone; the gateway runs it inside its batch's first
 * statement (as a CTE), so submissions are counted in the same round trip.
 */
export function countHits(buckets: Bucket[]): RawBuilder<{ key: string; count: number }> {
  const sorted = [...buckets].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return sql<{ key: string; count: number }>`
      insert into rate_limit_buckets as b (key, window_start, count)
        select * from unnest(${sorted.map((b) => b.key)}::text[], ${sorted.map((b) => b.windowStart)}::bigint[], ${sorted.map((b) => b.count)}::int[])
      on conflict (key) do update set
        count = case when b.window_start = excluded.window_start then b.count + excluded.count else excluded.count end,
        window_start = excluded.window_start
      returning key, count`;
}

/** The count each of a key's `n` hits reached, in arrival order: they took the last n counts up to its total. */
export function arrivalCounts(total: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => total - n + 1 + i);
}

interface Hit {
  key: string;
  windowStart: number;
  resolve: (count: number) => void;
  reject: (err: Error) => void;
}

/**
 * Counts hits in fixed windows aligned on the clock, on the shared database, so a limit holds across
 * every API process. Hits that arrive while a count is in flight wait and go together in the next
 * statement, one row per key (keys in sorted order, so two processes never lock the same rows in
 * opposite orders): under load a process writes one statement per round trip, not one per request.
 */
export class HitCounter {
  private pending: Hit[] = [];
  private flushing = false;
  private calls = 0;
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly metrics?: RateLimitMetrics,
  ) {}

  /** Counts a refusal of the limit that `key` (a rate key of this file) is counted against, for /metrics. */
  refused(key: string): void {
    this.metrics?.rateLimitRefused(limitOfKey(key));
  }

  /** Counts one hit of `key`; says how many hits its window holds and how long the window has left. */
  async hit(key: string, timeWindow: number): Promise<{ current: number; ttl: number }> {
    const now = this.clock.now().getTime();
    const windowStart = windowStartOf(now, timeWindow);
    const current = await new Promise<number>((resolve, reject) => {
      this.pending.push({ key, windowStart, resolve, reject });
      if (!this.flushing) void this.flush();
    });
    if (++this.calls % 1000 === 0) {
      // Sweep finished windows now and then, rather than on a timer.
      await this.db.deleteFrom('rate_limit_buckets').where('window_start', '<', now - 2 * timeWindow).execute();
    }
    return { current, ttl: windowStart + timeWindow - now };
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.pending.length > 0) {
        const hits = this.pending;
        this.pending = [];
        await this.count(hits).catch((err: Error) => hits.forEach((h) => h.reject(err)));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async count(hits: Hit[]): Promise<void> {
    const byKey = new Map<string, Hit[]>();
    for (const h of hits) {
      const list = byKey.get(h.key);
      if (list) list.push(h);
      else byKey.set(h.key, [h]);
    }
    // A key's hits of one flush share its window: the latest, unless a hit saw the previous one.
    const buckets = [...byKey].map(([key, list]) => ({ key, windowStart: Math.max(...list.map((h) => h.windowStart)), count: list.length }));
    const { rows } = await countHits(buckets).execute(this.db);
    const totals = new Map(rows.map((r) => [r.key, r.count]));
    for (const [key, list] of byKey) {
      const counts = arrivalCounts(totals.get(key) ?? list.length, list.length);
      list.forEach((h, i) => h.resolve(counts[i]!));
    }
  }
}

/** 429 rate_limited with Retry-After: the time left in the window. */
export function rateLimited(max: number, ttlMs: number): ApiError {
  const seconds = Math.max(1, Math.ceil(ttlMs / 1000));
  return new ApiError(
    'rate_limited',
    `Too many requests: at most ${max} a minute. Retry in ${seconds} s.`,
    { retry_after_seconds: seconds, limit_per_minute: max },
    { 'retry-after': String(seconds) },
  );
}

/** Refuses with 429 rate_limited (and Retry-After) once `key` has had more than `max` hits this minute. */
export async function enforceLimit(counter: HitCounter, key: string, max: number): Promise<void> {
  const { current, ttl } = await counter.hit(key, RATE_WINDOW_MS);
  if (current > max) {
    counter.refused(key);
    throw rateLimited(max, ttl);
  }
}

/** The rate keys' prefixes (rateKey, agentRateKey, the token endpoints' per-address key) by the limit each counts against. */
const LIMIT_OF_PREFIX = new Map<string, RateLimitName>([
  ['person', 'person'],
  ['signin', 'sign_in'],
  ['public', 'public'],
  ['agent', 'gateway'],
  ['gateway', 'gateway'],
  ['token', 'token'],
  ['token-ip', 'token_ip'],
]);

/**
 * The limit a rate key counts against: a bounded name for /metrics, never the key (which names a person, an
 * agent or an address). Any other prefix falls under the person limit, as rateMax's default does.
 */
export function limitOfKey(key: string): RateLimitName {
  return LIMIT_OF_PREFIX.get(key.slice(0, key.indexOf(':'))) ?? 'person';
}

/** An agent's gateway budget, shared by every gateway operation. */
export const agentRateKey = (agentId: string) => `agent:${agentId}`;

/** A @fastify/rate-limit store on the shared hit counter. */
export function databaseRateLimitStore(counter: HitCounter) {
  return class DatabaseStore {
    incr(key: string, cb: Incr, timeWindow: number): void {
      counter.hit(key, timeWindow).then(
        (r) => cb(null, r),
        (err: Error) => cb(err, { current: 0, ttl: 0 }),
      );
    }
    child() {
      return new DatabaseStore();
    }
  };
}

export function rateGroupOf(req: FastifyRequest): RateGroup {
  const config = req.routeOptions.config;
  if (config.rateGroup) return config.rateGroup;
  if (config.caller === 'agent') return 'gateway';
  return config.caller === 'public' ? 'public' : 'person';
}

/** Persons per person, agents per agent, token exchange per client, sign-in and public per address. */
export function rateKey(req: FastifyRequest): string {
  const group = rateGroupOf(req);
  const p = req.principal;
  if (group === 'person' && p && p.kind !== 'agent') return `person:${p.userId}`;
  if (group === 'gateway' && p?.kind === 'agent') return agentRateKey(p.agentId);
  if (group === 'token') {
    // Token exchange is limited per client; the body is parsed but not yet validated here.
    const clientId = (req.body as { client_id?: unknown } | undefined)?.client_id;
    return `token:${typeof clientId === 'string' ? clientId.slice(0, 80) : req.ip}`;
  }
  return `${group}:${req.ip}`;
}

export function rateMax(config: Config, req: FastifyRequest): number {
  switch (rateGroupOf(req)) {
    case 'signin':
      return config.rateLimits.signInPerMinute;
    case 'public':
      return config.rateLimits.publicPerMinute;
    case 'gateway':
    case 'gateway_submission':
      return config.rateLimits.gatewayPerMinute;
    case 'token':
      return config.rateLimits.tokenPerMinute;
    default:
      return config.rateLimits.personPerMinute;
  }
}
