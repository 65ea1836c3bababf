import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { openDatabase, readInScope, type Database } from '../../api/db/database.js';
import { onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * readInScope (api/db/database.ts): a signed-in read such as GET /users sends `begin` with the
 * organisation's scope, its query and `commit` in one round trip. Row-level security still decides what
 * the query sees, and a read that fails leaves its connection as it found it. On one connection (a pool
 * of one), so each read below reuses the connection the one before it used.
 */
describe('reads in one round trip', () => {
  let t: TestApp;
  let single: Database;
  let a: Awaited<ReturnType<typeof onboardAdmin>>;
  let b: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp();
    a = await onboardAdmin(t.app, 'Alpha');
    b = await onboardAdmin(t.app, 'Beta');
    single = await openDatabase(loadConfig({ DATABASE_URL: t.runtimeUrl, DATABASE_POOL_MAX: '1', LOG_LEVEL: 'warn' }));
  });
  afterAll(async () => {
    await single?.close();
    await t?.close();
  });

  const memberships = () => single.db.selectFrom('memberships').select(['org_id', 'user_id']);

  it("sees only the scope's organisation, even when the query names none", async () => {
    const ofA = await readInScope(single.db, { orgId: a.tenant.id }, memberships());
    expect(ofA).toEqual([{ org_id: a.tenant.id, user_id: a.userId }]);
    const ofB = await readInScope(single.db, { orgId: b.tenant.id }, memberships());
    expect(ofB).toEqual([{ org_id: b.tenant.id, user_id: b.userId }]);
    expect(await readInScope(single.db, {}, memberships())).toEqual([]);
  });

  it('a failed read answers its error and leaves the connection outside any transaction and scope', async () => {
    await expect(readInScope(single.db, { orgId: a.tenant.id }, single.db.selectNoFrom(sql<number>`1 / 0`.as('x')))).rejects.toThrow(
      /division by zero/,
    );
    // The same connection: the next read has its own scope, and nothing of the failed one is left.
    const [state] = await readInScope(
      single.db,
      { orgId: b.tenant.id },
      single.db.selectNoFrom([sql<string>`current_setting('app.org_id', true)`.as('org'), sql<string>`pg_backend_pid()::text`.as('pid')]),
    );
    expect(state!.org).toBe(b.tenant.id);
    const after = await sql<{ org: string; pid: string; in_transaction: boolean }>`
      select current_setting('app.org_id', true) as org, pg_backend_pid()::text as pid,
             now() <> statement_timestamp() as in_transaction`.execute(single.db);
    expect(after.rows).toEqual([{ org: '', pid: state!.pid, in_transaction: false }]);
    expect(await readInScope(single.db, {}, memberships())).toEqual([]);
  });

  it('a scope that is not a UUID is refused before anything is sent', async () => {
    await expect(readInScope(single.db, { orgId: "x' or true --" }, memberships())).rejects.toThrow(/a scope is a UUID/);
  });
});
