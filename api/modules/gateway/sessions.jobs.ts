import { sql } from 'kysely';
import type { Clock } from '../../../lib/clock.js';
import type { Db } from '../../db/database.js';
import { SESSION_RETENTION_QUEUE } from '../../db/migrations/0021_flow_and_replay.js';
import type { JobHandler } from '../../platform/jobs.js';

/** A session's facts are deleted once it has seen no allowed call for this long (docs/policies.md, Flow rules). */
export const SESSION_IDLE_DAYS = 7;

const DAY_MS = 86_400_000;
const BATCH = 1000;

/**
 * Deletes every organisation's sessions idle for SESSION_IDLE_DAYS (by the app's clock), a batch per
 * statement, until none is left or `signal` aborts; answers how many it deleted.
 */
export async function sweepSessions(deps: { db: Db; clock: Clock; signal?: AbortSignal }, batch = BATCH): Promise<number> {
  const before = new Date(deps.clock.now().getTime() - SESSION_IDLE_DAYS * DAY_MS);
  let deleted = 0;
  for (;;) {
    const { rows } = await sql<{ deleted: number }>`select purge_agent_sessions(${before}, ${batch}) as deleted`.execute(deps.db);
    const n = Number(rows[0]?.deleted ?? 0);
    deleted += n;
    if (n < batch || deps.signal?.aborted) return deleted;
  }
}

/** The sweep's handler, as api/jobs.ts lists it: hourly. */
export const sessionRetentionJob: JobHandler = {
  queue: SESSION_RETENTION_QUEUE,
  schedule: '23 * * * *',
  handler: async (_data, ctx) => {
    const deleted = await sweepSessions({ db: ctx.deps.db, clock: ctx.deps.clock, signal: ctx.signal });
    ctx.log.info({ deleted }, 'session facts sweep finished');
  },
};
