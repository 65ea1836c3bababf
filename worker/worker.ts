import Fastify, { LogController } from 'fastify';
import { buildDeps } from '../api/app.js';
import type { Config } from '../api/config.js';
import { openDatabase } from '../api/db/database.js';
import { jobHandlers } from '../api/jobs.js';
import type { JobHandler } from '../api/platform/jobs.js';
import { createLogger } from '../api/platform/logger.js';
import { DatabaseProbe } from '../api/platform/readiness.js';

/** A setting the worker cannot run with (exit 78, as for the production guard). */
export class WorkerConfigError extends Error {}

/**
 * `tollgate worker` once its configuration passed the production guard (cli.ts): runs the jobs until
 * SIGTERM or SIGINT, then lets those in flight finish within SHUTDOWN_TIMEOUT_SECONDS. Answers the exit
 * status: 0; 1 when jobs had to be handed back to the queue; 78 when a setting rules the worker out.
 */
export async function runWorker(config: Config, handlers: readonly JobHandler[] = jobHandlers): Promise<number> {
  let running: RunningWorker;
  try {
    running = await startWorker(config, handlers);
  } catch (err) {
    if (err instanceof WorkerConfigError) {
      process.stderr.write(`tollgate worker: refusing to start, ${err.message}\n`);
      return 78; // EX_CONFIG
    }
    throw err;
  }
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  // A repeated SIGTERM changes nothing; a second Ctrl-C stops at once, as a terminal expects.
  process.on('SIGTERM', () => undefined);
  process.once('SIGINT', () => process.exit(130));
  // Handing jobs back and closing the pool take a moment after the bound; past that, exit anyway.
  setTimeout(() => process.exit(1), config.shutdownTimeoutMs + 5000).unref();
  return running.stop(signal);
}

export interface RunningWorker {
  /** The port of /healthz and /readyz (WORKER_PORT; 0 picks a free one). */
  port: number;
  /**
   * Stops taking jobs, lets the jobs in flight finish within SHUTDOWN_TIMEOUT_SECONDS, hands back to the
   * queue those still running then, closes the database; answers the exit status: 0, or 1 when a job had
   * to be handed back.
   */
  stop(signal: string): Promise<number>;
}

/**
 * `tollgate worker`: works the queues of `handlers` (api/jobs.ts) on PostgreSQL as the runtime role, with
 * the same services the API's routes use, and serves `/healthz` (the process is up) and `/readyz` (the
 * database answers and the queue is taking jobs) on WORKER_PORT. worker/README.md has the contract.
 */
export async function startWorker(
  config: Config,
  handlers: readonly JobHandler[] = jobHandlers,
  logStream?: NodeJS.WritableStream,
): Promise<RunningWorker> {
  if (!config.databaseUrl) {
    throw new WorkerConfigError(
      'DATABASE_URL: the worker needs PostgreSQL; on the embedded database `tollgate api` runs the jobs itself (WORKER_IN_PROCESS)',
    );
  }
  const log = createLogger(config.logLevel, logStream);
  const database = await openDatabase(config);
  const deps = buildDeps({ config, db: database.db }, log);
  const http = Fastify({ loggerInstance: log, logController: new LogController({ disableRequestLogging: true }) });
  const probe = new DatabaseProbe(database.db);
  http.get('/healthz', async () => ({ status: 'ok' }));
  http.get('/readyz', async (req, reply) => {
    const jobs = deps.jobs.started ? 'working' : 'stopped';
    try {
      await probe.check();
    } catch (err) {
      req.log.warn({ err }, 'readiness check failed');
      return reply.status(503).send({ status: 'unavailable', checks: { database: 'unreachable', jobs } });
    }
    if (!deps.jobs.started) return reply.status(503).send({ status: 'unavailable', checks: { database: 'ok', jobs } });
    return { status: 'ready' };
  });

  try {
    await deps.jobs.start();
    await deps.jobs.serve(handlers, deps);
    await http.listen({ host: config.host, port: config.workerPort });
  } catch (err) {
    await deps.jobs.stop({ graceful: false });
    await http.close();
    await database.close();
    throw err;
  }
  const address = http.server.address();
  const port = typeof address === 'object' && address ? address.port : config.workerPort;
  log.info(
    { port, queues: handlers.map((h) => h.queue), concurrency: config.jobs.concurrency, environment: config.environment },
    'tollgate worker ready',
  );

  return {
    port,
    async stop(signal) {
      const started = Date.now();
      log.info({ signal, timeout_ms: config.shutdownTimeoutMs, running: deps.jobs.running }, 'shutting down: no new jobs, finishing the jobs in flight');
      const { unfinished } = await deps.jobs.stop({ graceful: true, timeoutMs: config.shutdownTimeoutMs });
      await http.close();
      await database.close();
      if (unfinished > 0) {
        log.error({ unfinished, ms: Date.now() - started }, 'jobs still running after SHUTDOWN_TIMEOUT_SECONDS went back to the queue');
        return 1;
      }
      log.info({ ms: Date.now() - started }, 'shut down');
      return 0;
    },
  };
}
