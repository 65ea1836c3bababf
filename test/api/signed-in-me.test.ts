import { afterEach, describe, expect, it } from 'vitest';
import { addMember, api, Client, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * GET /auth/me reads the session's organisation and the person's organisations once per remembered session
 * (platform/auth.ts, rememberedWithSession), not once per request: what it shows follows the same bound as the
 * session itself (docs/authentication.md, Sessions and their bound). A change takes effect at once in the API
 * process that made it, and in another within TOKEN_REVOCATION_CACHE_SECONDS. Two apps on one PostgreSQL
 * database stand for two replicas; a hand-moved clock stands for the bound passing.
 */

const BOUND_SECONDS = 1;

/** The same browser, talking to another replica: a copy of its cookies. */
function sameBrowser(app: TestApp['app'], of: Client): Client {
  const c = new Client(app);
  for (const [k, v] of of.cookies) c.cookies.set(k, v);
  return c;
}

const me = async (c: Client) => {
  const res = await c.get(api('/auth/me'));
  expect(res.statusCode).toBe(200);
  return res.json();
};

describe('GET /auth/me across API processes', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.reverse()) await t.close();
    apps.length = 0;
  });
  const replicas = async (seconds = BOUND_SECONDS) => {
    const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
    const env = { TOKEN_REVOCATION_CACHE_SECONDS: String(seconds) };
    const one = await startTestApp({ clock, env });
    apps.push(one);
    const two = await startTestApp({ clock, share: one, env });
    apps.push(two);
    return { clock, one, two };
  };

  it('a renamed organisation shows at once where it was renamed, and on another replica within the bound, not later', async () => {
    const { clock, one, two } = await replicas();
    const admin = await onboardAdmin(one.app, 'Before');
    const onTwo = sameBrowser(two.app, admin.client);
    expect((await me(admin.client)).tenant).toMatchObject({ name: 'Before', version: 1 });
    expect((await me(onTwo)).tenant).toMatchObject({ name: 'Before', version: 1 });

    const renamed = await admin.client.patch(api('/tenants/current'), { name: 'After' });
    expect(renamed.statusCode).toBe(200);
    const here = await me(admin.client);
    expect(here.tenant).toEqual(renamed.json());
    expect(here.tenants).toEqual([expect.objectContaining({ id: admin.tenant.id, name: 'After' })]);

    // Replica two read it before the rename, and keeps what it read for the bound, no longer.
    clock.advance(BOUND_SECONDS / 2);
    expect((await me(onTwo)).tenant.name).toBe('Before');
    clock.advance(BOUND_SECONDS / 2);
    const there = await me(onTwo);
    expect(there.tenant).toEqual(renamed.json());
    expect(there.tenants[0].name).toBe('After');
  });

  it("a settings change moves the organisation's version in /auth/me at once, so If-Match from it holds", async () => {
    const { one } = await replicas();
    const admin = await onboardAdmin(one.app);
    expect((await me(admin.client)).tenant.version).toBe(1);
    expect((await admin.client.patch(api('/settings'), { approval_ttl_seconds: 600 })).statusCode).toBe(200);
    const { tenant } = await me(admin.client);
    expect(tenant.version).toBe(2);
    const renamed = await admin.client.patch(api('/tenants/current'), { name: 'Next' }, { 'if-match': `"${tenant.version}"` });
    expect(renamed.statusCode).toBe(200);
  });

  it("a person added to another organisation sees it in their list at once there, and on another replica within the bound", async () => {
    const { clock, one, two } = await replicas();
    const a = await onboardAdmin(one.app, 'First');
    const member = await addMember(one.app, a.client, ['viewer']);
    const memberOnTwo = sameBrowser(two.app, member.client);
    expect((await me(member.client)).tenants.map((t: { id: string }) => t.id)).toEqual([a.tenant.id]);
    expect((await me(memberOnTwo)).tenants).toHaveLength(1);

    const b = await onboardAdmin(one.app, 'Second');
    const added = await b.client.post(api('/users'), { email: member.email, display_name: 'Mem Ber', roles: ['approver'] });
    expect(added.statusCode).toBe(201);
    expect((await me(member.client)).tenants).toEqual([
      { id: a.tenant.id, slug: a.tenant.slug, name: 'First', roles: ['viewer'] },
      { id: b.tenant.id, slug: b.tenant.slug, name: 'Second', roles: ['approver'] },
    ]);

    clock.advance(BOUND_SECONDS);
    expect((await me(memberOnTwo)).tenants.map((t: { id: string }) => t.id)).toEqual([a.tenant.id, b.tenant.id]);
    // The session still acts in the first organisation until it switches.
    expect((await me(member.client)).tenant.id).toBe(a.tenant.id);
    expect((await member.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id })).statusCode).toBe(204);
    const switched = await me(member.client);
    expect(switched).toMatchObject({ tenant: { id: b.tenant.id, name: 'Second' }, roles: ['approver'] });
    expect(switched.permissions).toContain('approval:decide');
  });

  it('roles changed or a membership disabled in another organisation show in the list at once where it was done', async () => {
    const { clock, one, two } = await replicas();
    const a = await onboardAdmin(one.app, 'First');
    const member = await addMember(one.app, a.client, ['viewer']);
    const b = await onboardAdmin(one.app, 'Second');
    const added = await b.client.post(api('/users'), { email: member.email, display_name: 'Mem Ber', roles: ['approver'] });
    expect(added.statusCode).toBe(201);
    const memberOnTwo = sameBrowser(two.app, member.client);
    expect((await me(memberOnTwo)).tenants).toHaveLength(2);

    await b.client.patch(api(`/users/${member.userId}`), { roles: ['auditor'] });
    expect((await me(member.client)).tenants[1]).toMatchObject({ id: b.tenant.id, roles: ['auditor'] });
    await b.client.patch(api(`/users/${member.userId}`), { status: 'disabled' });
    expect((await me(member.client)).tenants.map((t: { id: string }) => t.id)).toEqual([a.tenant.id]);

    clock.advance(BOUND_SECONDS);
    expect((await me(memberOnTwo)).tenants.map((t: { id: string }) => t.id)).toEqual([a.tenant.id]);
  });

  it('with TOKEN_REVOCATION_CACHE_SECONDS=0 every replica reads what /auth/me shows on every request', async () => {
    const { one, two } = await replicas(0);
    const admin = await onboardAdmin(one.app, 'Before');
    const onTwo = sameBrowser(two.app, admin.client);
    expect((await me(onTwo)).tenant.name).toBe('Before');
    expect((await admin.client.patch(api('/tenants/current'), { name: 'After' })).statusCode).toBe(200);
    expect((await me(onTwo)).tenant.name).toBe('After');
  });
});
