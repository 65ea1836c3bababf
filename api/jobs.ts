import { evidenceCheckpointJob } from './modules/evidence/index.js';
import { sessionRetentionJob } from './modules/gateway/index.js';
import { exceptionExpiryJob } from './modules/governance/index.js';
import { discoveryJobHandler } from './modules/integrations/index.js';
import { reportsJobHandler } from './modules/reports/index.js';
import { riskJobHandler } from './modules/risk/index.js';
import { telemetryRetentionJob } from './modules/telemetry/index.js';
import type { JobHandler } from './platform/jobs.js';

/**
 * Every background job's handler, one per queue: what `tollgate worker` (and `tollgate api` with
 * WORKER_IN_PROCESS) runs, as api/routes.ts is every operation. A module exports its handler through its
 * index.ts (the handler itself lives beside the module, `<module>.jobs.ts`); its queue and dead-letter
 * queue come from a migration (worker/README.md, Adding a job).
 */
export const jobHandlers: readonly JobHandler[] = [
  discoveryJobHandler,
  riskJobHandler,
  telemetryRetentionJob,
  exceptionExpiryJob,
  reportsJobHandler,
  evidenceCheckpointJob,
  sessionRetentionJob,
];
