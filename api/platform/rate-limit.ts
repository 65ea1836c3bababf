import type { FastifyRequest } from 'fastify';
import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock, RateGroup } from './context.js';

type Incr = (err: Error | null, res: { current: number; ttl: number }) => void;

/**
 * A @fastify/rate-limit store on the shared database, so the limits hold across every API process:
 * fixed windows aligned on the clock, one upsert per request.
 */
export function databaseRateLimitStore(db: Db, clock: Clock) {
  let calls = 0;
  return class DatabaseStore {
    incr(key: string, cb: Incr, timeWindow: number): void {
      const now = clock.now().getTime();
      const windowStart = Math.floor(now / timeWindow) * timeWindow;
      sql<{ count: number }>`
        insert into rate_limit_buckets as b (key, window_start, count) values (${key}, ${windowStart}, 1)
        on conflict (key) do update set
          count = case when b.window_start = excluded.window_start then b.count + 1 else 1 end,
          window_start = excluded.window_start
        returning count`
        .execute(db)
        .then(async (r) => {
          cb(null, { current: r.rows[0]?.count ?? 1, ttl: windowStart + timeWindow - now });
          // Sweep finished windows now and then, rather than on a timer.
          if (++calls % 1000 === 0) {
            await db.deleteFrom('rate_limit_buckets').where('window_start', '<', now - 2 * timeWindow).execute();
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
