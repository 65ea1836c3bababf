import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { assertRuntimeRole, openDatabase } from '../../api/db/database.js';
import type { DB } from '../../api/db/schema.js';
import { RUNTIME_ROLE, withDatabase } from '../support/pg-urls.js';
import { addMember, api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Row-level security on real PostgreSQL, read with a raw connection as the runtime role the API uses:
 * no organisation set shows no rows; organisation A set shows A's rows and never
 * B's; a row for B cannot be written while A is set; the runtime role owns nothing and cannot bypass
 * row-level security, and the API refuses to run as the schema owner.
 */

/** The organisation-owned tables of the foundation, and the column naming the organisation. */
const TABLES = {
  organisations: 'id',
  memberships: 'org_id',
  audit_events: 'org_id',
  notifications: 'org_id',
} as const;
type Table = keyof typeof TABLES;
const TABLE_NAMES = Object.keys(TABLES) as Table[];

type Org = Awaited<ReturnType<typeof onboardAdmin>> & { memberId: string };

describe('row-level security as the runtime role', () => {
  let t: TestApp;
  let runtime: pg.Client;
  let owner: pg.Client;
  let a: Org;
  let b: Org;
  /** What each organisation holds, counted as the schema owner (who is not subject to the policies). */
  const truth: Record<string, Record<Table, number>> = {};

  async function makeOrg(name: string): Promise<Org> {
    const admin = await onboardAdmin(t.app, name);
    const member = await addMember(t.app, admin.client, ['viewer']);
    // A write that is audited, on top of onboarding and adding the member.
    const res = await admin.client.patch(api('/settings'), { approval_ttl_seconds: 600 });
    expect(res.statusCode).toBe(200);
    return { ...admin, memberId: member.userId };
  }

  beforeAll(async () => {
    t = await startTestApp();
    a = await makeOrg('Organisation A');
    b = await makeOrg('Organisation B');
    runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
    owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
    for (const org of [a, b]) {
      truth[org.tenant.id] = {} as Record<Table, number>;
      for (const table of TABLE_NAMES) {
        const { rows } = await owner.query(`select count(*)::int as n from ${table} where ${TABLES[table]} = $1`, [
          org.tenant.id,
        ]);
        truth[org.tenant.id]![table] = rows[0].n;
      }
    }
  });

  afterAll(async () => {
    await runtime?.end();
    await owner?.end();
    await t?.close();
  });

  /** Runs fn in a transaction of the runtime connection, with app.org_id set (transaction-local) when given. */
  async function inTx<T>(orgId: string | null, fn: () => Promise<T>): Promise<T> {
    await runtime.query('begin');
    try {
      if (orgId !== null) await runtime.query(`select set_config('app.org_id', $1, true)`, [orgId]);
      return await fn();
    } finally {
      await runtime.query('rollback');
    }
  }

  const orgsSeenIn = async (table: Table): Promise<string[]> =>
    (await runtime.query(`select ${TABLES[table]}::text as org from ${table}`)).rows.map((r: { org: string }) => r.org);

  it('the API created rows for both organisations in every table (checked as the owner)', () => {
    for (const org of [a, b]) {
      expect(truth[org.tenant.id]!.organisations).toBe(1);
      // The administrator and the member.
      expect(truth[org.tenant.id]!.memberships).toBe(2);
      // Onboarding, adding the member and changing the settings are audited.
      expect(truth[org.tenant.id]!.audit_events).toBeGreaterThanOrEqual(3);
      // The member was notified of being added.
      expect(truth[org.tenant.id]!.notifications).toBeGreaterThanOrEqual(1);
    }
  });

  it.each(TABLE_NAMES)('%s: no rows without app.org_id set, outside any transaction', async (table) => {
    expect(await orgsSeenIn(table)).toEqual([]);
  });

  it.each(TABLE_NAMES)('%s: no rows inside a transaction with app.org_id empty or unset', async (table) => {
    expect(await inTx(null, () => orgsSeenIn(table))).toEqual([]);
    expect(await inTx('', () => orgsSeenIn(table))).toEqual([]);
  });

  it.each(TABLE_NAMES)("%s: exactly A's rows with A set, never B's", async (table) => {
    const seen = await inTx(a.tenant.id, () => orgsSeenIn(table));
    expect(seen).toHaveLength(truth[a.tenant.id]![table]);
    expect(seen).not.toContain(b.tenant.id);
    expect(new Set(seen)).toEqual(new Set([a.tenant.id]));
  });

  it.each(TABLE_NAMES)("%s: exactly B's rows with B set, never A's", async (table) => {
    const seen = await inTx(b.tenant.id, () => orgsSeenIn(table));
    expect(seen).toHaveLength(truth[b.tenant.id]![table]);
    expect(new Set(seen)).toEqual(new Set([b.tenant.id]));
  });

  it("B's rows stay invisible with A set even when asked for by id", async () => {
    const seen = await inTx(a.tenant.id, async () => ({
      org: (await runtime.query('select id from organisations where id = $1', [b.tenant.id])).rowCount,
      members: (await runtime.query('select 1 from memberships where org_id = $1', [b.tenant.id])).rowCount,
      audit: (await runtime.query('select 1 from audit_events where org_id = $1', [b.tenant.id])).rowCount,
      notes: (await runtime.query('select 1 from notifications where org_id = $1', [b.tenant.id])).rowCount,
    }));
    expect(seen).toEqual({ org: 0, members: 0, audit: 0, notes: 0 });
  });

  it('the organisation is set per transaction: it does not outlive the transaction that set it', async () => {
    await runtime.query('begin');
    await runtime.query(`select set_config('app.org_id', $1, true)`, [a.tenant.id]);
    expect((await runtime.query('select 1 from memberships')).rowCount).toBe(truth[a.tenant.id]!.memberships);
    await runtime.query('commit');
    expect((await runtime.query('select 1 from memberships')).rowCount).toBe(0);
    expect((await runtime.query('select 1 from organisations')).rowCount).toBe(0);
  });

  describe("writing a row for B while A is set is rejected by the policy", () => {
    const rls = /row-level security/;

    it('notifications', async () => {
      await expect(
        inTx(a.tenant.id, () =>
          runtime.query(
            `insert into notifications (id, org_id, user_id, kind, title) values (gen_random_uuid(), $1, $2, 'x', 'x')`,
            [b.tenant.id, b.userId],
          ),
        ),
      ).rejects.toThrow(rls);
    });

    it('audit_events', async () => {
      await expect(
        inTx(a.tenant.id, () =>
          runtime.query(
            `insert into audit_events (id, org_id, actor_type, action, outcome, correlation_id)
             values (gen_random_uuid(), $1, 'person', 'forged', 'success', 'rls-test-forged')`,
            [b.tenant.id],
          ),
        ),
      ).rejects.toThrow(rls);
    });

    it('memberships', async () => {
      await expect(
        inTx(a.tenant.id, () =>
          runtime.query(`insert into memberships (org_id, user_id, display_name, roles) values ($1, $2, 'Intruder', '{org_admin}')`, [
            b.tenant.id,
            a.userId,
          ]),
        ),
      ).rejects.toThrow(rls);
    });

    it('organisations', async () => {
      await expect(
        inTx(a.tenant.id, () =>
          runtime.query(
            `insert into organisations (id, slug, name, primary_region) values (gen_random_uuid(), 'rls-forged', 'Forged', 'eu-west')`,
          ),
        ),
      ).rejects.toThrow(rls);
    });

    it('moving one of A\'s rows to B', async () => {
      await expect(
        inTx(a.tenant.id, () => runtime.query(`update notifications set org_id = $1 where org_id = $2`, [b.tenant.id, a.tenant.id])),
      ).rejects.toThrow(rls);
    });

    it("updating B's rows touches nothing", async () => {
      const r = await inTx(a.tenant.id, async () => ({
        org: (await runtime.query(`update organisations set name = 'Taken' where id = $1`, [b.tenant.id])).rowCount,
        notes: (await runtime.query(`update notifications set title = 'Taken' where org_id = $1`, [b.tenant.id])).rowCount,
      }));
      expect(r).toEqual({ org: 0, notes: 0 });
    });

    it('writing without any organisation set', async () => {
      await expect(
        inTx(null, () =>
          runtime.query(
            `insert into notifications (id, org_id, user_id, kind, title) values (gen_random_uuid(), $1, $2, 'x', 'x')`,
            [a.tenant.id, a.userId],
          ),
        ),
      ).rejects.toThrow(rls);
    });
  });

  it('every table with an org_id column has row-level security enabled with a policy', async () => {
    const { rows } = await owner.query(
      `select c.relname as table, c.relrowsecurity as rls,
              (select count(*)::int from pg_policies p where p.schemaname = 'public' and p.tablename = c.relname) as policies
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = 'public' and c.relkind = 'r'
         and (c.relname = 'organisations' or exists (
           select 1 from information_schema.columns col
           where col.table_schema = 'public' and col.table_name = c.relname and col.column_name = 'org_id'))
       order by 1`,
    );
    const names = rows.map((r: { table: string }) => r.table);
    for (const table of TABLE_NAMES) expect(names).toContain(table);
    // sessions carries the person's current organisation but belongs to the person, not the organisation:
    // the runtime role reads it only through the session_principal function.
    const unprotected = rows.filter((r: { table: string; rls: boolean; policies: number }) => r.table !== 'sessions' && (!r.rls || r.policies === 0));
    expect(unprotected).toEqual([]);
  });

  describe('the runtime role', () => {
    it('is the role the API connects as, and is neither superuser nor allowed to bypass row-level security', async () => {
      const { rows } = await runtime.query(
        `select current_user as role, rolsuper, rolbypassrls from pg_roles where rolname = current_user`,
      );
      expect(rows).toEqual([{ role: RUNTIME_ROLE, rolsuper: false, rolbypassrls: false }]);
    });

    it('owns no table (pg_tables) and no other object of the schema', async () => {
      const tables = await runtime.query(`select tablename from pg_tables where tableowner = current_user`);
      expect(tables.rows).toEqual([]);
      const relations = await runtime.query(
        `select c.relname from pg_class c join pg_roles r on r.oid = c.relowner where r.rolname = current_user`,
      );
      expect(relations.rows).toEqual([]);
      const functions = await runtime.query(
        `select p.proname from pg_proc p join pg_roles r on r.oid = p.proowner where r.rolname = current_user`,
      );
      expect(functions.rows).toEqual([]);
      const db = await runtime.query(
        `select d.datname from pg_database d join pg_roles r on r.oid = d.datdba
         where d.datname = current_database() and r.rolname = current_user`,
      );
      expect(db.rows).toEqual([]);
    });

    it('the organisation-owned tables are owned by another role', async () => {
      const { rows } = await runtime.query(
        `select tablename, tableowner from pg_tables where schemaname = 'public' and tablename = any($1)`,
        [TABLE_NAMES],
      );
      expect(rows).toHaveLength(TABLE_NAMES.length);
      for (const r of rows) expect(r.tableowner).not.toBe(RUNTIME_ROLE);
    });
  });

  describe('assertRuntimeRole', () => {
    const kyselyOn = (url: string) =>
      new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });

    it('accepts the runtime role', async () => {
      const db = kyselyOn(t.runtimeUrl);
      try {
        await expect(assertRuntimeRole(db)).resolves.toBeUndefined();
      } finally {
        await db.destroy();
      }
    });

    it('rejects a connection as the schema owner', async () => {
      const db = kyselyOn(t.ownerUrl);
      try {
        await expect(assertRuntimeRole(db)).rejects.toThrow(/owner of tables/);
      } finally {
        await db.destroy();
      }
    });

    it('rejects a superuser', async () => {
      const url = withDatabase(inject('pgAdminUrl'), new URL(t.runtimeUrl).pathname.slice(1));
      const db = kyselyOn(url);
      try {
        await expect(assertRuntimeRole(db)).rejects.toThrow(/superuser/);
      } finally {
        await db.destroy();
      }
    });

    it('makes openDatabase refuse DATABASE_URL naming the owner', async () => {
      await expect(openDatabase(loadConfig({ DATABASE_URL: t.ownerUrl, DATABASE_POOL_MAX: '1' }))).rejects.toThrow(
        /runtime role/,
      );
    });
  });
});
