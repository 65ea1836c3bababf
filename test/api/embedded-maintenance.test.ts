import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { inScope, openDatabase, type Database, type Db } from '../../api/db/database.js';
import { createLogger } from '../../api/platform/logger.js';
import { agentToken, api, freshDatabase, onboardAdmin, TestClock } from '../support/harness.js';

/**
 * The embedded database's own autovacuum (api/db/embedded-maintenance.ts, docs/decisions.md D1): PGlite runs no
 * autovacuum, so the API vacuums and analyses, by PostgreSQL's autovacuum thresholds, the tables its hot path
 * updates; never inside a request's transaction; as a role allowed to, handing the connection back as the
 * runtime role; and nothing runs once the database is closed.
 */

/** A logger as the app's (pino), at debug, whose lines the test reads. */
function capturedLog() {
  const lines: Array<{ level: number; msg: string; [k: string]: unknown }> = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
  });
  return { log: createLogger('debug', stream), lines };
}

const HOUR = 3_600_000;

interface TableStats {
  n_dead_tup: number;
  n_mod_since_analyze: number;
  last_vacuum: Date | null;
  last_analyze: Date | null;
  reltuples: number;
  columns_with_stats: number;
  bytes: number;
}

/** The table's counts as the statistics have them now (this backend's pending counts flushed first). */
async function stats(db: Db, table: string): Promise<TableStats> {
  await sql`select pg_stat_force_next_flush()`.execute(db);
  const { rows } = await sql<TableStats>`
    select s.n_dead_tup::int, s.n_mod_since_analyze::int, s.last_vacuum, s.last_analyze, c.reltuples::float8 as reltuples,
      (select count(*)::int from pg_stats p where p.schemaname = 'public' and p.tablename = ${table}) as columns_with_stats,
      pg_relation_size(c.oid)::int as bytes
    from pg_stat_user_tables s join pg_class c on c.oid = s.relid
    where s.schemaname = 'public' and s.relname = ${table}`.execute(db);
  return rows[0]!;
}

describe('the embedded database maintenance', () => {
  let database: Database;
  const { log, lines } = capturedLog();
  const ROWS = 400;
  /** Updates every bucket this test made, `times` times: each update leaves the row's old version dead. */
  const updateAll = async (times = 1) => {
    for (let i = 0; i < times; i++) await sql`update rate_limit_buckets set count = count + 1 where key like 'mx-%'`.execute(database.db);
  };
  const run = () => database.maintenance!.run();

  beforeAll(async () => {
    database = await openDatabase(loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn' }));
    // Started with its first pass an hour away: the passes here are the test's own.
    database.maintenance!.start(log, { firstMs: HOUR, periodMs: HOUR });
    // What migrations left due (the catalogs), out of the way.
    await run();
    await sql`insert into rate_limit_buckets (key, window_start, count) select 'mx-' || g, 0, 0 from generate_series(1, ${ROWS}) g`.execute(database.db);
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  it('vacuums away the dead versions of a hot table, gives the planner its statistics, and hands the connection back as the runtime role', async () => {
    await updateAll(2);
    const before = await stats(database.db, 'rate_limit_buckets');
    // Past PostgreSQL's thresholds for a table never vacuumed (reltuples -1, counted as 0): 50 dead, 50 changed.
    expect(before.n_dead_tup).toBeGreaterThan(50);
    expect(before).toMatchObject({ last_vacuum: null, last_analyze: null, reltuples: -1, columns_with_stats: 0 });

    const report = await run();
    expect(report.failed).toEqual([]);
    expect(report.done).toContainEqual({ table: 'public.rate_limit_buckets', vacuum: true, analyze: true });
    const after = await stats(database.db, 'rate_limit_buckets');
    expect(after.n_dead_tup).toBe(0);
    expect(after.n_mod_since_analyze).toBe(0);
    expect(after.last_vacuum).toBeInstanceOf(Date);
    expect(after.last_analyze).toBeInstanceOf(Date);
    expect(after.reltuples).toBe(ROWS);
    expect(after.columns_with_stats).toBe(3);
    // One line at info says what was done.
    const info = lines.filter((l) => l.msg === 'embedded database maintenance');
    expect(info.at(-1)).toMatchObject({ level: 30, vacuumed: expect.arrayContaining(['public.rate_limit_buckets']), analyzed: expect.arrayContaining(['public.rate_limit_buckets']) });

    // The requests that follow are the runtime role's, under row-level security, as before.
    const { rows } = await sql<{ role: string }>`select current_user as role`.execute(database.db);
    expect(rows).toEqual([{ role: 'tollgate_app' }]);

    // Updated and maintained again and again, the table reuses the space vacuum freed instead of growing.
    for (let i = 0; i < 4; i++) {
      await updateAll(2);
      expect((await run()).done).toContainEqual({ table: 'public.rate_limit_buckets', vacuum: true, analyze: true });
    }
    expect((await stats(database.db, 'rate_limit_buckets')).bytes).toBe(after.bytes);
  });

  it('leaves a table under the thresholds alone, and analyses one past the analyze threshold only', async () => {
    await run();
    const settled = await stats(database.db, 'rate_limit_buckets');
    expect(settled.reltuples).toBe(ROWS);
    // 40 changed rows: under 50 + 0.2 × 400 = 130 dead and 50 + 0.1 × 400 = 90 changed.
    await sql`update rate_limit_buckets set count = count + 1 where key in (select 'mx-' || g from generate_series(1, 40) g)`.execute(database.db);
    const report = await run();
    expect(report.done.map((d) => d.table)).not.toContain('public.rate_limit_buckets');
    const untouched = await stats(database.db, 'rate_limit_buckets');
    expect(untouched).toMatchObject({ n_mod_since_analyze: 40, last_vacuum: settled.last_vacuum, last_analyze: settled.last_analyze });

    // 60 more: 100 changed (past 90), at most 100 dead (under 130).
    await sql`update rate_limit_buckets set count = count + 1 where key in (select 'mx-' || g from generate_series(41, 100) g)`.execute(database.db);
    expect((await run()).done).toContainEqual({ table: 'public.rate_limit_buckets', vacuum: false, analyze: true });
    const analysed = await stats(database.db, 'rate_limit_buckets');
    expect(analysed.last_vacuum).toEqual(settled.last_vacuum);
    expect(analysed.last_analyze!.getTime()).toBeGreaterThan(settled.last_analyze!.getTime());
  });

  it('waits for a request’s open transaction, then runs, with no error on either side', async () => {
    await updateAll(2);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let opened!: () => void;
    const isOpen = new Promise<void>((resolve) => (opened = resolve));
    // A request's transaction on the one connection, held open across a wait (as a request awaiting its
    // group commit or an outbound call would).
    const request = inScope(database.db, {}, async (tx) => {
      await sql`update rate_limit_buckets set count = 0 where key = 'mx-1'`.execute(tx);
      opened();
      await released;
      const { rows } = await sql<{ n: number }>`select count::int as n from rate_limit_buckets where key = 'mx-1'`.execute(tx);
      return rows[0]!.n;
    });
    await isOpen;
    let settled = false;
    const pass = run().finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Nothing of the pass has run: it waits for the connection the transaction holds.
    expect(settled).toBe(false);
    release();
    expect(await request).toBe(0);
    const report = await pass;
    expect(report.failed).toEqual([]);
    expect(report.done).toContainEqual({ table: 'public.rate_limit_buckets', vacuum: true, analyze: true });
    expect((await stats(database.db, 'rate_limit_buckets')).n_dead_tup).toBe(0);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('logs a table that fails, goes on with the others, and hands the connection back as the runtime role', async () => {
    /** The schema owner's statements, on the one connection in its turn (the embedded session's user is the superuser). */
    const asOwner = (...texts: string[]) =>
      database.db.connection().execute(async (conn) => {
        await sql`reset role`.execute(conn);
        try {
          for (const text of texts) await sql.raw(text).execute(conn);
        } finally {
          await sql`set role tollgate_app`.execute(conn);
        }
      });
    await asOwner('create table mx_gone (n int)', 'insert into mx_gone select generate_series(1, 100)');
    await updateAll(2);
    // The pass reads what is due while a request holds the connection; the table goes before its turn comes.
    let release!: () => void;
    const request = inScope(database.db, {}, () => new Promise<void>((resolve) => (release = resolve)));
    await new Promise((resolve) => setTimeout(resolve, 20));
    const pass = run();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const dropped = asOwner('drop table mx_gone');
    release();
    await request;
    await dropped;
    const report = await pass;
    // 100 rows inserted: past the analyze threshold (50), under the vacuum's for inserts (1,000).
    expect(report.failed).toEqual([{ table: 'public.mx_gone', vacuum: false, analyze: true, error: expect.stringContaining('does not exist') }]);
    expect(report.done).toContainEqual({ table: 'public.rate_limit_buckets', vacuum: true, analyze: true });
    expect(lines.filter((l) => l.level === 40).at(-1)).toMatchObject({ msg: 'embedded database maintenance: some tables failed', failed: [{ table: 'public.mx_gone' }] });
    const { rows } = await sql<{ role: string }>`select current_user as role`.execute(database.db);
    expect(rows).toEqual([{ role: 'tollgate_app' }]);
    lines.length = 0;
  });
});

describe('the embedded database maintenance under real decisions', () => {
  it('gives the decision path’s tables their statistics after decisions through the API, and decisions go on', async () => {
    const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn', RATE_LIMIT_GATEWAY_PER_MINUTE: '100000' });
    const database = await openDatabase(config);
    const app = await buildApp({ config, db: database.db, clock: new TestClock(), logStream: new PassThrough() });
    try {
      await app.ready();
      const { log } = capturedLog();
      database.maintenance!.start(log, { firstMs: HOUR, periodMs: HOUR });
      const admin = await onboardAdmin(app, 'Maintained');
      const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
      const agent = (await admin.client.post(api('/agents'), { name: 'Maintained agent' })).json();
      const toolId = tools.find((t) => t.tool_key === 'crm.lookup_customer')!.id;
      await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'] });
      const token = await agentToken(app, admin.client, agent.id);
      const decide = async (key: string) => {
        const res = await app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${token}`, 'idempotency-key': key },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } },
        });
        expect(res.statusCode, res.body).toBe(200);
      };
      await database.maintenance!.run();
      // Each decision updates its agent's budget counter, its session's facts and the chain's head, and adds an action and its evidence.
      for (let i = 0; i < 100; i++) await decide(`maintained-${i}`);
      const hot = ['action_requests', 'agent_sessions', 'evidence_heads', 'evidence_records', 'rate_limit_buckets'];
      for (const table of hot) expect((await stats(database.db, table)).last_analyze, table).toBeNull();

      const report = await database.maintenance!.run();
      expect(report.failed).toEqual([]);
      for (const table of hot) {
        const after = await stats(database.db, table);
        expect(after.last_analyze, table).toBeInstanceOf(Date);
        // pg_stats hides the tables under row-level security from the runtime role; reltuples is the planner's row count, -1 before.
        expect(after.reltuples, table).toBeGreaterThanOrEqual(1);
        expect(after.n_mod_since_analyze, table).toBe(0);
      }
      expect((await stats(database.db, 'action_requests')).reltuples).toBe(100);
      // The decision path runs on, its prepared statements planned again for the new statistics.
      for (let i = 100; i < 110; i++) await decide(`maintained-${i}`);
      expect((await admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true });
    } finally {
      await app.close();
      await database.close();
    }
  }, 60_000);
});

describe('the embedded database maintenance timer', () => {
  it('never keeps the process alive, and never fires once the database is closed', async () => {
    const database = await openDatabase(loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn' }));
    const { log, lines } = capturedLog();
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timeouts();
    database.maintenance!.start(log, { firstMs: 20, periodMs: 20 });
    expect(timeouts()).toBe(before);
    const passes = () => lines.filter((l) => String(l.msg).startsWith('embedded database maintenance')).length;
    await expect.poll(passes).toBeGreaterThanOrEqual(2);
    await database.close();
    const closedAt = passes();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(passes()).toBe(closedAt);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
  });

  it('does nothing on PostgreSQL, whose autovacuum does it', async () => {
    const fresh = await freshDatabase();
    const database = await openDatabase(loadConfig({ DATABASE_URL: fresh.runtimeUrl, DATABASE_POOL_MAX: '1', LOG_LEVEL: 'warn' }));
    expect(database.kind).toBe('postgres');
    expect(database.maintenance).toBeUndefined();
    await database.close();
    await fresh.drop();
  });
});
