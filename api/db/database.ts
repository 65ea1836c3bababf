import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, sql, type Migration, type Transaction } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import type { Config } from '../config.js';
import { foundation } from './migrations/0001_foundation.js';
import { registry } from './migrations/0002_registry.js';
import { evidence } from './migrations/0003_evidence.js';
import { gateway } from './migrations/0004_gateway.js';
import { policies } from './migrations/0005_policies.js';
import { registryVersions } from './migrations/0006_registry_versions.js';
import { serviceAccounts } from './migrations/0007_service_accounts.js';
import { discovery } from './migrations/0008_discovery.js';
import { jobs } from './migrations/0009_jobs.js';
import { risk } from './migrations/0010_risk.js';
import { graph } from './migrations/0011_graph.js';
import { telemetry } from './migrations/0012_telemetry.js';
import { decisionTelemetry } from './migrations/0013_decision_telemetry.js';
import { governance } from './migrations/0014_governance.js';
import { reports } from './migrations/0015_reports.js';
import { evidenceCheckpoints } from './migrations/0016_evidence_checkpoints.js';
import { oidcIdentities } from './migrations/0017_oidc.js';
import { signup } from './migrations/0018_signup.js';
import { publicSubmissions } from './migrations/0019_public.js';
import type { DB } from './schema.js';

export type Db = Kysely<DB>;
export type Tx = Transaction<DB>;

export interface Database {
  db: Db;
  kind: 'postgres' | 'embedded';
  close(): Promise<void>;
}

/** Every migration, in order. A migration is code; its name is its version. */
export function migrations(runtimeRole: string): Record<string, Migration> {
  return {
    '0001_foundation': foundation(runtimeRole),
    '0002_registry': registry(runtimeRole),
    '0003_evidence': evidence(runtimeRole),
    '0004_gateway': gateway(runtimeRole),
    '0005_policies': policies(runtimeRole),
    '0006_registry_versions': registryVersions(runtimeRole),
    '0007_service_accounts': serviceAccounts(runtimeRole),
    '0008_discovery': discovery(runtimeRole),
    '0009_jobs': jobs(runtimeRole),
    '0010_risk': risk(runtimeRole),
    '0011_graph': graph(runtimeRole),
    '0012_telemetry': telemetry(runtimeRole),
    '0013_decision_telemetry': decisionTelemetry(),
    '0014_governance': governance(runtimeRole),
    '0015_reports': reports(runtimeRole),
    '0016_evidence_checkpoints': evidenceCheckpoints(runtimeRole),
    '0017_oidc': oidcIdentities(runtimeRole),
    '0018_signup': signup(runtimeRole),
    '0019_public': publicSubmissions(runtimeRole),
  };
}

export async function migrate(db: Kysely<unknown>, runtimeRole: string): Promise<string[]> {
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations(runtimeRole) },
  });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Databases reached through node-postgres, which runs several parameterless statements in one message. */
const multiStatement = new WeakSet<Kysely<DB>>();

/**
 * How long a request waits for a connection (a new one, or a free one of a full pool) before it fails:
 * with the database unreachable without a refusal (a partition, a stalled server), requests answer
 * 503 after this instead of piling up.
 */
const CONNECT_TIMEOUT_MS = 5000;

function postgres(url: string, max: number): Kysely<DB> {
  const pool = new pg.Pool({ connectionString: url, max, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  // A client that loses its connection (the server stopped or restarted) must not crash the process.
  // The pool catches that only for idle clients; a checked-out one emits 'error' between two
  // statements of a transaction with no one listening. Its next statement then fails (503), and the
  // pool drops it on release as not queryable, opening new connections on demand: service resumes by
  // itself when the server is back.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  multiStatement.add(db);
  return db;
}

/** The embedded databases' PGlite instances: what runs text of several statements there (executeSqlText). */
const embedded = new WeakMap<Kysely<DB>, PGlite>();

async function openEmbedded(config: Config): Promise<Kysely<DB>> {
  let dataDir = config.dataDir;
  if (!dataDir.startsWith('memory://')) {
    dataDir = path.resolve(dataDir, 'pgdata');
    mkdirSync(dataDir, { recursive: true });
  }
  const pglite = await PGlite.create(dataDir);
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  embedded.set(db, pglite);
  return db;
}

/**
 * Runs SQL text as a library wrote it (the job queue brings its own): one statement with parameters, or
 * several statements without, on a connection of its own. On the embedded database that is the one
 * connection, taken in turn with the app's statements, so the text never runs inside a transaction the
 * app has open. A failure part-way through several statements rolls back whatever they began, so the
 * connection goes back clean.
 */
export async function executeSqlText(db: Db, text: string, values?: readonly unknown[]): Promise<{ rows: unknown[] }> {
  const pglite = embedded.get(db);
  return db.connection().execute(async (conn) => {
    try {
      if (pglite && values?.length) return { rows: (await pglite.query(text, [...values])).rows };
      if (pglite) return { rows: (await pglite.exec(text)).at(-1)?.rows ?? [] };
      // node-postgres sends text without parameters as one simple query, several statements included.
      const result = await conn.executeQuery(CompiledQuery.raw(text, values ? [...values] : []));
      return { rows: result.rows as unknown[] };
    } catch (err) {
      if (!values?.length) await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
  });
}

/**
 * Opens the database the API uses, connected as the runtime role.
 * PostgreSQL: DATABASE_URL must name the runtime role; migrations run separately (`tollgate migrate`).
 * Embedded (PGlite, no DATABASE_URL): migrated on start as the embedded superuser, then the single
 * connection switches to the runtime role for good, so row-level security applies exactly as on PostgreSQL.
 */
export async function openDatabase(config: Config): Promise<Database> {
  if (config.databaseUrl) {
    const db = postgres(config.databaseUrl, config.poolMax);
    try {
      await assertRuntimeRole(db);
    } catch (err) {
      await db.destroy();
      throw err;
    }
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  const db = await openEmbedded(config);
  await migrate(db as Kysely<unknown>, config.runtimeRole);
  await sql`set role ${sql.id(config.runtimeRole)}`.execute(db);
  await assertRuntimeRole(db);
  return { db, kind: 'embedded', close: () => db.destroy() };
}

/** Opens the schema owner's connection for `tollgate migrate`. */
export function openOwnerDatabase(url: string): Kysely<unknown> {
  return postgres(url, 2) as Kysely<unknown>;
}

/**
 * Refuses to serve as a role that could see past row-level security: a superuser, a role with
 * BYPASSRLS, or the owner of any table.
 */
export async function assertRuntimeRole(db: Db): Promise<void> {
  const { rows } = await sql<{ role: string; rolsuper: boolean; rolbypassrls: boolean; owned: number }>`
    select current_user as role, r.rolsuper, r.rolbypassrls,
      (select count(*)::int from pg_tables t
        where t.schemaname = 'public' and t.tableowner = current_user) as owned
    from pg_roles r where r.rolname = current_user`.execute(db);
  const r = rows[0];
  if (!r) throw new Error('cannot read the database role');
  if (r.rolsuper || r.rolbypassrls || r.owned > 0) {
    throw new Error(
      `the API must connect as a runtime role that owns nothing and is subject to row-level security; ` +
        `"${r.role}" is ${r.rolsuper ? 'a superuser' : r.rolbypassrls ? 'allowed to bypass RLS' : 'the owner of tables'}. ` +
        `Point DATABASE_URL at the runtime role and MIGRATION_DATABASE_URL at the schema owner.`,
    );
  }
}

export interface Scope {
  orgId?: string | null;
  userId?: string | null;
}

/**
 * Runs fn in one transaction with the organisation (and person) set for row-level security.
 * Every statement inside must use the transaction it is given.
 */
export function inScope<T>(db: Db, scope: Scope, fn: (tx: Tx) => Promise<T>): Promise<T> {
  if (multiStatement.has(db)) return inScopeOneTrip(db, scope, fn);
  return db.transaction().execute(async (tx) => {
    await sql`select set_config('app.org_id', ${scope.orgId ?? ''}, true),
                     set_config('app.user_id', ${scope.userId ?? ''}, true)`.execute(tx);
    return fn(tx);
  });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The same on node-postgres, with `begin` and the scope sent in one message: a round trip less for
 * every transaction. The scope is two UUIDs, checked here before they become literals.
 */
async function inScopeOneTrip<T>(db: Db, scope: Scope, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const literal = (id: string | null | undefined) => {
    if (id && !UUID.test(id)) throw new Error('a scope is a UUID');
    return `'${id ?? ''}'`;
  };
  return db.connection().execute(async (conn) => {
    await sql
      .raw(`begin; select set_config('app.org_id', ${literal(scope.orgId)}, true), set_config('app.user_id', ${literal(scope.userId)}, true)`)
      .execute(conn);
    let result: T;
    try {
      // One connection in an open transaction: what a Transaction is, less the methods that begin another.
      result = await fn(conn as unknown as Tx);
    } catch (err) {
      await sql`rollback`.execute(conn).catch(() => undefined);
      throw err;
    }
    await sql`commit`.execute(conn);
    return result;
  });
}
