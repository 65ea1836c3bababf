import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { openDatabase } from './db/database.js';
import { seedDemo } from './seed.js';

/** `tollgate api`: opens the database, builds the app, listens, and shuts down cleanly on a signal. */
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
  app.addHook('onClose', async () => database.close());
  await app.listen({ host: config.host, port: config.port });
  app.log.info(
    { database: database.kind, environment: config.environment, dev_login: config.devLoginEnabled },
    'tollgate api ready',
  );

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  return app;
}
