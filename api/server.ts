import { Server as NetServer } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { openDatabase } from './db/database.js';
import { jobHandlers } from './jobs.js';
import { seedDemo } from './seed.js';

/**
 * How long a kept-alive connection may stay open after SIGTERM while nothing is in flight on it. A
 * busy client sends its next request within it and is answered with `Connection: close`, so it
 * reconnects and is refused instead of having its request cut by an idle-connection close.
 */
const IDLE_GRACE_MS = 500;

/** `tollgate api`: opens the database, builds the app, listens, and drains on SIGTERM or SIGINT. */
export async function startApi(config: Config): Promise<FastifyInstance> {
  const database = await openDatabase(config);
  if (config.seedDemo) {
    try {
      await seedDemo(database.db, new Date());
    } catch (err) {
      // The demo organisation's slug may already belong to someone else's organisation.
      process.stderr.write(`demo organisation not created: ${(err as Error).message}\n`);
    }
  }
  const app = await buildApp({ config, db: database.db });
  // The process's own metrics (CPU, memory, event loop) belong to the process that serves, not to every app built.
  if (config.metricsEnabled) app.deps.metrics.collectProcessMetrics();
  app.addHook('onClose', async () => {
    await app.deps.jobs.stop({ timeoutMs: config.shutdownTimeoutMs });
    await database.close();
  });
  // The embedded database's own autovacuum (PGlite has none), from now that it is migrated and seeded;
  // database.close() above stops it.
  database.maintenance?.start(app.log);
  if (config.jobs.inProcess) await startInProcessWorker(app);

  let draining = false;
  // While draining, every answer closes its connection: the client's next request opens a new one,
  // which is refused, so no request is cut once it has been read.
  app.addHook('onSend', async (_req, reply) => {
    if (draining) reply.header('connection', 'close');
  });
  await app.listen({ host: config.host, port: config.port });
  app.log.info(
    { database: database.kind, environment: config.environment, dev_login: config.devLoginEnabled, in_process_worker: config.jobs.inProcess },
    'tollgate api ready',
  );

  const shutdown = (signal: string) => {
    if (draining) return;
    draining = true;
    const started = Date.now();
    app.log.info({ signal, timeout_ms: config.shutdownTimeoutMs }, 'shutting down: no new connections, finishing requests in flight');
    setTimeout(() => {
      app.log.error('shutdown took longer than SHUTDOWN_TIMEOUT_SECONDS; exiting with requests unfinished');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    drain(app).then(
      () => {
        app.log.info({ ms: Date.now() - started }, 'shut down');
        process.exit(0);
      },
      (err: Error) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // A repeated SIGTERM changes nothing (the bound holds); a second Ctrl-C stops at once, as a terminal expects.
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => {
    if (draining) process.exit(130);
    shutdown('SIGINT');
  });
  return app;
}

/**
 * WORKER_IN_PROCESS (the default on the embedded database, which one process holds): the API works the
 * queues of api/jobs.ts itself, as `tollgate worker` would. Stopped with the app (buildApp's onClose).
 */
export async function startInProcessWorker(app: FastifyInstance): Promise<void> {
  await app.deps.jobs.start();
  await app.deps.jobs.serve(jobHandlers, app.deps);
}

/**
 * Stops accepting connections at once, lets every request already read finish (a submission waits
 * for its group-commit batch, so the batches drain with them), closes kept-alive connections as they
 * fall idle, then closes the app and with it the database pool.
 */
async function drain(app: FastifyInstance): Promise<void> {
  const server = app.server;
  const closed = new Promise<void>((resolve) => server.once('close', () => resolve()));
  // net.Server's close stops the listener and keeps the connections; http.Server's would also cut the
  // idle kept-alive ones at once, racing clients that are about to send on them.
  NetServer.prototype.close.call(server);
  let reaper: NodeJS.Timeout | undefined;
  const grace = setTimeout(() => {
    server.closeIdleConnections();
    // A connection whose answer left before the drain began falls idle later without being told to close.
    reaper = setInterval(() => server.closeIdleConnections(), 250);
  }, IDLE_GRACE_MS);
  await closed;
  clearTimeout(grace);
  clearInterval(reaper);
  // Nothing is connected any more: fastify's close runs the onClose hooks (the database pool).
  await app.close();
}
