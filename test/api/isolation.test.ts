import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertRuntimeRole } from '../../api/db/database.js';
import { Kysely, PostgresDialect } from 'kysely';
import type { DB } from '../../api/db/schema.js';
import { addMember, api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

const ORG_TABLES = [
  'organisations',
  'memberships',
  'audit_events',
  'notifications',
  'agents',
  'agent_owners',
  'agent_versions',
  'agent_attestations',
  'containment_events',
  'workload_identities',
  'delegations',
  'permission_bindings',
  'mcp_servers',
  'models',
  'resources',
  'credential_refs',
  'tools',
  'evidence_records',
  'evidence_heads',
] as const;

/** Puts at least one row of every organisation-owned table in the organisation, through the API. */
async function populate(client: Awaited<ReturnType<typeof onboardAdmin>>['client']) {
  const agent = (
    await client.post(api('/agents'), { name: 'Isolated agent', owners: [{ name: 'Owner', email: 'owner@example.com' }] })
  ).json();
  const model = (await client.post(api('/models'), { provider: 'vendor-a', model_name: 'm1' })).json();
  await client.post(api(`/agents/${agent.id}/versions`), { version_label: 'v1', model_id: model.id });
  await client.post(api(`/agents/${agent.id}/attest`), { statement: 'Reviewed and accurate.' });
  await client.post(api(`/agents/${agent.id}/identities`));
  await client.post(api(`/agents/${agent.id}/delegations`), { principal_ref: 'user:x@example.com', display_name: 'X', scopes: [] });
  const tool = (await client.get(api('/tools'))).json().items[0];
  await client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
  await client.post(api('/mcp-servers'), { name: 'Server', endpoint: 'https://mcp.example.com/iso' });
  await client.post(api('/resources/data'), { name: 'Data', system: 'erp' });
  await client.post(api('/resources/credentials'), { name: 'Cred', provider: 'vault', secret_path: 'kv/iso' });
  await client.post(api(`/agents/${agent.id}/revoke-sessions`), { reason: 'isolation test', confirm: true });
}

/**
 * Row-level security on real PostgreSQL, read directly as the runtime role the API uses: no
 * organisation set means no rows; organisation A set means A's rows only, never B's.
 */
describe('organisation isolation in the database', () => {
  let t: TestApp;
  let runtime: pg.Client;
  let a: Awaited<ReturnType<typeof onboardAdmin>>;
  let b: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp();
    a = await onboardAdmin(t.app, 'Org A');
    b = await onboardAdmin(t.app, 'Org B');
    for (const org of [a, b]) {
      await populate(org.client);
      await addMember(t.app, org.client, ['viewer']);
      await org.client.patch(api('/settings'), { approval_ttl_seconds: 120 });
    }
    runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
  });
  afterAll(async () => {
    await runtime.end();
    await t.close();
  });

  const asOrg = async <T>(orgId: string | null, fn: () => Promise<T>): Promise<T> => {
    await runtime.query('begin');
    try {
      if (orgId) await runtime.query(`select set_config('app.org_id', $1, true)`, [orgId]);
      return await fn();
    } finally {
      await runtime.query('rollback');
    }
  };
  const orgIdsIn = async (table: string) =>
    (await runtime.query(`select ${table === 'organisations' ? 'id' : 'org_id'} as org from ${table}`)).rows.map(
      (r: { org: string }) => r.org,
    );

  it.each(ORG_TABLES)('%s shows no rows without the organisation set', async (table) => {
    expect(await asOrg(null, () => orgIdsIn(table))).toEqual([]);
  });

  it.each(ORG_TABLES)("%s shows A's rows with A set, and never B's", async (table) => {
    const seen = await asOrg(a.tenant.id, () => orgIdsIn(table));
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set([a.tenant.id]));
  });

  it("refuses to write a row for B while A is set", async () => {
    await expect(
      asOrg(a.tenant.id, () =>
        runtime.query(
          `insert into notifications (id, org_id, user_id, kind, title) values (gen_random_uuid(), $1, $2, 'x', 'x')`,
          [b.tenant.id, b.userId],
        ),
      ),
    ).rejects.toThrow(/row-level security/);
    await expect(
      asOrg(a.tenant.id, () => runtime.query(`update organisations set name = 'taken' where id = $1`, [b.tenant.id])),
    ).resolves.toMatchObject({ rowCount: 0 });
  });

  it('cannot rewrite or delete the audit log', async () => {
    await expect(asOrg(a.tenant.id, () => runtime.query(`delete from audit_events`))).rejects.toThrow(/permission denied/);
    await expect(asOrg(a.tenant.id, () => runtime.query(`update audit_events set outcome = 'x'`))).rejects.toThrow(
      /permission denied/,
    );
  });

  it('connects as a role that owns nothing and is subject to row-level security', async () => {
    const { rows } = await runtime.query(
      `select r.rolsuper, r.rolbypassrls,
         (select count(*)::int from pg_tables where schemaname = 'public' and tableowner = current_user) as owned
       from pg_roles r where r.rolname = current_user`,
    );
    expect(rows[0]).toEqual({ rolsuper: false, rolbypassrls: false, owned: 0 });
  });

  it('refuses to serve as the schema owner', async () => {
    const owner = new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: t.ownerUrl, max: 1 }) }) });
    try {
      await expect(assertRuntimeRole(owner)).rejects.toThrow(/owner of tables/);
    } finally {
      await owner.destroy();
    }
  });

  it('the session lookup function reveals nothing for an unknown session', async () => {
    const { rows } = await runtime.query(`select * from session_principal('unknown', now())`);
    expect(rows).toEqual([]);
  });
});
