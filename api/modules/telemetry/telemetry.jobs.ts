import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../lib/clock.js';
import type { Db } from '../../db/database.js';
import { TELEMETRY_RETENTION_QUEUE } from '../../db/migrations/0012_telemetry.js';
import type { JobHandler } from '../../platform/jobs.js';
import { purgeTelemetry } from './telemetry.repository.js';

const DAY_MS = 86_400_000;

/** How the sweep paces itself (docs/telemetry.md, Retention). */
export interface RetentionPace {
  /** Events one statement deletes at most: a short statement, a short lock on few rows. */
  batch: number;
  /** Pause between two batches, so that other statements (the gateway's, on the embedded database its one connection) go first. */
  pauseMs: number;
  /** A sweep stops after this long; the next one (10 minutes later) carries on. */
  budgetMs: number;
}

export const RETENTION_PACE: RetentionPace = { batch: 1000, pauseMs: 20, budgetMs: 120_000 };

/** When the sweep runs (pg-boss schedule, UTC): every 10 minutes. */
export const RETENTION_SCHEDULE = '*/10 * * * *';

/**
 * Deletes the telemetry events older than `retentionDays` (by the app's clock), every organisation's,
 * in batches, the oldest first, until none is left, the budget is spent or `signal` aborts. Idempotent:
 * a sweep run twice deletes nothing more the second time. Answers how many it deleted.
 */
export async function sweepTelemetry(
  deps: { db: Db; clock: Clock; retentionDays: number; log?: FastifyBaseLogger; signal?: AbortSignal },
  pace: RetentionPace = RETENTION_PACE,
): Promise<{ deleted: number; before: Date; complete: boolean }> {
  const before = new Date(deps.clock.now().getTime() - deps.retentionDays * DAY_MS);
  const started = Date.now();
  let deleted = 0;
  for (;;) {
    const n = await purgeTelemetry(deps.db, before, pace.batch);
    deleted += n;
    if (n < pace.batch) {
      deps.log?.info({ deleted, before: before.toISOString() }, 'telemetry retention sweep finished');
      return { deleted, before, complete: true };
    }
    if (deps.signal?.aborted || Date.now() - started >= pace.budgetMs) break;
    await sleep(pace.pauseMs);
  }
  deps.log?.info({ deleted, before: before.toISOString() }, 'telemetry retention sweep stopped at its budget; the next one carries on');
  return { deleted, before, complete: false };
}

/** The retention queue's handler, as api/jobs.ts lists it: run every 10 minutes by the queue's schedule. */
export const telemetryRetentionJob: JobHandler = {
  queue: TELEMETRY_RETENTION_QUEUE,
  schedule: RETENTION_SCHEDULE,
  handler: async (_data, ctx) => {
    const { db, clock, config } = ctx.deps;
    await sweepTelemetry({ db, clock, retentionDays: config.telemetryRetentionDays, log: ctx.log, signal: ctx.signal });
  },
};
