import { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { RISK_QUEUE } from '../../db/migrations/0010_risk.js';
import type { JobHandler } from '../../platform/jobs.js';
import { allAgents, claimRequests, fullDone, queueRefresh, staleAgents } from './risk.repository.js';
import { recalculate } from './risk.service.js';

export { RISK_QUEUE };

/** What a risk job carries: the organisation whose requests it drains. */
export const riskJob = z.object({ org_id: z.uuid() });

/** Agents recalculated per transaction: the organisation's recalculation lock is held for one batch at a time. */
export const BATCH = 200;
const DAY_SECONDS = 86_400;

/**
 * Drains an organisation's recalculation requests (D24, docs/risk-and-graph.md "Triggers"). Writers' triggers mark
 * agents stale, or ask for the whole organisation, and queue this job while none is waiting. The job first takes
 * the requests (a new change from then on queues another job, so nothing marked after its reading is lost), then
 * recalculates the agents marked (every agent when the organisation was asked for, or the daily refresh is due) in
 * batches. At-least-once: running it again recalculates again, which changes nothing but `computed_at`.
 */
export async function drainRecalculations(deps: { db: Db; clock: Clock }, data: unknown, signal?: AbortSignal): Promise<{ recalculated: number }> {
  const { org_id: orgId } = riskJob.parse(data);
  const claim = await inScope(deps.db, { orgId }, async (tx) => {
    const c = await claimRequests(tx, orgId);
    // The daily refresh keeps history daily and ages attestations and detection windows without a change.
    if (c?.scheduleRefresh) await queueRefresh(tx, orgId, DAY_SECONDS);
    return c;
  });
  if (!claim) return { recalculated: 0 };
  const everyone = claim.refreshDue || claim.fullGeneration > claim.fullDone;
  const agentIds = await inScope(deps.db, { orgId }, (tx) => (everyone ? allAgents(tx, orgId) : staleAgents(tx, orgId)));
  let recalculated = 0;
  for (let i = 0; i < agentIds.length; i += BATCH) {
    signal?.throwIfAborted();
    recalculated += (await recalculate(deps.db, deps.clock, orgId, agentIds.slice(i, i + BATCH))).scored.length;
  }
  if (everyone) await inScope(deps.db, { orgId }, (tx) => fullDone(tx, orgId, claim.fullGeneration));
  return { recalculated };
}

/**
 * The risk queue's handler, as api/jobs.ts lists it. A job whose retries are spent (the database was away each
 * time) drains once more from the dead-letter queue: had its first step never committed, the organisation would
 * otherwise wait for its daily refresh, since writers queue no job while one is waiting.
 */
export const riskJobHandler: JobHandler = {
  queue: RISK_QUEUE,
  handler: async (data, ctx) => {
    const { recalculated } = await drainRecalculations(ctx.deps, data, ctx.signal);
    ctx.log.debug({ recalculated }, 'risk scores recalculated');
  },
  deadLetter: async (data, ctx) => {
    ctx.log.warn({ error: ctx.error }, 'risk recalculation failed its retries; draining once more');
    await drainRecalculations(ctx.deps, data, ctx.signal);
  },
};
