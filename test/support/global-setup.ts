import type { TestProject } from 'vitest/node';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { migrate } from '../../api/db/database.js';
import { startCluster, type Cluster } from './postgres-cluster.js';
import { OWNER_ROLE, RUNTIME_ROLE, ROLE_PASSWORD, TEMPLATE_DB, withDatabase } from './pg-urls.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
  }
}

let cluster: Cluster | undefined;

/**
 * Starts a throwaway PostgreSQL cluster (unless DATABASE_URL names a server whose role may create
 * roles and databases), creates the schema-owner and runtime roles, and migrates a template
 * database that every test file copies.
 */
export async function setup(project: TestProject): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    cluster = await startCluster();
    adminUrl = cluster.adminUrl();
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    for (const role of [OWNER_ROLE, RUNTIME_ROLE]) {
      const { rowCount } = await admin.query('select 1 from pg_roles where rolname = $1', [role]);
      if (!rowCount) await admin.query(`create role ${role} login password '${ROLE_PASSWORD}'`);
    }
    await admin.query(`drop database if exists ${TEMPLATE_DB} with (force)`);
    await admin.query(`create database ${TEMPLATE_DB} owner ${OWNER_ROLE}`);
  } finally {
    await admin.end();
  }
  const owner = new Kysely<unknown>({
    dialect: new PostgresDialect({
      pool: new pg.Pool({ connectionString: withDatabase(adminUrl, TEMPLATE_DB, OWNER_ROLE), max: 1 }),
    }),
  });
  try {
    await migrate(owner, RUNTIME_ROLE);
  } finally {
    await owner.destroy();
  }
  project.provide('pgAdminUrl', adminUrl);
}

export async function teardown(): Promise<void> {
  cluster?.stop();
}
