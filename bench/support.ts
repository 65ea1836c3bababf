import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrate } from '../api/db/database.js';
import { startCluster, type Cluster } from '../test/support/postgres-cluster.js';
import { OWNER_ROLE, ROLE_PASSWORD, RUNTIME_ROLE, withDatabase } from '../test/support/pg-urls.js';

/** A durable PostgreSQL cluster (synchronous_commit on) with a migrated `tollgate` database. */
export async function benchDatabase(): Promise<{ cluster: Cluster; runtimeUrl: string }> {
  const cluster = await startCluster({ durable: true });
  const admin = new pg.Client({ connectionString: cluster.adminUrl() });
  await admin.connect();
  for (const role of [OWNER_ROLE, RUNTIME_ROLE]) await admin.query(`create role ${role} login password '${ROLE_PASSWORD}'`);
  await admin.query(`create database tollgate owner ${OWNER_ROLE}`);
  await admin.end();
  const owner = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(cluster.adminUrl(), 'tollgate', OWNER_ROLE) }) }),
  });
  await migrate(owner, RUNTIME_ROLE);
  await owner.destroy();
  return { cluster, runtimeUrl: withDatabase(cluster.adminUrl(), 'tollgate', RUNTIME_ROLE) };
}
