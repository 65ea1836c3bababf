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
 * count in its window. The hit counter runs it alone; the gateway sends it ahead of its batch's
 * transaction in the round trip of the batch's `begin`, committing on its own (D36).
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

/** A key's hits of one window as this process claims them from the shared count (PositionClaims). */
interface Claim {
  windowStart: number;
  /** The limit the key's hits were last held to. */
  max: number;
  /** The highest count of the window this process has read from the shared table. */
  known: number;
  /** Positions in the window's count this process claimed and has not given to a hit yet: [from, to]. */
  free: Array<[number, number]>;
  freeCount: number;
  /** Hits waiting for the next claim, in arrival order. */
  waiting: Hit[];
  /** Hits refused here without a round trip (the window was known to be full), still to be counted. */
  uncounted: number;
  /** Hits since the last claim was sent: the load the next claim prefetches for. */
  sinceClaim: number;
  /** Hits that had to wait while a claim was in flight since the last claim: the sign of load. */
  queuedBehind: number;
  /** Positions the last claim took ahead; a refill is sent when fewer than half are left. */
  lastPrefetch: number;
}

/**
 * A person's hits counted without a round trip per request, and never more than the limit across
 * processes (docs/decisions.md, D9). Every hit takes a position in the window's shared count, and is
 * admitted when its position is within the limit. Positions are claimed from the shared table by one
 * statement for every key of a flush (the one HitCounter.hit sends), so no two processes ever hand out
 * the same position. A key without load claims one position per hit, exactly as HitCounter.hit does.
 * A key under load (hits queued behind a claim in flight) claims ahead: twice its hits since the last
 * claim, at most an eighth of what is left of the window, and again when half of those are used; most
 * hits then find a free position here and wait for nothing. What that costs: positions claimed and
 * never used count as hits, so a person can be refused early, by less than 3/16 of the limit per
 * process (a refill goes out with under half of the last claim-ahead left, and a claim-ahead is at most
 * an eighth). Once this process has read a full window, a hit is refused at once (every later position
 * is beyond the limit) and counted in the next claim.
 */
class PositionClaims {
  private readonly claims = new Map<string, Claim>();
  /** A claim is gathering hits or waiting for its statement. */
  private inFlight = false;
  /** Its statement is sent: hits arriving now queue behind it. */
  private sent = false;
  private calls = 0;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  hit(key: string, timeWindow: number, max: number): { current: number; ttl: number } | Promise<{ current: number; ttl: number }> {
    const now = this.clock.now().getTime();
    const windowStart = windowStartOf(now, timeWindow);
    const ttl = windowStart + timeWindow - now;
    if (++this.calls % 1000 === 0) this.sweep(now, timeWindow);
    let c = this.claims.get(key);
    if (!c || c.windowStart !== windowStart) {
      // A finished window's leftover positions are no use to the next one. Hits still waiting for a claim
      // of it are counted in the new window: at a window's end, at most one round trip's hits move on.
      if (this.claims.size >= MAX_CLAIMED_KEYS) this.dropIdle();
      const waiting = c?.waiting ?? [];
      c = { windowStart, max, known: 0, free: [], freeCount: 0, waiting, uncounted: c?.uncounted ?? 0, sinceClaim: 0, queuedBehind: 0, lastPrefetch: 0 };
      this.claims.set(key, c);
    }
    c.max = max;
    c.sinceClaim++;
    if (c.freeCount === 0 && c.known >= max) {
      c.uncounted++;
      this.schedule();
      return { current: c.known + 1, ttl };
    }
    const range = c.free[0];
    if (range) {
      const position = range[0]++;
      if (range[0] > range[1]) c.free.shift();
      c.freeCount--;
      if (c.freeCount * 2 < c.lastPrefetch) this.schedule();
      return { current: position, ttl };
    }
    return new Promise((resolve, reject) => {
      if (this.sent) c.queuedBehind++;
      c.waiting.push({ key, windowStart, resolve: (current) => resolve({ current, ttl }), reject });
      this.schedule();
    });
  }

  private needsClaim(c: Claim): boolean {
    return c.waiting.length > 0 || c.uncounted > 0 || (c.sinceClaim > 0 && c.freeCount * 2 < c.lastPrefetch);
  }

  /** One claim in flight at a time: hits that arrive meanwhile go together in the next. */
  private schedule(): void {
    if (this.inFlight) return;
    this.inFlight = true;
    void this.flush().finally(() => {
      this.inFlight = false;
      this.sent = false;
      for (const c of this.claims.values()) {
        if (this.needsClaim(c)) return this.schedule();
      }
    });
  }

  private async flush(): Promise<void> {
    // Let the hits of this turn of the event loop join the claim.
    await new Promise<void>((r) => setImmediate(r));
    const batch: Array<{ key: string; c: Claim; waiting: Hit[]; prefetch: number; uncounted: number }> = [];
    for (const [key, c] of this.claims) {
      if (!this.needsClaim(c)) continue;
      const waiting = c.waiting;
      // Ahead only under load (hits queued behind a claim, or served from the last prefetch), and at most
      // an eighth of what is left of the window: other processes may need the rest.
      const loaded = c.queuedBehind > 0 || c.lastPrefetch > 0;
      const room = Math.max(0, c.max - c.known - c.freeCount - waiting.length);
      const prefetch = loaded && c.sinceClaim > 1 ? Math.min(2 * c.sinceClaim, Math.floor(room / 8), MAX_PREFETCH) : 0;
      batch.push({ key, c, waiting, prefetch, uncounted: c.uncounted });
      c.waiting = [];
      c.uncounted = 0;
      c.sinceClaim = 0;
      c.queuedBehind = 0;
      c.lastPrefetch = prefetch;
    }
    const counted = batch.filter((b) => b.waiting.length + b.prefetch + b.uncounted > 0);
    if (counted.length === 0) return;
    this.sent = true;
    try {
      const { rows } = await countHits(
        counted.map((b) => ({ key: b.key, windowStart: b.c.windowStart, count: b.waiting.length + b.prefetch + b.uncounted })),
      ).execute(this.db);
      const totals = new Map(rows.map((r) => [r.key, r.count]));
      for (const b of counted) {
        const n = b.waiting.length + b.prefetch + b.uncounted;
        const total = totals.get(b.key) ?? n;
        // The claim's positions, in order: the waiting hits', the ones taken ahead, the refusals'.
        const first = total - n + 1;
        b.waiting.forEach((h, i) => h.resolve(first + i));
        b.c.known = Math.max(b.c.known, total);
        if (b.prefetch > 0 && this.claims.get(b.key) === b.c) {
          const from = first + b.waiting.length;
          b.c.free.push([from, from + b.prefetch - 1]);
          b.c.freeCount += b.prefetch;
        }
      }
    } catch (err) {
      for (const b of counted) b.waiting.forEach((h) => h.reject(err as Error));
    }
  }

  /** Forgets keys with nothing waiting, so a process serving many people keeps a bounded map. */
  private dropIdle(): void {
    for (const [key, c] of this.claims) if (!this.needsClaim(c)) this.claims.delete(key);
  }

  /** Sweeps finished windows now and then, rather than on a timer. */
  private sweep(now: number, timeWindow: number): void {
    void this.db
      .deleteFrom('rate_limit_buckets')
      .where('window_start', '<', now - 2 * timeWindow)
      .execute()
      .catch(() => undefined);
  }
}

/** The most positions a key claims ahead at once: bounds what an idle person can be over-counted by. */
const MAX_PREFETCH = 256;

/** How many keys a process keeps claims for before it forgets the idle ones. */
const MAX_CLAIMED_KEYS = 10_000;

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
  private readonly claims: PositionClaims;
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly metrics?: RateLimitMetrics,
  ) {
    this.claims = new PositionClaims(db, clock);
  }

  /**
   * Counts one hit of `key` against `max` as exactly as hit() (no two hits anywhere share a position in
   * the window's count), but from positions this process claimed ahead under load, so most hits wait for
   * no round trip. For the people's limit; positions claimed and not used count as hits (PositionClaims).
   */
  claim(key: string, timeWindow: number, max: number): { current: number; ttl: number } | Promise<{ current: number; ttl: number }> {
    return this.claims.hit(key, timeWindow, max);
  }

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

/**
 * A @fastify/rate-limit store on the shared hit counter. A person's (or service account's) hits take
 * positions claimed ahead (HitCounter.claim); every other limit (sign-in, public, token exchange, an
 * agent's gateway budget) counts each hit in the shared table before it answers (HitCounter.hit).
 */
export function databaseRateLimitStore(counter: HitCounter) {
  return class DatabaseStore {
    incr(key: string, cb: Incr, timeWindow: number, max: number): void {
      if (key.startsWith(PERSON_KEY_PREFIX) && Number.isFinite(max)) {
        const r = counter.claim(key, timeWindow, max);
        if (!(r instanceof Promise)) return cb(null, r);
        r.then(
          (res) => cb(null, res),
          (err: Error) => cb(err, { current: 0, ttl: 0 }),
        );
        return;
      }
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

const PERSON_KEY_PREFIX = 'person:';

/** Persons per person, agents per agent, token exchange per client, sign-in and public per address. */
export function rateKey(req: FastifyRequest): string {
  const group = rateGroupOf(req);
  const p = req.principal;
  if (group === 'person' && p && p.kind !== 'agent') return `${PERSON_KEY_PREFIX}${p.userId}`;
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
