import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { inScope, inScopePiped, openDatabase, preparedShape, type Database } from '../../api/db/database.js';
import { onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * inScopePiped (api/db/database.ts), the gateway batch's transaction: a statement ahead of `begin`, the
 * first statement with `begin` and the last with `commit`, each group in one write. Only a transaction
 * whose every statement succeeded commits; the statement ahead commits on its own. On one connection (a
 * pool of one), so each transaction reuses the connection the one before it used.
 */
describe('transactions sent in two round trips', () => {
  let t: TestApp;
  let single: Database;
  let orgId: string;

  /** A row of the unlogged rate-limit table (no row-level security) and of a scoped table, by key. */
  const bucket = (key: string) => sql<{ key: string }>`insert into rate_limit_buckets (key, window_start, count) values (${key}, 0, 1) returning key`.compile(single.db);
  const bucketCount = async (key: string) =>
    Number((await sql<{ n: number }>`select count(*)::int as n from rate_limit_buckets where key = ${key}`.execute(single.db)).rows[0]!.n);
  const renamed = () =>
    inScope(t.database.db, { orgId }, async (tx) => (await sql<{ name: string }>`select name from organisations where id = ${orgId}`.execute(tx)).rows[0]?.name);

  beforeAll(async () => {
    t = await startTestApp();
    orgId = (await onboardAdmin(t.app, 'Piped')).tenant.id;
    single = await openDatabase(loadConfig({ DATABASE_URL: t.runtimeUrl, DATABASE_POOL_MAX: '1', LOG_LEVEL: 'warn' }));
  });
  afterAll(async () => {
    await single?.close();
    await t?.close();
  });

  it('commits the first, the statements between and the last together, in the scope', async () => {
    const seen: string[] = [];
    const result = await inScopePiped(
      single.db,
      { orgId },
      sql<{ org: string }>`select current_setting('app.org_id', true) as org`.compile(single.db),
      async (tx, [first]) => {
        seen.push(first!.org);
        await sql`update organisations set name = 'Piped one' where id = ${orgId}`.execute(tx);
        return { last: sql`update organisations set name = name || ' two' where id = ${orgId}`.compile(single.db), written: () => seen.push('written'), result: 'done' };
      },
      { query: bucket('piped-ahead-1'), done: (rows) => seen.push(rows[0]!.key) },
    );
    expect(result).toBe('done');
    expect(seen).toEqual(['piped-ahead-1', orgId, 'written']);
    expect(await renamed()).toBe('Piped one two');
    expect(await bucketCount('piped-ahead-1')).toBe(1);
  });

  it('rolls everything back when the last statement fails, and keeps what went ahead', async () => {
    let written = false;
    await expect(
      inScopePiped(
        single.db,
        { orgId },
        sql`select 1`.compile(single.db),
        async (tx) => {
          await sql`update organisations set name = 'Never' where id = ${orgId}`.execute(tx);
          return { last: sql`select 1 / 0`.compile(single.db), written: () => (written = true), result: undefined };
        },
        { query: bucket('piped-ahead-2'), done: () => undefined },
      ),
    ).rejects.toThrow(/division by zero/);
    expect(written).toBe(false);
    expect(await renamed()).toBe('Piped one two');
    // The statement ahead committed by itself.
    expect(await bucketCount('piped-ahead-2')).toBe(1);
    // The one connection went back outside any transaction and scope.
    const after = await sql<{ org: string; in_transaction: boolean }>`
      select current_setting('app.org_id', true) as org, now() <> statement_timestamp() as in_transaction`.execute(single.db);
    expect(after.rows).toEqual([{ org: '', in_transaction: false }]);
  });

  it('rolls back when the statements between fail, and when the first fails', async () => {
    await expect(
      inScopePiped(single.db, { orgId }, sql`select 1`.compile(single.db), async (tx) => {
        await sql`update organisations set name = 'Never' where id = ${orgId}`.execute(tx);
        throw new Error('refused between');
      }),
    ).rejects.toThrow('refused between');
    await expect(
      inScopePiped(single.db, { orgId }, sql`select 1 / 0`.compile(single.db), async () => ({ result: undefined })),
    ).rejects.toThrow(/division by zero/);
    expect(await renamed()).toBe('Piped one two');
    expect((await sql<{ n: number }>`select 1 as n`.execute(single.db)).rows).toEqual([{ n: 1 }]);
  });

  it("builds a statement once per shape and runs it with each call's own values, its own parameters kept", async () => {
    let built = 0;
    const shaped = (n: number, word: string) =>
      preparedShape('test echo', [n, word], ([number, text]) => {
        built++;
        // `7` is the statement's own parameter, between the caller's two.
        return sql<{ n: number; seven: number; word: string }>`select ${number}::int as n, ${7}::int as seven, ${text}::text as word`.compile(single.db);
      });
    const one = shaped(1, 'one');
    const two = shaped(2, 'two');
    expect(built).toBe(1);
    expect(two.sql).toBe(one.sql);
    expect([one.parameters, two.parameters]).toEqual([
      [1, 7, 'one'],
      [2, 7, 'two'],
    ]);
    // Sent as the first statement of a piped transaction, where it is a named prepared statement, twice on the one connection.
    for (const [query, expected] of [
      [one, { n: 1, seven: 7, word: 'one' }],
      [two, { n: 2, seven: 7, word: 'two' }],
    ] as const) {
      const rows = await inScopePiped(single.db, { orgId }, query, async (_tx, first) => ({ result: first }));
      expect(rows).toEqual([expected]);
    }
    const { rows: kept } = await sql<{ statement: string }>`select statement from pg_prepared_statements`.execute(single.db);
    expect(kept.filter((r) => r.statement === one.sql)).toHaveLength(1);
  });
});
