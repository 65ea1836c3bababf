import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { buildApp } from '../api/app.js';
import { loadConfig } from '../api/config.js';
import type { DB } from '../api/db/schema.js';

/**
 * The OpenAPI document as the app generates it. The pool never connects: building the app and
 * generating the document touch no database.
 */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  const db = new Kysely<DB>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: 'postgres://unused@127.0.0.1:1/unused' }) }),
  });
  const app = await buildApp({ config: loadConfig({ LOG_LEVEL: 'silent' }), db });
  await app.ready();
  const doc = app.swagger() as unknown as Record<string, unknown>;
  await app.close();
  await db.destroy();
  return JSON.parse(JSON.stringify(doc)) as Record<string, unknown>;
}

export const render = (doc: unknown) => `${JSON.stringify(doc, null, 2)}\n`;
