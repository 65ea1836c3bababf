import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { inScope, openDatabase, type Database } from '../../api/db/database.js';
import { inScopesPiped, SharedRollback, SharedTransactions, type ScopedPart } from '../../api/db/shared-transaction.js';
import { onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Several organisations' parts in one transaction (api/db/shared-transaction.ts, D36): each part's
 * statements run in its own organisation's scope, all commit together, and a failure anywhere rolls back
 * every part, the one that failed answered with its error and the others with SharedRollback. On one
 * connection (a pool of one), so each transaction reuses the connection the one before it used.
 */
describe('one transaction for several organisations', () => {
  let t: TestApp;
  let single: Database;
  const orgs: string[] = [];

  type Seen = { org: string; tx: string };
  const names = () =>
    Promise.all(orgs.map((orgId) => inScope(t.database.db, { orgId }, async (tx) => (await sql<{ name: string }>`select name from organisations where id = ${orgId}`.execute(tx)).rows[0]?.name)));
  const bucketCount = async (key: string) =>
    Number((await sql<{ n: number }>`select count(*)::int as n from rate_limit_buckets where key = ${key}`.execute(single.db)).rows[0]!.n);

  /**
   * A part that reads its scope and transaction first, reads its scope again between (after the other
   * parts' scopes were set), renames its organisation between and again last, and tries to rename every
   * other organisation (which row-level security keeps from it). `fail` makes one of its steps fail.
   */
  function part(orgId: string, seen: Map<string, string[]>, fail?: 'first' | 'between' | 'last'): ScopedPart<Seen, string, { key: string }> {
    const log = (s: string) => seen.set(orgId, [...(seen.get(orgId) ?? []), s]);
    return {
      orgId,
      first: (fail === 'first'
        ? sql<Seen>`select 1 / 0 as org, '' as tx`
        : sql<Seen>`select current_setting('app.org_id', true) as org, txid_current()::text as tx`
      ).compile(single.db),
      body: async (tx, [first]) => {
        log(`first ${first!.org}`);
        const again = await sql<{ org: string }>`select current_setting('app.org_id', true) as org`.execute(tx);
        log(`between ${again.rows[0]!.org}`);
        if (fail === 'between') throw new Error(`refused between for ${orgId}`);
        await sql`update organisations set name = ${`Shared ${orgId.slice(0, 8)}`} where id = ${orgId}`.execute(tx);
        const others = await sql`update organisations set name = 'Taken' where id <> ${orgId}`.execute(tx);
        log(`others ${others.numAffectedRows}`);
        return {
          last: (fail === 'last' ? sql`select 1 / 0` : sql`update organisations set name = name || ' two' where id = ${orgId}`).compile(single.db),
          written: () => log('written'),
          result: first!.tx,
        };
      },
      ahead: {
        query: sql<{ key: string }>`insert into rate_limit_buckets (key, window_start, count) values (${`shared-${orgId}`}, 0, 1)
          on conflict (key) do update set count = rate_limit_buckets.count + 1 returning key`.compile(single.db),
        done: () => log('ahead'),
      },
    };
  }

  beforeAll(async () => {
    t = await startTestApp();
    for (const name of ['Shared A', 'Shared B', 'Shared C']) orgs.push((await onboardAdmin(t.app, name)).tenant.id);
    single = await openDatabase(loadConfig({ DATABASE_URL: t.runtimeUrl, DATABASE_POOL_MAX: '1', LOG_LEVEL: 'warn' }));
  });
  afterAll(async () => {
    await single?.close();
    await t?.close();
  });

  it('runs each part in its own scope, in one transaction, and commits them together', async () => {
    const seen = new Map<string, string[]>();
    // Given out of the organisations' order: answered in the order given.
    const given = [orgs[2]!, orgs[0]!, orgs[1]!];
    const results = await inScopesPiped(single.db, given.map((o) => part(o, seen)));
    expect(results.every((r) => r.status === 'fulfilled')).toBe(true);
    const txids = results.map((r) => (r as PromiseFulfilledResult<string>).value);
    expect(new Set(txids).size).toBe(1);
    for (const o of orgs) expect(seen.get(o)).toEqual(['ahead', `first ${o}`, `between ${o}`, 'others 0', 'written']);
    expect(await names()).toEqual(orgs.map((o) => `Shared ${o.slice(0, 8)} two`));
    for (const o of orgs) expect(await bucketCount(`shared-${o}`)).toBe(1);
    // The one connection went back outside any transaction and scope.
    const after = await sql<{ org: string; in_transaction: boolean }>`
      select current_setting('app.org_id', true) as org, now() <> statement_timestamp() as in_transaction`.execute(single.db);
    expect(after.rows).toEqual([{ org: '', in_transaction: false }]);
  });

  for (const step of ['first', 'between', 'last'] as const) {
    it(`rolls every part back when one part's ${step} statement fails, and keeps what went ahead`, async () => {
      const before = await names();
      const seen = new Map<string, string[]>();
      const results = await inScopesPiped(single.db, orgs.map((o, i) => part(o, seen, i === 1 ? step : undefined)));
      expect(results[1]).toMatchObject({ status: 'rejected', reason: expect.objectContaining({ message: expect.stringMatching(/division by zero|refused between/) }) });
      for (const i of [0, 2]) expect((results[i] as PromiseRejectedResult).reason).toBeInstanceOf(SharedRollback);
      expect(await names()).toEqual(before);
      // `written` follows a part's last statement: never the failed one's (a part whose last ran before it
      // was told so, and rolled back with it all the same).
      expect(seen.get(orgs[1]!)).not.toContain('written');
      // Each statement ahead committed on its own.
      for (const o of orgs) expect(seen.get(o)?.[0]).toBe('ahead');
      expect((await sql<{ n: number }>`select 1 as n`.execute(single.db)).rows).toEqual([{ n: 1 }]);
    });
  }

  it('gathers the parts that start in one turn of the event loop into one transaction, and runs a lone part on its own', async () => {
    const carried: number[] = [];
    const alone: string[] = [];
    const sharing = new SharedTransactions<Seen, string, { key: string }>(
      single.db,
      async (p) => {
        alone.push(p.orgId);
        return 'alone';
      },
      (parts) => carried.push(parts),
    );
    const seen = new Map<string, string[]>();
    const together = await Promise.all(orgs.map((o) => sharing.run(part(o, seen))));
    expect(new Set(together).size).toBe(1);
    expect(together[0]).not.toBe('alone');
    expect(await sharing.run(part(orgs[0]!, seen))).toBe('alone');
    expect(alone).toEqual([orgs[0]]);
    expect(carried).toEqual([3, 1]);
  });
});
