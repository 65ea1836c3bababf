import { sql } from 'kysely';
import { loadCheckedConfig } from '../../api/config.js';
import type { JobHandler } from '../../api/platform/jobs.js';
import { runWorker } from '../../worker/worker.js';

/**
 * `tollgate worker` (worker/worker.ts, the same process code: probes, signals, shutdown) working a test
 * queue instead of api/jobs.ts, so that test/e2e/worker.test.ts can kill it in the middle of a job
 * without the product shipping a test queue. The test creates the queue `test.block` and the table
 * `job_log` as the schema owner; each attempt logs `started`, waits as the job's data says (the first
 * attempt `firstMs`, later ones `laterMs`; an aborted signal ends the wait with an error), then logs
 * `completed`.
 *
 *   node --import tsx test/support/test-worker.ts   (environment as for `tollgate worker`)
 */
const blockingHandler: JobHandler = {
  queue: 'test.block',
  async handler(data, ctx) {
    const { firstMs = 0, laterMs = 0 } = data as { firstMs?: number; laterMs?: number };
    const log = (event: string) =>
      sql`insert into job_log (job_id, attempt, event) values (${ctx.jobId}, ${ctx.retryCount}, ${event})`.execute(ctx.deps.db);
    await log('started');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ctx.retryCount === 0 ? firstMs : laterMs);
      ctx.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      });
    });
    await log('completed');
  },
};

runWorker(loadCheckedConfig(process.env), [blockingHandler]).then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`test worker: ${err.message}\n`);
    process.exit(1);
  },
);
