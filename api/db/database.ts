import { execFile } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import { CompiledQuery, Kysely, Migrator, PostgresDialect, sql, type Compilable, type Migration, type Transaction } from 'kysely';
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
import { evidenceHeadTrigger } from './migrations/0020_evidence_head_trigger.js';
import { flowAndReplay } from './migrations/0021_flow_and_replay.js';
import { idempotencyIndex } from './migrations/0022_idempotency_index.js';
import { EmbeddedMaintenance } from './embedded-maintenance.js';
import type { PgliteRounds } from './pglite-rounds.js';
import type { DB } from './schema.js';

export type Db = Kysely<DB>;
export type Tx = Transaction<DB>;

export interface Database {
  db: Db;
  kind: 'postgres' | 'embedded';
  /** The embedded database's own autovacuum, which `tollgate api` starts once it has seeded; none on PostgreSQL, whose autovacuum does it. */
  maintenance?: EmbeddedMaintenance;
  /** Stops the maintenance (its timer, and a pass under way) before the database closes. */
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
    '0020_evidence_head_trigger': evidenceHeadTrigger(),
    '0021_flow_and_replay': flowAndReplay(runtimeRole),
    '0022_idempotency_index': idempotencyIndex(),
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

/** The pg Pool behind each database on PostgreSQL: its connection gauges are read on each /metrics scrape. */
const pools = new WeakMap<Kysely<DB>, pg.Pool>();

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
  pools.set(db, pool);
  return db;
}

/** The pg Pool of a database opened on PostgreSQL; none for the embedded database. */
export function poolOf(db: Db): pg.Pool | undefined {
  return pools.get(db);
}

/** The embedded databases' PGlite instances: what runs text of several statements there (executeSqlText). */
const embedded = new WeakMap<Kysely<DB>, PGlite>();

/** What runs several statements of an embedded database in one call into PGlite (inScopePiped, readInScope). */
const rounds = new WeakMap<Kysely<DB>, PgliteRounds>();

/**
 * One process at a time on an embedded database: PGlite has no lock of its own, and two processes
 * writing the same files would corrupt them. The lock file holds the owner's pid; a lock whose process
 * is gone (a crash, `kill -9`) or is this process (a restarted container's pid 1) is taken over.
 */
function lockEmbedded(dataDir: string): () => void {
  const file = path.join(dataDir, 'tollgate.lock');
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(file, 'utf8') === String(process.pid)) unlinkSync(file);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw err;
      const pid = Number(readFileSync(file, 'utf8'));
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new Error(
          `the embedded database in ${dataDir} is in use by process ${pid}; stop that process first (or set DATABASE_URL)`,
        );
      }
      unlinkSync(file);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The embedded postgres's settings beyond PGlite's own: shared_buffers at 16MB instead of the 128MB its
 * initdb writes. PGlite keeps the buffer pool in its WASM memory, which is touched in full at start and
 * never given back, so 128MB of it was an eighth of a gigabyte of resident memory for a database of a
 * few tens of MB (`make run`'s demo organisation: ~26MB of files, catalogs included); a page beyond
 * the pool is read from the OS's file cache. Durability is PGlite's own, unchanged.
 */
const EMBEDDED_SETTINGS = ['-c', 'shared_buffers=16MB'];

/**
 * Creates a new embedded database's files (initdb) in a process of its own, so that what initdb leaves
 * behind goes with it: PGlite runs initdb in a second postgres and an initdb of their own WASM memories,
 * plus the tarball that carries the result (~450MB resident together), which in the API's process
 * stayed resident until a major GC that an idle process may not run for minutes; in a worker thread,
 * the allocator kept the thread's heap (~200MB) after it ended. The child runs PGlite's CommonJS build
 * (`node -e` has no module URL to import the ES one from): the one package, with the same files.
 */
async function initEmbedded(dataDir: string, startParams: string[]): Promise<void> {
  const script = `const [pglite, dataDir, params] = process.argv.slice(1);
    require(pglite).PGlite.create(dataDir, { startParams: JSON.parse(params) }).then((pg) => pg.close());`;
  const pglite = createRequire(import.meta.url).resolve('@electric-sql/pglite');
  await new Promise<void>((resolve, reject) => {
    execFile(process.execPath, ['-e', script, pglite, dataDir, JSON.stringify(startParams)], (err, _stdout, stderr) =>
      err ? reject(new Error(`creating the embedded database in ${dataDir} failed: ${stderr.trim() || err.message}`)) : resolve(),
    );
  });
}

async function openEmbedded(config: Config): Promise<{ db: Kysely<DB>; unlock: () => void }> {
  let dataDir = config.dataDir;
  let unlock = () => {};
  if (!dataDir.startsWith('memory://')) {
    mkdirSync(path.resolve(dataDir), { recursive: true });
    unlock = lockEmbedded(path.resolve(dataDir));
    dataDir = path.resolve(dataDir, 'pgdata');
    mkdirSync(dataDir, { recursive: true });
  }
  try {
    // Loaded here, not at the top: a process on PostgreSQL has no use for PGlite's code.
    const [{ PGlite }, { PGliteDialect }, { PgliteRounds }] = await Promise.all([
      import('@electric-sql/pglite'),
      import('kysely-pglite-dialect'),
      import('./pglite-rounds.js'),
    ]);
    const startParams = [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS];
    if (!dataDir.startsWith('memory://') && !existsSync(path.join(dataDir, 'PG_VERSION'))) await initEmbedded(dataDir, startParams);
    const pglite = await PGlite.create(dataDir, { startParams });
    const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
    embedded.set(db, pglite);
    rounds.set(db, new PgliteRounds(pglite));
    return { db, unlock };
  } catch (err) {
    unlock();
    throw err;
  }
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
  const { db, unlock } = await openEmbedded(config);
  const destroy = () => db.destroy().finally(unlock);
  const maintenance = new EmbeddedMaintenance(db as Kysely<unknown>, config.runtimeRole, destroy);
  const close = () => maintenance.stop().finally(destroy);
  try {
    await migrate(db as Kysely<unknown>, config.runtimeRole);
    await sql`set role ${sql.id(config.runtimeRole)}`.execute(db);
    await assertRuntimeRole(db);
  } catch (err) {
    await close();
    throw err;
  }
  return { db, kind: 'embedded', maintenance, close };
}

/**
 * The schema owner's connection for an operator's command (`tollgate org set-plan`): MIGRATION_DATABASE_URL
 * on PostgreSQL, the embedded superuser (migrated first) on the embedded database, which the lock keeps
 * from being opened while `tollgate api` runs on it.
 */
export async function openOperatorDatabase(config: Config): Promise<Database> {
  if (config.databaseUrl) {
    if (!config.migrationDatabaseUrl) throw new Error('set MIGRATION_DATABASE_URL to the schema owner');
    const db = openOwnerDatabase(config.migrationDatabaseUrl) as unknown as Db;
    return { db, kind: 'postgres', close: () => db.destroy() };
  }
  const { db, unlock } = await openEmbedded(config);
  const close = () => db.destroy().finally(unlock);
  try {
    await migrate(db as Kysely<unknown>, config.runtimeRole);
  } catch (err) {
    await close();
    throw err;
  }
  return { db, kind: 'embedded', close };
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

/** The scope as one statement's text, for the transaction under way: two UUIDs, checked here before they become literals. */
export function scopeText(scope: Scope): string {
  const literal = (id: string | null | undefined) => {
    if (id && !UUID.test(id)) throw new Error('a scope is a UUID');
    return `'${id ?? ''}'`;
  };
  return `select set_config('app.org_id', ${literal(scope.orgId)}, true), set_config('app.user_id', ${literal(scope.userId)}, true)`;
}

/** `begin` and the scope as one statement's text. */
function beginInScope(scope: Scope): string {
  return `begin; ${scopeText(scope)}`;
}

/**
 * The same on node-postgres, with `begin` and the scope sent in one message: a round trip less for
 * every transaction.
 */
async function inScopeOneTrip<T>(db: Db, scope: Scope, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const begin = beginInScope(scope);
  return db.connection().execute(async (conn) => {
    await sql.raw(begin).execute(conn);
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

/**
 * One read in the organisation's (and person's) scope, as inScope runs it, in one round trip on
 * PostgreSQL: `begin` with the scope, the query and `commit` are sent together (node-postgres
 * pipelining, on this one client for these three statements) and run in that order in one transaction.
 * For a read only: were `begin` to fail, the query would run outside any scope and so see nothing.
 */
export async function readInScope<R>(db: Db, scope: Scope, query: Compilable<R>): Promise<R[]> {
  const pool = pools.get(db);
  const inRounds = rounds.get(db);
  if (inRounds) {
    return db.connection().execute(async (conn) => {
      const scoped = scopeQuery(scope);
      // The read is planned for its values (PgliteRounds): a caller's query may join on what they are.
      const [began, setScope, read, committed] = await inRounds.run([BEGIN, scoped, query.compile(), COMMIT], new Set([BEGIN, scoped, COMMIT]));
      if (committed!.status === 'rejected') await sql`rollback`.execute(conn).catch(() => undefined);
      for (const r of [began, setScope, read, committed]) if (r!.status === 'rejected') throw r!.reason;
      return (read as PromiseFulfilledResult<{ rows: unknown[] }>).value.rows as R[];
    });
  }
  if (!pool) return inScope(db, scope, async (tx) => (await tx.executeQuery(query.compile())).rows);
  const begin = beginInScope(scope);
  const client = await pool.connect();
  const [began, read, committed] = await piped(client, [begin, query.compile(), 'commit']);
  // After a failed read `commit` rolls back, and the client goes back clean; one whose `commit` failed
  // may be in any state, and the pool drops it rather than lend it again.
  client.release(committed!.status === 'rejected' ? (committed!.reason as Error) : undefined);
  for (const r of [began, read, committed]) if (r!.status === 'rejected') throw r!.reason;
  return (read as PromiseFulfilledResult<pg.QueryResult>).value.rows as R[];
}

/**
 * A Kysely on one client of the pool that never gives it back: the statements of a transaction that
 * inScopePiped holds the client for. Made once per client (the pool reuses them).
 */
const onClient = new WeakMap<pg.PoolClient, Kysely<DB>>();
function kyselyOn(client: pg.PoolClient): Kysely<DB> {
  let db = onClient.get(client);
  if (!db) {
    const held = { query: client.query.bind(client), release: () => undefined };
    db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: { connect: async () => held, end: async () => undefined } as unknown as pg.Pool }) });
    onClient.set(client, db);
  }
  return db;
}

/** Set in a transaction whose statements `prepared` marked, so that they take their generic plan at once. */
export const GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)";

/** The names of the statements `prepared` marked, by their text, and by the compiled statement marked. */
const preparedNames = new Map<string, string>();
const preparedQueries = new WeakMap<CompiledQuery, string>();
/** More texts than the hot path has: a caller whose text varies is not served from this map. */
const MOST_PREPARED = 64;

/**
 * Marks a statement whose text does not vary (only its parameters) to be kept parsed and planned on each
 * connection that sends it in one write with others (`inScopePiped`, `inScopesPiped`, `readInScope`): a
 * named prepared statement, whose generic plan PostgreSQL keeps (at once in the gateway's transactions,
 * GENERIC_PLANS), so it is not planned on every run. The gateway's probe was planned in ~150 µs and run
 * in ~40 (pg_stat_statements under bench/decisions). Elsewhere it runs as any other statement.
 */
export function prepared<R>(query: CompiledQuery<R>): CompiledQuery<R> {
  let name = preparedNames.get(query.sql);
  if (!name && preparedNames.size < MOST_PREPARED) preparedNames.set(query.sql, (name = `tollgate_${preparedNames.size + 1}`));
  if (name) preparedQueries.set(query, name);
  return query;
}

/** What a statement's parameter stands for while preparedShape builds it: the caller's value at `index`. */
class Slot {
  constructor(readonly index: number) {}
}

/** A statement preparedShape built, and where each of its parameters comes from: a caller's value (its index) or the statement's own. */
interface Shape {
  built: CompiledQuery;
  from: Array<number | { own: unknown }>;
  name: string | undefined;
}
const shapes = new Map<string, Shape>();

/**
 * A statement `prepared` marks whose text depends only on `shape`: built once per shape by `build` (with
 * stand-ins for `values`, each of which the statement may only carry as a parameter), then for each call
 * only given its parameters, `values` in the places the stand-ins took. Kysely's building and compiling of
 * the gateway's batch write was ~0.1 ms of the API's CPU a decision (bench/low-load).
 */
export function preparedShape<R>(shape: string, values: readonly unknown[], build: (values: readonly unknown[]) => CompiledQuery<R>): CompiledQuery<R> {
  let made = shapes.get(shape);
  if (!made) {
    const built = build(values.map((_, i) => new Slot(i)));
    prepared(built);
    made = { built, from: built.parameters.map((p) => (p instanceof Slot ? p.index : { own: p })), name: preparedQueries.get(built) };
    // More shapes than the hot path has: a caller whose shapes vary builds each time.
    if (shapes.size < MOST_PREPARED) shapes.set(shape, made);
  }
  const query: CompiledQuery<R> = { ...(made.built as CompiledQuery<R>), parameters: made.from.map((f) => (typeof f === 'number' ? values[f] : f.own)) };
  if (made.name) preparedQueries.set(query, made.name);
  return query;
}

/**
 * Sends statements in one write (node-postgres pipeline mode) and answers their results once all are in;
 * `onRun[i]` runs as soon as statement i has run (succeeded), before the others are answered.
 */
export async function piped(
  client: pg.PoolClient,
  statements: Array<string | CompiledQuery>,
  onRun: Array<(() => void) | undefined> = [],
): Promise<PromiseSettledResult<pg.QueryResult>[]> {
  const c = client as pg.PoolClient & { pipeline: boolean; connection?: { stream?: NodeJS.WritableStream } };
  c.pipeline = true;
  const socket = c.connection?.stream;
  socket?.cork();
  const sent = statements.map((s) => {
    if (typeof s === 'string') return client.query(s);
    const name = preparedQueries.get(s);
    return client.query(name ? { name, text: s.sql, values: s.parameters as unknown[] } : { text: s.sql, values: s.parameters as unknown[] });
  });
  socket?.uncork();
  onRun.forEach((run, i) => run && sent[i]?.then(run, () => undefined));
  const settled = await Promise.allSettled(sent);
  c.pipeline = false;
  return settled;
}

/** A statement sent ahead of a transaction, on its own (it commits by itself), and what to do with its rows. */
export interface Ahead<R> {
  query: CompiledQuery<R>;
  /** Runs with its rows once it has run, whatever happens to the transaction after it. */
  done: (rows: R[]) => void;
}

/**
 * A transaction in the organisation's scope whose first statement goes out with `begin` and whose last
 * goes out with `commit`: two round trips fewer than inScope, for a transaction whose statements in
 * between depend on the first and the last on them (the gateway's batch). `ahead`, a statement that must
 * not hold its locks for the transaction's time, goes in front of `begin` in the same round trip and
 * commits on its own. On PostgreSQL each group is one write (node-postgres pipeline mode). A failed last
 * statement leaves the transaction aborted, so the `commit` behind it ends it as a rollback, and that
 * statement's error is thrown: only a transaction whose every statement succeeded commits. `written` runs
 * once the last statement has run, before its commit is answered. Elsewhere the statements run in turn,
 * `ahead` before inScope.
 */
export async function inScopePiped<F, T, A = unknown>(
  db: Db,
  scope: Scope,
  first: CompiledQuery<F>,
  body: (tx: Tx, first: F[]) => Promise<{ last?: CompiledQuery; written?: () => void; result: T }>,
  ahead?: Ahead<A>,
): Promise<T> {
  const pool = pools.get(db);
  const inRounds = rounds.get(db);
  if (inRounds) return inScopeRounds(db, inRounds, scope, first, body, ahead);
  if (!pool) {
    if (ahead) ahead.done((await db.executeQuery(ahead.query)).rows);
    return inScope(db, scope, async (tx) => {
      const { last, written, result } = await body(tx, (await tx.executeQuery(first)).rows);
      if (last) {
        await tx.executeQuery(last);
        written?.();
      }
      return result;
    });
  }
  // The statements `prepared` marked take their generic plan at once: the probe's custom plan, which
  // PostgreSQL would otherwise keep choosing for the batch's arrays of known length, costs more to make
  // than to run.
  const begin = `${beginInScope(scope)}, ${GENERIC_PLANS}`;
  const client = await pool.connect();
  // A client whose transaction may still be open, or whose pipeline failed half-way, is not lent again.
  let unclean: Error | undefined;
  try {
    const opening = await piped(client, [...(ahead ? [ahead.query] : []), begin, first]);
    const [went, began, opened] = ahead ? opening : [undefined, ...opening];
    if (went?.status === 'fulfilled') ahead!.done(went.value.rows as A[]);
    for (const r of [went, began, opened]) {
      if (r?.status === 'rejected') {
        await client.query('rollback').catch((err: Error) => (unclean = err));
        throw r.reason;
      }
    }
    let out: { last?: CompiledQuery; written?: () => void; result: T };
    try {
      out = await body(kyselyOn(client) as unknown as Tx, (opened as PromiseFulfilledResult<pg.QueryResult>).value.rows as F[]);
    } catch (err) {
      await client.query('rollback').catch((e: Error) => (unclean = e));
      throw err;
    }
    const [wrote, committed] = out.last ? await piped(client, [out.last, 'commit'], [out.written]) : [undefined, ...(await piped(client, ['commit']))];
    if (committed!.status === 'rejected') {
      unclean = committed!.reason as Error;
      throw committed!.reason;
    }
    if (wrote?.status === 'rejected') throw wrote.reason;
    return out.result;
  } finally {
    client.release(unclean);
  }
}

const BEGIN = CompiledQuery.raw('begin');
const COMMIT = CompiledQuery.raw('commit');

/** The scope of inScope, as a statement of its own with its parameters. */
const scopeQuery = (scope: Scope) =>
  CompiledQuery.raw(`select set_config('app.org_id', $1, true), set_config('app.user_id', $2, true)`, [scope.orgId ?? '', scope.userId ?? '']);

/**
 * inScopePiped on the embedded database: the same statements in the same order, on its one connection,
 * in two calls into PGlite (`ahead`, `begin`, the scope and `first` in one; the last statement and
 * `commit` in the other) instead of a call per statement, each statement still run and answered on its
 * own (PgliteRounds). `ahead` commits on its own before `begin`, as on PostgreSQL. A failed last
 * statement leaves the transaction aborted and its `commit` ends it as a rollback.
 */
async function inScopeRounds<F, T, A>(
  db: Db,
  inRounds: PgliteRounds,
  scope: Scope,
  first: CompiledQuery<F>,
  body: (tx: Tx, first: F[]) => Promise<{ last?: CompiledQuery; written?: () => void; result: T }>,
  ahead: Ahead<A> | undefined,
): Promise<T> {
  return db.connection().execute(async (conn) => {
    const rollback = () => sql`rollback`.execute(conn).catch(() => undefined);
    // `ahead` (the budgets' count, an insert from its arrays), the write, and `first` when `prepared`
    // marked it (the gateway's probe) are kept parsed (PgliteRounds); a `first` not marked is parsed each time.
    const scoped = scopeQuery(scope);
    const kept = new Set([...(ahead ? [ahead.query] : []), BEGIN, scoped, ...(preparedQueries.has(first) ? [first] : [])]);
    const opening = await inRounds.run([...(ahead ? [ahead.query] : []), BEGIN, scoped, first], kept);
    const [went, began, setScope, opened] = ahead ? opening : [undefined, ...opening];
    if (went?.status === 'fulfilled') ahead!.done(went.value.rows as A[]);
    for (const r of [went, began, setScope, opened]) {
      if (r?.status === 'rejected') {
        await rollback();
        throw r.reason;
      }
    }
    let out: { last?: CompiledQuery; written?: () => void; result: T };
    try {
      // One connection in an open transaction: what a Transaction is, less the methods that begin another.
      out = await body(conn as unknown as Tx, (opened as PromiseFulfilledResult<{ rows: unknown[] }>).value.rows as F[]);
    } catch (err) {
      await rollback();
      throw err;
    }
    const [wrote, committed] = out.last ? await inRounds.run([out.last, COMMIT], new Set([out.last, COMMIT])) : [undefined, ...(await inRounds.run([COMMIT], new Set([COMMIT])))];
    if (wrote?.status === 'fulfilled') out.written?.();
    if (committed!.status === 'rejected') {
      await rollback();
      throw committed!.reason;
    }
    if (wrote?.status === 'rejected') throw wrote.reason;
    return out.result;
  });
}
