import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock, RateGroup } from './context.js';
import { ApiError } from './errors.js';

type Incr = (err: Error | null, res: { current: number; ttl: number }) => void;

/**
 * A @fastify/rate-limit store on the shared database, so the limits hold across every API process:
 * fixed windows aligned on the clock, one upsert per request.
 */
/**
 * Counts one hit of `key` in the current fixed window (aligned on the clock, shared by every API process
 * through the database) and says how many hits the window holds and how long it has left.
 */
export async function countHit(db: Db, clock: Clock, key: string, timeWindow: number): Promise<{ current: number; ttl: number }> {
  const now = clock.now().getTime();
  const windowStart = Math.floor(now / timeWindow) * timeWindow;
  const r = await sql<{ count: number }>`
    insert into rate_limit_buckets as b (key, window_start, count) values (${key}, ${windowStart}, 1)
    on conflict (key) do update set
      count = case when b.window_start = excluded.window_start then b.count + 1 else 1 end,
      window_start = excluded.window_start
    returning count`.execute(db);
  return { current: r.rows[0]?.count ?? 1, ttl: windowStart + timeWindow - now };
}

/** Refuses with 429 rate_limited (and Retry-After) once `key` has had more than `max` hits this minute. */
export async function enforceLimit(db: Db, clock: Clock, key: string, max: number): Promise<void> {
  const { current, ttl } = await countHit(db, clock, key, 60_000);
  if (current > max) {
    const seconds = Math.max(1, Math.ceil(ttl / 1000));
    throw new ApiError('rate_limited', `Too many requests: at most ${max} a minute. Retry in ${seconds} s.`, {
      retry_after_seconds: seconds,
      limit_per_minute: max,
    }, { 'retry-after': String(seconds) });
  }
}

/** A @fastify/rate-limit store on the shared database, so the limits hold across every API process. */
export function databaseRateLimitStore(db: Db, clock: Clock) {
  let calls = 0;
  return class DatabaseStore {
    incr(key: string, cb: Incr, timeWindow: number): void {
      countHit(db, clock, key, timeWindow)
        .then(async (r) => {
          cb(null, r);
          // Sweep finished windows now and then, rather than on a timer.
          if (++calls % 1000 === 0) {
            const before = clock.now().getTime() - 2 * timeWindow;
            await db.deleteFrom('rate_limit_buckets').where('window_start', '<', before).execute();
          }
        })
        .catch((err: Error) => cb(err, { current: 0, ttl: 0 }));
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
  if (group === 'gateway' && p?.kind === 'agent') return `agent:${p.agentId}`;
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
      return config.rateLimits.gatewayPerMinute;
    case 'token':
      return config.rateLimits.tokenPerMinute;
    default:
      return config.rateLimits.personPerMinute;
  }
}
