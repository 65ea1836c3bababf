import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, Client, onboardAdmin, startTestApp, TestClock, uniqueSlug, expectValidation, type TestApp } from '../support/harness.js';

const onboardBody = (over: Record<string, unknown> = {}) => ({
  name: 'Globex',
  slug: uniqueSlug('globex'),
  primary_region: 'us-east',
  admin_display_name: 'Hank Scorpio',
  ...over,
});

describe('authentication and accounts', () => {
  let t: TestApp;
  const clock = new TestClock();
  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  describe('POST /auth/dev-login', () => {
    it('gives a new person an onboarding cookie and no session', async () => {
      const c = new Client(t.app);
      const res = await c.post(api('/auth/dev-login'), { email: 'new.person@example.com' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ status: 'onboarding', tenant: null, user: { email: 'new.person@example.com' } });
      expect(c.cookies.has('tollgate_onboarding')).toBe(true);
      expect(c.cookies.has('tollgate_session')).toBe(false);
      expect(res.json().csrf_token).toBe(c.csrf);
      expect((await c.get(api('/auth/me'))).statusCode).toBe(401);
    });

    it('signs a member in to their first organisation, or to the one named by tenant_id', async () => {
      const a = await onboardAdmin(t.app, 'First');
      const second = await a.client.post(api('/tenants/onboard'), onboardBody());
      expect(second.statusCode).toBe(201);

      const c = new Client(t.app);
      const first = await c.post(api('/auth/dev-login'), { email: a.email });
      expect(first.json()).toMatchObject({ status: 'signed_in', tenant: { id: a.tenant.id } });
      expect(c.cookies.has('tollgate_session')).toBe(true);

      const chosen = await c.post(api('/auth/dev-login'), { email: a.email, tenant_id: second.json().tenant.id });
      expect(chosen.json()).toMatchObject({ status: 'signed_in', tenant: { id: second.json().tenant.id } });
      expect((await c.get(api('/auth/me'))).json().tenant.id).toBe(second.json().tenant.id);
    });

    it("answers 404 for an organisation the person does not belong to", async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    });

    it.each([
      [{ email: 'not-an-email' }, 'email'],
      [{}, 'email'],
      [{ email: 'a@example.com', tenant_id: 'nope' }, 'tenant_id'],
    ])('answers 422 for %j', async (body, field) => {
      expectValidation(await new Client(t.app).post(api('/auth/dev-login'), body), field);
    });
  });

  describe('development sign-in switched off', () => {
    it('answers 404 and is not offered by GET /auth/providers', async () => {
      const off = await startTestApp({ env: { DEV_LOGIN_ENABLED: 'false' } });
      try {
        const res = await new Client(off.app).post(api('/auth/dev-login'), { email: 'a@example.com' });
        expect(res.statusCode).toBe(404);
        expect(res.json().error.code).toBe('not_found');
        const providers = await new Client(off.app).get(api('/auth/providers'));
        expect(providers.json()).toEqual({ providers: [], signup_enabled: false });
      } finally {
        await off.close();
      }
    });
  });

  describe('GET /auth/providers', () => {
    it('lists development sign-in when it is on, to anyone', async () => {
      const res = await new Client(t.app).get(api('/auth/providers'));
      expect(res.statusCode).toBe(200);
      expect(res.json().providers).toEqual([
        expect.objectContaining({ id: 'dev', kind: 'development', login_url: '/api/v1/auth/dev-login' }),
      ]);
    });
  });

  describe('GET /auth/onboarding', () => {
    it('shows the waiting identity with the onboarding cookie, and also with a session', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: 'waiting@example.com' });
      const res = await c.get(api('/auth/onboarding'));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ user: { email: 'waiting@example.com' }, tenants: 0 });
      expect(Date.parse(res.json().expires_at)).toBeGreaterThan(clock.now().getTime());

      const a = await onboardAdmin(t.app);
      const withSession = await a.client.get(api('/auth/onboarding'));
      expect(withSession.statusCode).toBe(200);
      expect(withSession.json()).toMatchObject({ user: { email: a.email }, expires_at: null, tenants: 1 });
    });

    it('refuses a tampered or expired onboarding cookie', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: 'tamper@example.com' });
      const good = c.cookies.get('tollgate_onboarding')!;

      c.cookies.set('tollgate_onboarding', `x${good.slice(1)}`);
      expect((await c.get(api('/auth/onboarding'))).statusCode).toBe(401);

      c.cookies.set('tollgate_onboarding', good);
      clock.advance(t.config.onboardingTtlSeconds + 1);
      const expired = await c.get(api('/auth/onboarding'));
      expect(expired.statusCode).toBe(401);
      expect(expired.json().error.code).toBe('unauthenticated');
    });
  });

  describe('POST /tenants/onboard', () => {
    it('creates the organisation with its creator as organisation administrator and a welcome notification', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: 'founder@example.com' });
      const body = onboardBody({ name: 'Founders Inc' });
      const res = await c.post(api('/tenants/onboard'), body);
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({
        tenant: { slug: body.slug, name: 'Founders Inc', primary_region: 'us-east', plan: 'developer', version: 1 },
        roles: ['org_admin'],
      });
      expect(c.cookies.has('tollgate_onboarding')).toBe(false);
      const me = (await c.get(api('/auth/me'))).json();
      expect(me).toMatchObject({ roles: ['org_admin'], user: { display_name: 'Hank Scorpio' } });
      const notes = (await c.get(api('/notifications'))).json().items;
      expect(notes).toEqual([expect.objectContaining({ kind: 'organisation.welcome', read: false })]);
      const audit = (await c.get(api('/audit?action=tenant.onboarded'))).json().items;
      expect(audit).toHaveLength(1);
    });

    it('lets a signed-in person create another organisation and moves the session to it', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.post(api('/tenants/onboard'), onboardBody());
      expect(res.statusCode).toBe(201);
      const me = (await a.client.get(api('/auth/me'))).json();
      expect(me.tenant.id).toBe(res.json().tenant.id);
      expect(me.tenants.map((x: { id: string }) => x.id)).toEqual([a.tenant.id, res.json().tenant.id]);
    });

    it('answers 409 conflict for a slug already taken', async () => {
      const a = await onboardAdmin(t.app);
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: 'late@example.com' });
      const res = await c.post(api('/tenants/onboard'), onboardBody({ slug: a.tenant.slug }));
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'conflict', details: { field: 'slug' } });
    });

    it('refuses a write without the CSRF header', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: 'nocsrf@example.com' });
      const res = await c.post(api('/tenants/onboard'), onboardBody(), { 'x-csrf-token': '' });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe('csrf_failed');
    });

    it.each([
      ['name', { name: 'A' }],
      ['name', { name: 'x'.repeat(201) }],
      ['slug', { slug: 'ab' }],
      ['slug', { slug: 'x'.repeat(64) }],
      ['slug', { slug: 'Not_A_Slug' }],
      ['slug', { slug: '-leading' }],
      ['primary_region', { primary_region: 'mars-north' }],
      ['admin_display_name', { admin_display_name: 'B' }],
      ['admin_display_name', { admin_display_name: 'x'.repeat(201) }],
      ['name', { name: undefined }],
    ])('answers 422 naming %s for %j', async (field, over) => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: `v-${field}-${Math.random()}@example.com`.replace('0.', '') });
      expectValidation(await c.post(api('/tenants/onboard'), onboardBody(over)), field);
    });
  });

  describe('GET /auth/me', () => {
    it('shows the person, organisation, roles and the effective permissions of those roles', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['approver', 'viewer']);
      const me = (await m.client.get(api('/auth/me'))).json();
      expect(me.user.email).toBe(m.email);
      expect(me.tenant.id).toBe(a.tenant.id);
      expect(me.roles).toEqual(['approver', 'viewer']);
      expect(me.permissions).toContain('approval:decide');
      expect(me.permissions).toContain('graph:read');
      expect(me.permissions).not.toContain('user:manage');
      expect(me.csrf_token).toBe(m.client.csrf);
    });
  });

  describe('POST /auth/logout and /auth/logout-all', () => {
    it('ends this session and clears the cookies', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.post(api('/auth/logout'));
      expect(res.statusCode).toBe(204);
      expect(a.client.cookies.has('tollgate_session')).toBe(false);
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(401);
    });

    it('logout-all ends every session of the person', async () => {
      const a = await onboardAdmin(t.app);
      const other = new Client(t.app);
      await other.post(api('/auth/dev-login'), { email: a.email });
      expect((await other.get(api('/auth/me'))).statusCode).toBe(200);
      expect((await a.client.post(api('/auth/logout-all'))).statusCode).toBe(204);
      expect((await other.get(api('/auth/me'))).statusCode).toBe(401);
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(401);
    });

    it('a stolen session cookie stops working after logout', async () => {
      const a = await onboardAdmin(t.app);
      const thief = new Client(t.app);
      thief.cookies.set('tollgate_session', a.client.cookies.get('tollgate_session')!);
      expect((await thief.get(api('/auth/me'))).statusCode).toBe(200);
      await a.client.post(api('/auth/logout'));
      expect((await thief.get(api('/auth/me'))).statusCode).toBe(401);
    });
  });

  describe('POST /auth/switch-tenant', () => {
    it('moves the session to another organisation of the person', async () => {
      const a = await onboardAdmin(t.app);
      const first = a.tenant.id;
      const second = (await a.client.post(api('/tenants/onboard'), onboardBody())).json().tenant.id;
      const res = await a.client.post(api('/auth/switch-tenant'), { tenant_id: first });
      expect(res.statusCode).toBe(204);
      expect((await a.client.get(api('/auth/me'))).json().tenant.id).toBe(first);
      await a.client.post(api('/auth/switch-tenant'), { tenant_id: second });
      expect((await a.client.get(api('/tenants/current'))).json().id).toBe(second);
    });

    it("answers 404 for an organisation the person is not in, 422 for a bad id, 403 without CSRF", async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const foreign = await a.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id });
      expect(foreign.statusCode).toBe(404);
      expectValidation(await a.client.post(api('/auth/switch-tenant'), { tenant_id: 'x' }), 'tenant_id');
      const csrf = await a.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id }, { 'x-csrf-token': 'wrong' });
      expect(csrf.json().error.code).toBe('csrf_failed');
    });
  });

  describe('CSRF', () => {
    it('needs a header that equals both the cookie and the token stored with the session', async () => {
      const a = await onboardAdmin(t.app);
      const forged = 'forged-token-value-0123456789';
      const c = new Client(t.app);
      c.cookies.set('tollgate_session', a.client.cookies.get('tollgate_session')!);
      c.cookies.set('tollgate_csrf', forged);
      const res = await c.patch(api('/tenants/current'), { name: 'Hijacked' }, { 'x-csrf-token': forged });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe('csrf_failed');
      // Reads need no CSRF header.
      expect((await c.get(api('/tenants/current'))).statusCode).toBe(200);
    });
  });

  describe('GET and PATCH /tenants/current', () => {
    it('reads and renames the organisation, honouring If-Match, and audits the change', async () => {
      const a = await onboardAdmin(t.app, 'Before');
      const current = (await a.client.get(api('/tenants/current'))).json();
      expect(current).toMatchObject({ id: a.tenant.id, name: 'Before', version: 1 });

      const stale = await a.client.patch(api('/tenants/current'), { name: 'After' }, { 'if-match': '7' });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error).toMatchObject({ code: 'version_conflict', details: { current_version: 1 } });

      const res = await a.client.patch(api('/tenants/current'), { name: 'After' }, { 'if-match': '"1"' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ name: 'After', version: 2 });
      const audit = (await a.client.get(api('/audit?action=tenant.updated'))).json().items;
      expect(audit[0]).toMatchObject({ target_id: a.tenant.id, details: { name: { from: 'Before', to: 'After' } } });
    });

    it.each([['A'], ['x'.repeat(201)]])('answers 422 for name %j', async (name) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.patch(api('/tenants/current'), { name }), 'name');
    });

    it('is forbidden to a member without tenant:manage', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['security_admin']);
      const res = await m.client.patch(api('/tenants/current'), { name: 'Nope' });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.details).toEqual({ required_permission: 'tenant:manage' });
      expect((await m.client.get(api('/tenants/current'))).statusCode).toBe(200);
    });
  });
});
