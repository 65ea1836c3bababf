import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { startTestApp, type TestApp } from '../support/harness.js';

/**
 * inScope on PostgreSQL sends `begin` and the scope in one message, with the scope as literals: only
 * UUIDs may become literals, and the transaction behaves as one.
 */
describe('inScope', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  it('refuses a scope that is not a UUID before sending anything', async () => {
    await expect(inScope(t.database.db, { orgId: "x', true); drop table agents; --" }, async () => 1)).rejects.toThrow('a scope is a UUID');
    await expect(inScope(t.database.db, { userId: 'not-a-uuid' }, async () => 1)).rejects.toThrow('a scope is a UUID');
  });

  it('sets the scope for the transaction only, commits what succeeds and rolls back what throws', async () => {
    const org = '6f1d3c2e-8b5a-4c1e-9d2f-0a1b2c3d4e5f';
    const seen = await inScope(t.database.db, { orgId: org }, async (tx) => {
      const { rows } = await sql<{ org: string }>`select current_setting('app.org_id') as org`.execute(tx);
      return rows[0]!.org;
    });
    expect(seen).toBe(org);
    const after = await sql<{ org: string | null }>`select current_setting('app.org_id', true) as org`.execute(t.database.db);
    expect(after.rows[0]!.org ?? '').toBe('');

    const key = `scope-test-${Date.now()}`;
    const count = async () =>
      Number((await sql<{ n: string }>`select count(*) as n from rate_limit_buckets where key = ${key}`.execute(t.database.db)).rows[0]!.n);
    await expect(
      inScope(t.database.db, {}, async (tx) => {
        await sql`insert into rate_limit_buckets (key, window_start, count) values (${key}, 0, 1)`.execute(tx);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await count()).toBe(0);
    await inScope(t.database.db, {}, (tx) => sql`insert into rate_limit_buckets (key, window_start, count) values (${key}, 0, 1)`.execute(tx));
    expect(await count()).toBe(1);
  });
});
