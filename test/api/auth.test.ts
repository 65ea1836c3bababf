import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  api,
  Client,
  expectValidation,
  onboardAdmin,
  startTestApp,
  TestClock,
  uniqueSlug,
  type TestApp,
} from '../support/harness.js';

/**
 * People's authentication: development sign-in, sign-in methods, the onboarding
 * cookie, who am I, sign-out, switching organisation, CSRF and what ends a session.
 */

const SESSION = 'tollgate_session';
const CSRF = 'tollgate_csrf';
const ONBOARDING = 'tollgate_onboarding';

const newEmail = (prefix = 'person') => `${prefix}-${randomBytes(5).toString('hex')}@example.com`;
const correlation = () => `auth-${randomBytes(8).toString('hex')}`;

const onboardBody = (over: Record<string, unknown> = {}) => ({
  name: 'Second Org',
  slug: uniqueSlug('auth'),
  primary_region: 'eu-central',
  admin_display_name: 'Ada Admin',
  ...over,
});

type SetCookie = { name: string; value: string; httpOnly?: boolean; sameSite?: string; path?: string; maxAge?: number; expires?: Date };
const setCookies = (res: { cookies: unknown }) => res.cookies as SetCookie[];
const cookieNamed = (res: { cookies: unknown }, name: string) => setCookies(res).find((c) => c.name === name);
const isCleared = (c: SetCookie | undefined) =>
  c !== undefined && (c.value === '' || c.maxAge === 0 || (c.expires !== undefined && c.expires.getTime() <= Date.now()));

/** A request carrying the client's cookies but no X-CSRF-Token header at all. */
function withoutCsrfHeader(app: FastifyInstance, client: Client, method: InjectOptions['method'], url: string, body?: object) {
  const cookie = [...client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return app.inject({ method, url, headers: cookie ? { cookie } : {}, ...(body ? { payload: body } : {}) });
}

function expectUnauthenticated(res: { statusCode: number; json(): any }) {
  expect(res.statusCode).toBe(401);
  expect(res.json().error.code).toBe('unauthenticated');
}

function expectCsrfFailed(res: { statusCode: number; json(): any }) {
  expect(res.statusCode).toBe(403);
  expect(res.json().error.code).toBe('csrf_failed');
}

/** A person who already has an organisation (A) and becomes a member of a second one (B) with `rolesInB`. */
async function personInTwoOrgs(app: FastifyInstance, rolesInB: string[]) {
  const a = await onboardAdmin(app, 'Org A');
  const b = await onboardAdmin(app, 'Org B');
  const added = await b.client.post(api('/users'), { email: a.email, display_name: 'Ada In B', roles: rolesInB });
  expect(added.statusCode).toBe(201);
  return { a, b };
}

describe('authentication for people', () => {
  let t: TestApp;
  const clock = new TestClock();
  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '10000', RATE_LIMIT_PUBLIC_PER_MINUTE: '10000' } });
  });
  afterAll(async () => t.close());

  describe('POST /auth/dev-login', () => {
    it('gives a new person status onboarding, an onboarding cookie and a CSRF cookie, but no session', async () => {
      const c = new Client(t.app);
      const email = newEmail('newcomer');
      const res = await c.post(api('/auth/dev-login'), { email });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ status: 'onboarding', tenant: null, user: { id: expect.any(String), email } });
      expect(typeof body.user.display_name).toBe('string');

      const onboarding = cookieNamed(res, ONBOARDING);
      expect(onboarding).toMatchObject({ httpOnly: true, path: '/' });
      expect(cookieNamed(res, CSRF)?.value).toBe(body.csrf_token);
      expect(cookieNamed(res, CSRF)?.httpOnly).toBeFalsy();
      expect(cookieNamed(res, SESSION)?.value ?? '').toBe('');
      expect(c.cookies.has(SESSION)).toBe(false);

      // The onboarding cookie is not a session.
      expectUnauthenticated(await c.get(api('/auth/me')));
      // Signing in again finds the same person, whatever the case of the address.
      const again = await new Client(t.app).post(api('/auth/dev-login'), { email: email.toUpperCase() });
      expect(again.json()).toMatchObject({ status: 'onboarding', user: { id: body.user.id } });
    });

    it('signs an existing member in: status signed_in, a session cookie and a CSRF cookie matching csrf_token', async () => {
      const a = await onboardAdmin(t.app, 'Signed In Org');
      const c = new Client(t.app);
      const res = await c.post(api('/auth/dev-login'), { email: a.email });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        status: 'signed_in',
        user: { id: a.userId, email: a.email },
        tenant: { id: a.tenant.id, slug: a.tenant.slug, name: 'Signed In Org', version: 1 },
      });

      const session = cookieNamed(res, SESSION)!;
      expect(session.value.length).toBeGreaterThanOrEqual(20);
      expect(session).toMatchObject({ httpOnly: true, path: '/', maxAge: t.config.sessionTtlSeconds });
      const csrf = cookieNamed(res, CSRF)!;
      expect(csrf.value).toBe(body.csrf_token);
      expect(csrf.httpOnly).toBeFalsy();
      expect(isCleared(cookieNamed(res, ONBOARDING)) || cookieNamed(res, ONBOARDING) === undefined).toBe(true);

      const me = await c.get(api('/auth/me'));
      expect(me.statusCode).toBe(200);
      expect(me.json()).toMatchObject({ user: { id: a.userId }, tenant: { id: a.tenant.id } });
    });

    it('signs a person added by an administrator (never signed in before) in to that organisation', async () => {
      const a = await onboardAdmin(t.app);
      const email = newEmail('added');
      await a.client.post(api('/users'), { email, display_name: 'Added Person', roles: ['viewer'] });
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email });
      expect(res.json()).toMatchObject({ status: 'signed_in', tenant: { id: a.tenant.id } });
    });

    it('picks the organisation named by tenant_id among those the person belongs to; first one otherwise', async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['auditor']);

      const first = new Client(t.app);
      expect((await first.post(api('/auth/dev-login'), { email: a.email })).json().tenant.id).toBe(a.tenant.id);
      const nullTenant = new Client(t.app);
      expect((await nullTenant.post(api('/auth/dev-login'), { email: a.email, tenant_id: null })).json().tenant.id).toBe(
        a.tenant.id,
      );

      const chosen = new Client(t.app);
      const res = await chosen.post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ status: 'signed_in', tenant: { id: b.tenant.id } });
      const me = (await chosen.get(api('/auth/me'))).json();
      expect(me.tenant.id).toBe(b.tenant.id);
      expect(me.roles).toEqual(['auditor']);
      expect(me.user.display_name).toBe('Ada In B');
    });

    it("answers 404 not_found for another organisation's tenant_id, an unknown one, or one where the person is disabled", async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      for (const tenant_id of [b.tenant.id, randomUUID()]) {
        const c = new Client(t.app);
        const res = await c.post(api('/auth/dev-login'), { email: a.email, tenant_id });
        expect(res.statusCode, tenant_id).toBe(404);
        expect(res.json().error.code).toBe('not_found');
        expect(c.cookies.has(SESSION)).toBe(false);
      }

      const { a: p, b: other } = await personInTwoOrgs(t.app, ['viewer']);
      await other.client.patch(api(`/users/${p.userId}`), { status: 'disabled' });
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email: p.email, tenant_id: other.tenant.id });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    });

    it.each([
      ['email', { email: 'not-an-email' }],
      ['email', { email: 'two@@example.com' }],
      ['email', { email: '' }],
      ['email', { email: 42 }],
      ['email', { email: `${'x'.repeat(250)}@example.com` }],
      ['email', {}],
      ['tenant_id', { email: 'valid@example.com', tenant_id: 'not-a-uuid' }],
      ['tenant_id', { email: 'valid@example.com', tenant_id: 12 }],
    ])('answers 422 validation_failed naming %s for %j', async (field, body) => {
      const c = new Client(t.app);
      expectValidation(await c.post(api('/auth/dev-login'), body), field);
      expect(c.cookies.size).toBe(0);
    });

    it('names every bad field at once', async () => {
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email: 'nope', tenant_id: 'nope' });
      expect(res.statusCode).toBe(422);
      const fields = res.json().error.details.map((d: { field: string }) => d.field);
      expect(fields).toEqual(expect.arrayContaining(['email', 'tenant_id']));
    });
  });

  describe('development sign-in switched off (DEV_LOGIN_ENABLED=false)', () => {
    let off: TestApp;
    beforeAll(async () => {
      off = await startTestApp({ env: { DEV_LOGIN_ENABLED: 'false' } });
    });
    afterAll(async () => off.close());

    it('POST /auth/dev-login answers 404 not_found and sets no cookie', async () => {
      const c = new Client(off.app);
      const res = await c.post(api('/auth/dev-login'), { email: newEmail() });
      expect(res.statusCode).toBe(404);
      expect(res.json().error).toMatchObject({ code: 'not_found', correlation_id: expect.any(String) });
      expect(setCookies(res)).toEqual([]);
    });

    it('GET /auth/providers answers an empty list', async () => {
      const res = await new Client(off.app).get(api('/auth/providers'));
      expect(res.statusCode).toBe(200);
      expect(res.json().providers).toEqual([]);
    });
  });

  describe('GET /auth/providers', () => {
    it('is public and lists development sign-in when it is enabled', async () => {
      const res = await t.app.inject({ method: 'GET', url: api('/auth/providers') });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        providers: [{ id: 'dev', kind: 'development', name: expect.any(String), login_url: '/api/v1/auth/dev-login' }],
        signup_enabled: false,
      });
    });

    it('answers the same to a signed-in person', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.get(api('/auth/providers'));
      expect(res.statusCode).toBe(200);
      expect(res.json().providers.map((p: { id: string }) => p.id)).toEqual(['dev']);
    });
  });

  describe('GET /auth/onboarding', () => {
    it('shows the waiting identity to the onboarding cookie, with its expiry', async () => {
      const c = new Client(t.app);
      const email = newEmail('waiting');
      const login = (await c.post(api('/auth/dev-login'), { email })).json();
      const res = await c.get(api('/auth/onboarding'));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        user: { id: login.user.id, email, display_name: login.user.display_name },
        expires_at: new Date(clock.now().getTime() + t.config.onboardingTtlSeconds * 1000).toISOString(),
        tenants: 0,
        csrf_token: c.csrf,
      });
    });

    it('works with a session too (no expiry; counts the organisations)', async () => {
      const { a } = await personInTwoOrgs(t.app, ['viewer']);
      const res = await a.client.get(api('/auth/onboarding'));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ user: { id: a.userId, email: a.email }, expires_at: null, tenants: 2 });
    });

    it('answers 401 without any cookie', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/auth/onboarding')));
    });

    it('answers 401 to a tampered onboarding cookie', async () => {
      const victim = new Client(t.app);
      const victimId = (await victim.post(api('/auth/dev-login'), { email: newEmail('victim') })).json().user.id as string;
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: newEmail('tamper') });
      const good = c.cookies.get(ONBOARDING)!;
      const dot = good.lastIndexOf('.');
      expect(dot).toBeGreaterThan(0);
      const [payload, signature] = [good.slice(0, dot), good.slice(dot + 1)];
      const claims = JSON.parse(Buffer.from(decodeURIComponent(payload), 'base64url').toString('utf8'));
      const reencode = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');

      const tampered = [
        `${reencode({ ...claims, uid: victimId })}.${signature}`, // someone else, old signature
        `${reencode({ ...claims, exp: claims.exp + 365 * 86400_000 })}.${signature}`, // longer life, old signature
        `${payload}.${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`, // signature changed
        payload, // signature stripped
        reencode({ ...claims, uid: victimId }), // unsigned payload
        'garbage',
      ];
      for (const value of tampered) {
        c.cookies.set(ONBOARDING, value);
        const res = await c.get(api('/auth/onboarding'));
        expect(res.statusCode, value).toBe(401);
        expect(res.json().error.code).toBe('unauthenticated');
      }
      c.cookies.set(ONBOARDING, good);
      expect((await c.get(api('/auth/onboarding'))).statusCode).toBe(200);
    });

    it('answers 401 once the onboarding cookie is older than ONBOARDING_TTL_SECONDS', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: newEmail('expiring') });
      clock.advance(t.config.onboardingTtlSeconds - 1);
      expect((await c.get(api('/auth/onboarding'))).statusCode).toBe(200);
      clock.advance(2);
      expectUnauthenticated(await c.get(api('/auth/onboarding')));
      // Nor can it create an organisation any more.
      expectUnauthenticated(await c.post(api('/tenants/onboard'), onboardBody()));
    });
  });

  describe('GET /auth/me', () => {
    it('shows user, organisation, roles and exactly the effective permissions of those roles', async () => {
      const a = await onboardAdmin(t.app, 'Me Org');
      const m = await addMember(t.app, a.client, ['approver', 'agent_developer']);
      const res = await m.client.get(api('/auth/me'));
      expect(res.statusCode).toBe(200);
      const me = res.json();
      expect(me.user).toEqual({ id: m.userId, email: m.email, display_name: 'Mem Ber' });
      expect(me.tenant).toMatchObject({ id: a.tenant.id, slug: a.tenant.slug, name: 'Me Org' });
      expect([...me.roles].sort()).toEqual(['agent_developer', 'approver']);
      expect(me.csrf_token).toBe(m.client.csrf);

      const roles = (await a.client.get(api('/roles'))).json().items as Array<{ key: string; permissions: string[] }>;
      const union = new Set(roles.filter((r) => me.roles.includes(r.key)).flatMap((r) => r.permissions));
      expect([...me.permissions].sort()).toEqual([...union].sort());
      expect(me.permissions).toContain('approval:decide');
      expect(me.permissions).toContain('policy:write');
      expect(me.permissions).not.toContain('tenant:manage');
      expect(new Set(me.permissions).size).toBe(me.permissions.length);
    });

    it('gives an organisation administrator all 40 permissions, and a member without roles none', async () => {
      const a = await onboardAdmin(t.app);
      const admin = (await a.client.get(api('/auth/me'))).json();
      expect(admin.roles).toEqual(['org_admin']);
      expect(admin.permissions).toHaveLength(40);
      const bare = await addMember(t.app, a.client, []);
      const me = await bare.client.get(api('/auth/me'));
      expect(me.statusCode).toBe(200);
      expect(me.json()).toMatchObject({ roles: [], permissions: [] });
    });

    it('lists every organisation of the person with the roles held in each', async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['auditor']);
      const third = await a.client.post(api('/tenants/onboard'), onboardBody({ name: 'Third Org' }));
      expect(third.statusCode).toBe(201);
      const me = (await a.client.get(api('/auth/me'))).json();
      expect(me.tenant.id).toBe(third.json().tenant.id);
      expect(me.tenants).toHaveLength(3);
      expect(me.tenants).toEqual(
        expect.arrayContaining([
          { id: a.tenant.id, slug: a.tenant.slug, name: 'Org A', roles: ['org_admin'] },
          { id: b.tenant.id, slug: b.tenant.slug, name: 'Org B', roles: ['auditor'] },
          expect.objectContaining({ id: third.json().tenant.id, name: 'Third Org', roles: ['org_admin'] }),
        ]),
      );
    });

    it('answers 401 without a session, with only an onboarding cookie, or with an unknown session cookie', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/auth/me')));
      const onboarding = new Client(t.app);
      await onboarding.post(api('/auth/dev-login'), { email: newEmail() });
      expectUnauthenticated(await onboarding.get(api('/auth/me')));
      const forged = new Client(t.app);
      forged.cookies.set(SESSION, randomBytes(32).toString('base64url'));
      expectUnauthenticated(await forged.get(api('/auth/me')));
    });
  });

  describe('POST /auth/logout', () => {
    it('answers 204, clears the cookies, and the session no longer works even with a copied cookie', async () => {
      const a = await onboardAdmin(t.app);
      const copy = new Client(t.app);
      copy.cookies.set(SESSION, a.client.cookies.get(SESSION)!);
      expect((await copy.get(api('/auth/me'))).statusCode).toBe(200);

      const res = await a.client.post(api('/auth/logout'));
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect(isCleared(cookieNamed(res, SESSION))).toBe(true);
      expect(isCleared(cookieNamed(res, CSRF))).toBe(true);
      expect(a.client.cookies.has(SESSION)).toBe(false);

      expectUnauthenticated(await a.client.get(api('/auth/me')));
      expectUnauthenticated(await copy.get(api('/auth/me')));
      expectUnauthenticated(await copy.get(api('/tenants/current')));
    });

    it("ends only this session: the person's other session goes on", async () => {
      const a = await onboardAdmin(t.app);
      const other = new Client(t.app);
      await other.post(api('/auth/dev-login'), { email: a.email });
      expect((await a.client.post(api('/auth/logout'))).statusCode).toBe(204);
      expect((await other.get(api('/auth/me'))).statusCode).toBe(200);
    });

    it('answers 401 without a session or with only an onboarding cookie', async () => {
      expectUnauthenticated(await new Client(t.app).post(api('/auth/logout')));
      const onboarding = new Client(t.app);
      await onboarding.post(api('/auth/dev-login'), { email: newEmail() });
      expectUnauthenticated(await onboarding.post(api('/auth/logout')));
    });

    it('needs the CSRF header: without it the session survives', async () => {
      const a = await onboardAdmin(t.app);
      expectCsrfFailed(await a.client.post(api('/auth/logout'), undefined, { 'x-csrf-token': 'wrong' }));
      expectCsrfFailed(await withoutCsrfHeader(t.app, a.client, 'POST', api('/auth/logout')));
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    });
  });

  describe('POST /auth/logout-all', () => {
    it('ends every session of the person, in every organisation, and no one else’s', async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['viewer']);
      const second = new Client(t.app);
      await second.post(api('/auth/dev-login'), { email: a.email });
      const inB = new Client(t.app);
      await inB.post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      const colleague = await addMember(t.app, a.client, ['viewer']);
      for (const c of [a.client, second, inB]) expect((await c.get(api('/auth/me'))).statusCode).toBe(200);

      const res = await second.post(api('/auth/logout-all'));
      expect(res.statusCode).toBe(204);
      expect(isCleared(cookieNamed(res, SESSION))).toBe(true);
      expect(isCleared(cookieNamed(res, CSRF))).toBe(true);

      for (const c of [a.client, second, inB]) expectUnauthenticated(await c.get(api('/auth/me')));
      expect((await colleague.client.get(api('/auth/me'))).statusCode).toBe(200);
      expect((await b.client.get(api('/auth/me'))).statusCode).toBe(200);

      // Signing in again works.
      expect((await new Client(t.app).post(api('/auth/dev-login'), { email: a.email })).json().status).toBe('signed_in');
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).post(api('/auth/logout-all')));
    });

    it('needs the CSRF header: with a wrong one every session survives', async () => {
      const a = await onboardAdmin(t.app);
      const second = new Client(t.app);
      await second.post(api('/auth/dev-login'), { email: a.email });
      expectCsrfFailed(await second.post(api('/auth/logout-all'), undefined, { 'x-csrf-token': a.client.csrf! }));
      expectCsrfFailed(await withoutCsrfHeader(t.app, second, 'POST', api('/auth/logout-all')));
      for (const c of [a.client, second]) expect((await c.get(api('/auth/me'))).statusCode).toBe(200);
    });
  });

  describe('POST /auth/switch-tenant', () => {
    it('moves this session to another organisation of the person; /auth/me and the permissions follow', async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['viewer']);
      const res = await a.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id });
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      const me = (await a.client.get(api('/auth/me'))).json();
      expect(me).toMatchObject({ tenant: { id: b.tenant.id }, roles: ['viewer'] });
      expect(me.permissions).not.toContain('user:read');
      expect((await a.client.get(api('/tenants/current'))).json().id).toBe(b.tenant.id);
      expect((await a.client.get(api('/users'))).statusCode).toBe(403);

      // Back again; switching to the organisation already current is fine too.
      expect((await a.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id })).statusCode).toBe(204);
      expect((await a.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id })).statusCode).toBe(204);
      expect((await a.client.get(api('/auth/me'))).json()).toMatchObject({ tenant: { id: a.tenant.id }, roles: ['org_admin'] });
    });

    it("moves only this session, not the person's others", async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['viewer']);
      const other = new Client(t.app);
      await other.post(api('/auth/dev-login'), { email: a.email });
      await a.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id });
      expect((await other.get(api('/auth/me'))).json().tenant.id).toBe(a.tenant.id);
    });

    it('answers 404 not_found for an organisation the person does not belong to, an unknown one, or one where they are disabled', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      for (const tenant_id of [b.tenant.id, randomUUID()]) {
        const res = await a.client.post(api('/auth/switch-tenant'), { tenant_id });
        expect(res.statusCode, tenant_id).toBe(404);
        expect(res.json().error.code).toBe('not_found');
      }
      expect((await a.client.get(api('/auth/me'))).json().tenant.id).toBe(a.tenant.id);

      const { a: p, b: other } = await personInTwoOrgs(t.app, ['viewer']);
      await other.client.patch(api(`/users/${p.userId}`), { status: 'disabled' });
      const res = await p.client.post(api('/auth/switch-tenant'), { tenant_id: other.tenant.id });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    });

    it.each([
      ['tenant_id', { tenant_id: 'not-a-uuid' }],
      ['tenant_id', { tenant_id: '' }],
      ['tenant_id', { tenant_id: 7 }],
      ['tenant_id', { tenant_id: null }],
      ['tenant_id', {}],
    ])('answers 422 validation_failed naming %s for %j', async (field, body) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.post(api('/auth/switch-tenant'), body), field);
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).post(api('/auth/switch-tenant'), { tenant_id: randomUUID() }));
    });

    it('needs the CSRF header: without it the session stays where it was', async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['viewer']);
      expectCsrfFailed(await a.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id }, { 'x-csrf-token': 'wrong' }));
      expectCsrfFailed(await withoutCsrfHeader(t.app, a.client, 'POST', api('/auth/switch-tenant'), { tenant_id: b.tenant.id }));
      expect((await a.client.get(api('/auth/me'))).json().tenant.id).toBe(a.tenant.id);
    });
  });

  describe('CSRF', () => {
    it.each([
      ['POST', '/auth/logout', undefined],
      ['POST', '/auth/logout-all', undefined],
      ['POST', '/auth/switch-tenant', 'switch'],
      ['PATCH', '/tenants/current', { name: 'Renamed By Forgery' }],
      ['POST', '/tenants/onboard', 'onboard'],
      ['POST', '/users', { email: 'csrf-victim@example.com', display_name: 'Csrf Victim', roles: ['org_admin'] }],
    ] as const)('%s %s with a wrong X-CSRF-Token answers 403 csrf_failed and changes nothing', async (method, path, body) => {
      const a = await onboardAdmin(t.app, 'Csrf Org');
      const payload = body === 'switch' ? { tenant_id: a.tenant.id } : body === 'onboard' ? onboardBody() : body;
      const res = await a.client.request(method, api(path), payload, { 'x-csrf-token': `${a.client.csrf}x` });
      expectCsrfFailed(res);
      const me = await a.client.get(api('/auth/me'));
      expect(me.statusCode).toBe(200);
      expect(me.json().tenant).toMatchObject({ id: a.tenant.id, name: 'Csrf Org', version: 1 });
      expect(me.json().tenants).toHaveLength(1);
      expect((await a.client.get(api('/users'))).json().items).toHaveLength(1);
    });

    it('refuses a header that matches the cookie but not the token stored with the session', async () => {
      const a = await onboardAdmin(t.app, 'Before Forgery');
      const forged = randomBytes(32).toString('base64url');
      const attacker = new Client(t.app);
      attacker.cookies.set(SESSION, a.client.cookies.get(SESSION)!);
      attacker.cookies.set(CSRF, forged);
      expectCsrfFailed(await attacker.patch(api('/tenants/current'), { name: 'Hijacked' }, { 'x-csrf-token': forged }));
      expectCsrfFailed(await attacker.post(api('/auth/logout-all'), undefined, { 'x-csrf-token': forged }));
      expect((await a.client.get(api('/tenants/current'))).json().name).toBe('Before Forgery');
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    });

    it("refuses another session's valid CSRF pair, even the same person's", async () => {
      const a = await onboardAdmin(t.app);
      const second = new Client(t.app);
      await second.post(api('/auth/dev-login'), { email: a.email });
      expect(second.csrf).not.toBe(a.client.csrf);
      const mixed = new Client(t.app);
      mixed.cookies.set(SESSION, a.client.cookies.get(SESSION)!);
      mixed.cookies.set(CSRF, second.csrf!);
      expectCsrfFailed(await mixed.post(api('/auth/logout')));
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    });

    it("refuses a header equal to the session's token when the CSRF cookie is missing or differs, and a missing header", async () => {
      const a = await onboardAdmin(t.app);
      const noCookie = new Client(t.app);
      noCookie.cookies.set(SESSION, a.client.cookies.get(SESSION)!);
      expectCsrfFailed(await noCookie.post(api('/auth/logout'), undefined, { 'x-csrf-token': a.client.csrf! }));
      const otherCookie = new Client(t.app);
      otherCookie.cookies.set(SESSION, a.client.cookies.get(SESSION)!);
      otherCookie.cookies.set(CSRF, randomBytes(32).toString('base64url'));
      expectCsrfFailed(await otherCookie.post(api('/auth/logout'), undefined, { 'x-csrf-token': a.client.csrf! }));
      expectCsrfFailed(await withoutCsrfHeader(t.app, a.client, 'POST', api('/auth/logout')));
      expectCsrfFailed(await a.client.post(api('/auth/logout'), undefined, { 'x-csrf-token': '' }));
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    });

    it('protects the onboarding cookie the same way', async () => {
      const c = new Client(t.app);
      await c.post(api('/auth/dev-login'), { email: newEmail('onb-csrf') });
      const forged = randomBytes(32).toString('base64url');
      const attacker = new Client(t.app);
      attacker.cookies.set(ONBOARDING, c.cookies.get(ONBOARDING)!);
      attacker.cookies.set(CSRF, forged);
      expectCsrfFailed(await attacker.post(api('/tenants/onboard'), onboardBody(), { 'x-csrf-token': forged }));
      expect((await c.get(api('/auth/onboarding'))).json().tenants).toBe(0);
    });

    it('needs no CSRF token on GET', async () => {
      const a = await onboardAdmin(t.app);
      // The session cookie alone: no CSRF cookie, no header.
      const cookie = `${SESSION}=${a.client.cookies.get(SESSION)}`;
      for (const path of ['/auth/me', '/tenants/current', '/auth/onboarding', '/users']) {
        const res = await t.app.inject({ method: 'GET', url: api(path), headers: { cookie } });
        expect(res.statusCode, path).toBe(200);
      }
      const waiting = new Client(t.app);
      await waiting.post(api('/auth/dev-login'), { email: newEmail() });
      const res = await t.app.inject({
        method: 'GET',
        url: api('/auth/onboarding'),
        headers: { cookie: `${ONBOARDING}=${waiting.cookies.get(ONBOARDING)}` },
      });
      expect(res.statusCode).toBe(200);
    });

    it('checks the session before CSRF: no session answers 401 whatever the header', async () => {
      expectUnauthenticated(await new Client(t.app).post(api('/auth/logout'), undefined, { 'x-csrf-token': 'anything' }));
    });

    it('answers csrf_failed in the error envelope, with the correlation ID', async () => {
      const a = await onboardAdmin(t.app);
      const corr = correlation();
      const res = await a.client.post(api('/auth/logout'), undefined, { 'x-csrf-token': 'wrong', 'x-correlation-id': corr });
      expectCsrfFailed(res);
      expect(res.headers['x-correlation-id']).toBe(corr);
      expect(Object.keys(res.json())).toEqual(['error']);
      expect(Object.keys(res.json().error).sort()).toEqual(['code', 'correlation_id', 'details', 'message']);
      expect(res.json().error).toMatchObject({ code: 'csrf_failed', message: expect.any(String), correlation_id: corr });
    });
  });

  describe('sessions', () => {
    it("a member disabled by the administrator loses every session in that organisation at once", async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      const second = new Client(t.app);
      await second.post(api('/auth/dev-login'), { email: m.email });
      for (const c of [m.client, second]) expect((await c.get(api('/auth/me'))).statusCode).toBe(200);

      const res = await a.client.patch(api(`/users/${m.userId}`), { status: 'disabled' });
      expect(res.statusCode).toBe(200);
      expect(res.json().status).toBe('disabled');

      for (const c of [m.client, second]) {
        expectUnauthenticated(await c.get(api('/auth/me')));
        expectUnauthenticated(await c.get(api('/tenants/current')));
        expectUnauthenticated(await c.post(api('/auth/logout')));
      }
      // The administrator's own session is untouched.
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);

      // Enabling the member again does not bring the old sessions back; signing in does.
      await a.client.patch(api(`/users/${m.userId}`), { status: 'active' });
      expectUnauthenticated(await m.client.get(api('/auth/me')));
      const again = new Client(t.app);
      expect((await again.post(api('/auth/dev-login'), { email: m.email })).json().status).toBe('signed_in');
      expect((await again.get(api('/auth/me'))).statusCode).toBe(200);
    });

    it("disabling someone in one organisation leaves their session in another organisation working, and drops it from /auth/me's list", async () => {
      const { a, b } = await personInTwoOrgs(t.app, ['viewer']);
      const inB = new Client(t.app);
      await inB.post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      await b.client.patch(api(`/users/${a.userId}`), { status: 'disabled' });
      expectUnauthenticated(await inB.get(api('/auth/me')));
      const me = await a.client.get(api('/auth/me'));
      expect(me.statusCode).toBe(200);
      expect(me.json().tenants.map((x: { id: string }) => x.id)).toEqual([a.tenant.id]);
    });

    it('a session ends after SESSION_TTL_SECONDS', async () => {
      const a = await onboardAdmin(t.app);
      clock.advance(t.config.sessionTtlSeconds - 1);
      expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
      clock.advance(2);
      expectUnauthenticated(await a.client.get(api('/auth/me')));
    });
  });
});
