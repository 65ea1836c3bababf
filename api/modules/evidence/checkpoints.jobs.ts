import { EVIDENCE_CHECKPOINT_QUEUE } from '../../db/migrations/0016_evidence_checkpoints.js';
import type { JobHandler } from '../../platform/jobs.js';
import { writeDueCheckpoints } from './checkpoints.service.js';

export { EVIDENCE_CHECKPOINT_QUEUE };

/** When checkpoints are signed (pg-boss schedule, UTC): every 15 minutes. */
export const CHECKPOINT_SCHEDULE = '*/15 * * * *';

/**
 * The checkpoint queue's handler, as api/jobs.ts lists it: every 15 minutes, a signed checkpoint for each
 * organisation whose evidence chain grew since its last one (docs/evidence.md, Checkpoints). A run missed or
 * run twice changes nothing but when the next checkpoint is signed.
 */
export const evidenceCheckpointJob: JobHandler = {
  queue: EVIDENCE_CHECKPOINT_QUEUE,
  schedule: CHECKPOINT_SCHEDULE,
  handler: async (_data, ctx) => {
    const { db, evidence, clock } = ctx.deps;
    await writeDueCheckpoints({ db, evidence, clock, log: ctx.log, signal: ctx.signal });
  },
};
