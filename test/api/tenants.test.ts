import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
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
 * Organisations: creating one (POST /tenants/onboard), reading and renaming
 * the current one (GET/PATCH /tenants/current), with the permission checks of item 7.
 */

const newEmail = (prefix = 'person') => `${prefix}-${randomBytes(5).toString('hex')}@example.com`;
const correlation = () => `tenants-${randomBytes(8).toString('hex')}`;

const onboardBody = (over: Record<string, unknown> = {}) => ({
  name: 'Initech',
  slug: uniqueSlug('initech'),
  primary_region: 'eu-west',
  admin_display_name: 'Bill Lumbergh',
  ...over,
});

/** A slug of exactly `length` characters, unique enough for one test database. */
const slugOf = (length: number) => `s${randomBytes(4).toString('hex')}`.padEnd(length, 'a').slice(0, length);

/** A new person with only an onboarding cookie. */
async function newcomer(app: FastifyInstance, prefix = 'newcomer') {
  const client = new Client(app);
  const email = newEmail(prefix);
  const login = await client.post(api('/auth/dev-login'), { email });
  expect(login.json().status).toBe('onboarding');
  return { client, email, userId: login.json().user.id as string };
}

function expectUnauthenticated(res: { statusCode: number; json(): any }) {
  expect(res.statusCode).toBe(401);
  expect(res.json().error.code).toBe('unauthenticated');
}

/**
 * 403 forbidden naming `permission`, and the denial in the organisation's audit log (read by its
 * administrator), with the request's correlation ID.
 */
async function expectAuditedDenial(
  res: { statusCode: number; json(): any },
  permission: string,
  admin: Client,
  actorId: string,
  correlationId: string,
  method: string,
) {
  expect(res.statusCode).toBe(403);
  expect(res.json().error).toMatchObject({
    code: 'forbidden',
    correlation_id: correlationId,
    details: { required_permission: permission },
  });
  const audit = await admin.get(api(`/audit?action=permission.denied&actor_id=${actorId}&limit=200`));
  expect(audit.statusCode).toBe(200);
  const entry = audit.json().items.find((e: { correlation_id: string }) => e.correlation_id === correlationId);
  expect(entry).toMatchObject({
    action: 'permission.denied',
    outcome: 'denied',
    actor: { type: 'person', id: actorId },
    target_type: 'operation',
    details: { required_permission: permission },
  });
  expect(entry.target_id).toMatch(new RegExp(`^${method} .*/tenants/current$`));
}

describe('organisations', () => {
  let t: TestApp;
  const clock = new TestClock();
  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '10000' } });
  });
  afterAll(async () => t.close());

  describe('POST /tenants/onboard', () => {
    it('creates the organisation: 201, its creator is organisation administrator with a session', async () => {
      const n = await newcomer(t.app, 'founder');
      const body = onboardBody({ name: 'Founders Ltd', primary_region: 'us-west', admin_display_name: 'Fran Founder' });
      const res = await n.client.post(api('/tenants/onboard'), body, { 'x-correlation-id': 'tenants-onboard-0001' });
      expect(res.statusCode).toBe(201);
      const now = clock.now().toISOString();
      expect(res.json()).toEqual({
        tenant: {
          id: expect.stringMatching(/^[0-9a-f-]{36}$/),
          slug: body.slug,
          name: 'Founders Ltd',
          primary_region: 'us-west',
          plan: expect.any(String),
          created_at: now,
          updated_at: now,
          version: 1,
        },
        roles: ['org_admin'],
        csrf_token: expect.any(String),
      });
      const tenantId = res.json().tenant.id as string;

      // The onboarding cookie is replaced by a session and a fresh CSRF cookie.
      expect(n.client.cookies.has('tollgate_onboarding')).toBe(false);
      expect(n.client.cookies.has('tollgate_session')).toBe(true);
      expect(n.client.csrf).toBe(res.json().csrf_token);

      const me = (await n.client.get(api('/auth/me'))).json();
      expect(me).toMatchObject({
        user: { id: n.userId, email: n.email, display_name: 'Fran Founder' },
        tenant: { id: tenantId, slug: body.slug },
        roles: ['org_admin'],
        tenants: [{ id: tenantId, slug: body.slug, name: 'Founders Ltd', roles: ['org_admin'] }],
      });
      expect(me.permissions).toHaveLength(40);

      const users = (await n.client.get(api('/users'))).json().items;
      expect(users).toEqual([expect.objectContaining({ id: n.userId, roles: ['org_admin'], status: 'active' })]);

      const audit = (await n.client.get(api('/audit?action=tenant.onboarded'))).json().items;
      expect(audit).toEqual([
        expect.objectContaining({
          actor: { type: 'person', id: n.userId },
          target_id: tenantId,
          outcome: 'success',
          correlation_id: 'tenants-onboard-0001',
        }),
      ]);

      // A later dev sign-in lands in the new organisation.
      const again = await new Client(t.app).post(api('/auth/dev-login'), { email: n.email });
      expect(again.json()).toMatchObject({ status: 'signed_in', tenant: { id: tenantId } });
    });

    it('starts the new organisation with a welcome notification for its creator', async () => {
      const n = await newcomer(t.app);
      await n.client.post(api('/tenants/onboard'), onboardBody({ name: 'Welcome Org' }));
      const notes = (await n.client.get(api('/notifications'))).json().items;
      expect(notes).toEqual([expect.objectContaining({ kind: 'organisation.welcome', read: false, read_at: null })]);
      expect(notes[0].title).toContain('Welcome Org');
    });

    it('lets a signed-in person create an additional organisation; the session moves to it', async () => {
      const a = await onboardAdmin(t.app, 'Original');
      const csrfBefore = a.client.csrf;
      const res = await a.client.post(api('/tenants/onboard'), onboardBody({ name: 'Additional', admin_display_name: 'Ada Again' }));
      expect(res.statusCode).toBe(201);
      const created = res.json().tenant.id as string;
      expect(res.json().roles).toEqual(['org_admin']);
      expect(res.json().csrf_token).toBe(a.client.csrf);
      expect(a.client.csrf).toBe(csrfBefore);

      const me = (await a.client.get(api('/auth/me'))).json();
      expect(me.tenant.id).toBe(created);
      expect(me.roles).toEqual(['org_admin']);
      expect(me.user.display_name).toBe('Ada Again');
      expect(me.tenants.map((x: { id: string }) => x.id).sort()).toEqual([a.tenant.id, created].sort());
      expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ id: created, name: 'Additional' });

      // The new organisation starts with its own welcome notification.
      const notes = (await a.client.get(api('/notifications'))).json().items;
      expect(notes).toEqual([expect.objectContaining({ kind: 'organisation.welcome', read: false })]);
      expect(notes[0].title).toContain('Additional');

      // The first organisation is unchanged and still reachable.
      await a.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id });
      expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ id: a.tenant.id, name: 'Original' });
    });

    it('lets a member without any permission create their own organisation, where they are administrator', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      const res = await m.client.post(api('/tenants/onboard'), onboardBody());
      expect(res.statusCode).toBe(201);
      expect((await m.client.get(api('/auth/me'))).json()).toMatchObject({ tenant: { id: res.json().tenant.id }, roles: ['org_admin'] });
      await m.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id });
      expect((await m.client.get(api('/auth/me'))).json().roles).toEqual(['viewer']);
    });

    it('accepts the bounds: name 2 and 200, slug 3 and 63 characters, admin_display_name 2 and 200', async () => {
      for (const over of [
        { name: 'Ab', slug: slugOf(3), admin_display_name: 'Al' },
        { name: 'n'.repeat(200), slug: slugOf(63), admin_display_name: 'd'.repeat(200) },
        { slug: `0-${slugOf(10)}-9` },
      ]) {
        const n = await newcomer(t.app);
        const body = onboardBody(over);
        const res = await n.client.post(api('/tenants/onboard'), body);
        expect(res.statusCode, JSON.stringify(over)).toBe(201);
        expect(res.json().tenant).toMatchObject({ name: body.name, slug: body.slug });
        expect((await n.client.get(api('/auth/me'))).json().user.display_name).toBe(body.admin_display_name);
      }
    });

    it.each(['eu-west', 'us-east', 'ap-southeast'])('accepts primary_region %s', async (region) => {
      const n = await newcomer(t.app);
      const res = await n.client.post(api('/tenants/onboard'), onboardBody({ primary_region: region }));
      expect(res.statusCode).toBe(201);
      expect(res.json().tenant.primary_region).toBe(region);
    });

    it.each([
      ['name', { name: 'A' }],
      ['name', { name: 'n'.repeat(201) }],
      ['name', { name: '' }],
      ['name', { name: 42 }],
      ['name', { name: null }],
      ['name', { name: undefined }],
      ['slug', { slug: 'ab' }],
      ['slug', { slug: 's'.repeat(64) }],
      ['slug', { slug: 'Acme-Payments' }],
      ['slug', { slug: 'acme_payments' }],
      ['slug', { slug: 'acme payments' }],
      ['slug', { slug: '-acme' }],
      ['slug', { slug: 'acme-' }],
      ['slug', { slug: 'acmé-pay' }],
      ['slug', { slug: 123 }],
      ['slug', { slug: undefined }],
      ['primary_region', { primary_region: 'mars-north' }],
      ['primary_region', { primary_region: 'EU-WEST' }],
      ['primary_region', { primary_region: '' }],
      ['primary_region', { primary_region: undefined }],
      ['admin_display_name', { admin_display_name: 'B' }],
      ['admin_display_name', { admin_display_name: 'd'.repeat(201) }],
      ['admin_display_name', { admin_display_name: 7 }],
      ['admin_display_name', { admin_display_name: undefined }],
    ])('answers 422 validation_failed naming %s for %j, and creates nothing', async (field, over) => {
      const n = await newcomer(t.app);
      expectValidation(await n.client.post(api('/tenants/onboard'), onboardBody(over)), field);
      expect((await n.client.get(api('/auth/onboarding'))).json().tenants).toBe(0);
    });

    it('names every bad field at once', async () => {
      const n = await newcomer(t.app);
      const res = await n.client.post(api('/tenants/onboard'), { name: 'x', slug: 'X', primary_region: 'moon', admin_display_name: '' });
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('validation_failed');
      const fields = res.json().error.details.map((d: { field: string }) => d.field);
      expect(fields).toEqual(expect.arrayContaining(['name', 'slug', 'primary_region', 'admin_display_name']));
    });

    it('answers 409 conflict for a slug already taken, and leaves the caller as they were', async () => {
      const a = await onboardAdmin(t.app);
      const n = await newcomer(t.app);
      const res = await n.client.post(api('/tenants/onboard'), onboardBody({ slug: a.tenant.slug }));
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'conflict', details: { field: 'slug' } });
      expect((await n.client.get(api('/auth/onboarding'))).json().tenants).toBe(0);
      expect(n.client.cookies.has('tollgate_session')).toBe(false);
      // Another slug then works with the same onboarding cookie.
      expect((await n.client.post(api('/tenants/onboard'), onboardBody())).statusCode).toBe(201);

      // A signed-in person hitting a taken slug stays in their organisation.
      const b = await onboardAdmin(t.app);
      const taken = await b.client.post(api('/tenants/onboard'), onboardBody({ slug: a.tenant.slug }));
      expect(taken.statusCode).toBe(409);
      const me = (await b.client.get(api('/auth/me'))).json();
      expect(me.tenant.id).toBe(b.tenant.id);
      expect(me.tenants).toHaveLength(1);
    });

    it('answers 403 csrf_failed without the CSRF header, and creates nothing', async () => {
      const n = await newcomer(t.app);
      const body = onboardBody();
      const cookie = [...n.client.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
      const missing = await t.app.inject({ method: 'POST', url: api('/tenants/onboard'), headers: { cookie }, payload: body });
      expect(missing.statusCode).toBe(403);
      expect(missing.json().error.code).toBe('csrf_failed');
      const wrong = await n.client.post(api('/tenants/onboard'), body, { 'x-csrf-token': 'not-the-token' });
      expect(wrong.statusCode).toBe(403);
      expect(wrong.json().error.code).toBe('csrf_failed');
      // Nothing was created: the same slug is still free.
      expect((await n.client.post(api('/tenants/onboard'), body)).statusCode).toBe(201);
    });

    it('answers 401 without an onboarding cookie or session, or with a tampered or expired onboarding cookie', async () => {
      expectUnauthenticated(await new Client(t.app).post(api('/tenants/onboard'), onboardBody()));

      const tampered = await newcomer(t.app);
      const good = tampered.client.cookies.get('tollgate_onboarding')!;
      tampered.client.cookies.set('tollgate_onboarding', `${good.slice(0, -3)}zzz`);
      expectUnauthenticated(await tampered.client.post(api('/tenants/onboard'), onboardBody()));

      const late = await newcomer(t.app);
      clock.advance(t.config.onboardingTtlSeconds + 1);
      expectUnauthenticated(await late.client.post(api('/tenants/onboard'), onboardBody()));
    });
  });

  describe('GET /tenants/current', () => {
    it('shows the organisation of the session', async () => {
      const a = await onboardAdmin(t.app, 'Current Org');
      const res = await a.client.get(api('/tenants/current'));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        id: a.tenant.id,
        slug: a.tenant.slug,
        name: 'Current Org',
        primary_region: 'eu-west',
        plan: expect.any(String),
        created_at: expect.any(String),
        updated_at: expect.any(String),
        version: 1,
      });
    });

    it.each(['org_admin', 'security_admin', 'approver', 'agent_developer', 'auditor', 'viewer'])(
      'is open to a member whose role is %s (tenant:read)',
      async (role) => {
        const a = await onboardAdmin(t.app);
        const m = await addMember(t.app, a.client, [role]);
        const res = await m.client.get(api('/tenants/current'));
        expect(res.statusCode).toBe(200);
        expect(res.json().id).toBe(a.tenant.id);
      },
    );

    it('answers 403 forbidden naming tenant:read to a member without it, and audits the denial', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, []);
      const corr = correlation();
      const res = await m.client.get(api('/tenants/current'), { 'x-correlation-id': corr });
      await expectAuditedDenial(res, 'tenant:read', a.client, m.userId, corr, 'GET');
    });

    it('answers 401 without a session, and to an onboarding cookie', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/tenants/current')));
      const n = await newcomer(t.app);
      expectUnauthenticated(await n.client.get(api('/tenants/current')));
    });

    it("never shows another organisation: a person in two sees the session's one", async () => {
      const a = await onboardAdmin(t.app, 'Mine');
      const b = await onboardAdmin(t.app, 'Theirs');
      await b.client.post(api('/users'), { email: a.email, display_name: 'Guest', roles: ['viewer'] });
      expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ id: a.tenant.id, name: 'Mine' });
      expect((await b.client.get(api('/tenants/current'))).json()).toMatchObject({ id: b.tenant.id, name: 'Theirs' });
    });
  });

  describe('PATCH /tenants/current', () => {
    it('renames the organisation: 200, version and updated_at move, audited as tenant.updated', async () => {
      const a = await onboardAdmin(t.app, 'Before');
      clock.advance(60);
      const res = await a.client.patch(api('/tenants/current'), { name: 'After' }, { 'x-correlation-id': 'tenants-rename-0001' });
      expect(res.statusCode).toBe(200);
      const renamed = res.json();
      expect(renamed).toMatchObject({ id: a.tenant.id, slug: a.tenant.slug, name: 'After', version: 2 });
      expect(renamed.updated_at).toBe(clock.now().toISOString());
      expect(Date.parse(renamed.created_at)).toBeLessThan(Date.parse(renamed.updated_at));
      expect((await a.client.get(api('/tenants/current'))).json()).toEqual(renamed);
      expect((await a.client.get(api('/auth/me'))).json().tenant.name).toBe('After');

      clock.advance(1); // the audit log lists newest first
      const again = await a.client.patch(api('/tenants/current'), { name: 'After Again' });
      expect(again.json().version).toBe(3);

      const audit = (await a.client.get(api('/audit?action=tenant.updated'))).json().items;
      expect(audit).toHaveLength(2);
      expect(audit[1]).toMatchObject({
        action: 'tenant.updated',
        actor: { type: 'person', id: a.userId },
        target_type: 'tenant',
        target_id: a.tenant.id,
        outcome: 'success',
        correlation_id: 'tenants-rename-0001',
        details: { name: { from: 'Before', to: 'After' } },
      });
      expect(audit[0].details).toEqual({ name: { from: 'After', to: 'After Again' } });
    });

    it('honours If-Match when sent: a stale version answers 409 version_conflict and changes nothing', async () => {
      const a = await onboardAdmin(t.app, 'Versioned');
      const stale = await a.client.patch(api('/tenants/current'), { name: 'Stale Write' }, { 'if-match': '"5"' });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error).toMatchObject({ code: 'version_conflict', details: { current_version: 1 } });
      expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ name: 'Versioned', version: 1 });

      const ok = await a.client.patch(api('/tenants/current'), { name: 'Fresh Write' }, { 'if-match': '"1"' });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toMatchObject({ name: 'Fresh Write', version: 2 });
      // The version just used is stale now; a bare number works as well as an entity tag.
      const reused = await a.client.patch(api('/tenants/current'), { name: 'Lost Update' }, { 'if-match': '1' });
      expect(reused.statusCode).toBe(409);
      expect(reused.json().error.code).toBe('version_conflict');
      expect((await a.client.patch(api('/tenants/current'), { name: 'Third Write' }, { 'if-match': '2' })).json().version).toBe(3);
      // Without If-Match the write goes through (the header is optional here, so no 428).
      expect((await a.client.patch(api('/tenants/current'), { name: 'No Header' })).json()).toMatchObject({ version: 4 });
      expect((await a.client.get(api('/audit?action=tenant.updated'))).json().items).toHaveLength(3);
    });

    it('changes nothing for an empty body or a null name', async () => {
      const a = await onboardAdmin(t.app, 'Steady');
      for (const body of [{}, { name: null }, { name: 'Steady' }]) {
        const res = await a.client.patch(api('/tenants/current'), body);
        expect(res.statusCode, JSON.stringify(body)).toBe(200);
        expect(res.json()).toMatchObject({ name: 'Steady', version: 1 });
      }
      expect((await a.client.get(api('/audit?action=tenant.updated'))).json().items).toEqual([]);
    });

    it.each(['viewer', 'approver', 'security_admin'])(
      'answers 403 forbidden naming tenant:manage to a %s, audits the denial and changes nothing',
      async (role) => {
        const a = await onboardAdmin(t.app, 'Guarded');
        const m = await addMember(t.app, a.client, [role]);
        const corr = correlation();
        const res = await m.client.patch(api('/tenants/current'), { name: 'Taken Over' }, { 'x-correlation-id': corr });
        await expectAuditedDenial(res, 'tenant:manage', a.client, m.userId, corr, 'PATCH');
        expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ name: 'Guarded', version: 1 });
      },
    );

    it("applies the roles of the session's organisation, and audits a denial in that organisation only", async () => {
      const a = await onboardAdmin(t.app, 'Home');
      const b = await onboardAdmin(t.app, 'Away');
      await b.client.post(api('/users'), { email: a.email, display_name: 'Visitor', roles: ['viewer'] });
      await a.client.post(api('/auth/switch-tenant'), { tenant_id: b.tenant.id });

      const corr = correlation();
      const res = await a.client.patch(api('/tenants/current'), { name: 'Renamed Away' }, { 'x-correlation-id': corr });
      await expectAuditedDenial(res, 'tenant:manage', b.client, a.userId, corr, 'PATCH');
      expect((await b.client.get(api('/tenants/current'))).json().name).toBe('Away');

      // Back home, where the person is administrator: the denial is not in this organisation's log.
      await a.client.post(api('/auth/switch-tenant'), { tenant_id: a.tenant.id });
      const home = (await a.client.get(api(`/audit?action=permission.denied&actor_id=${a.userId}`))).json().items;
      expect(home.find((e: { correlation_id: string }) => e.correlation_id === corr)).toBeUndefined();
      const renamed = await a.client.patch(api('/tenants/current'), { name: 'Home Renamed' });
      expect(renamed.json()).toMatchObject({ id: a.tenant.id, name: 'Home Renamed' });
      expect((await b.client.get(api('/tenants/current'))).json().name).toBe('Away');
    });

    it.each([
      ['name', { name: 'A' }],
      ['name', { name: '' }],
      ['name', { name: 'n'.repeat(201) }],
      ['name', { name: 42 }],
      ['name', { name: ['Two', 'Names'] }],
    ])('answers 422 validation_failed naming %s for %j', async (field, body) => {
      const a = await onboardAdmin(t.app, 'Valid');
      expectValidation(await a.client.patch(api('/tenants/current'), body), field);
      expect((await a.client.get(api('/tenants/current'))).json()).toMatchObject({ name: 'Valid', version: 1 });
    });

    it('accepts names of exactly 2 and 200 characters', async () => {
      const a = await onboardAdmin(t.app);
      for (const name of ['Ab', 'n'.repeat(200)]) {
        const res = await a.client.patch(api('/tenants/current'), { name });
        expect(res.statusCode).toBe(200);
        expect(res.json().name).toBe(name);
      }
    });

    it('answers 422 naming header.if-match for an If-Match that is not a version', async () => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.patch(api('/tenants/current'), { name: 'Whatever' }, { 'if-match': 'yesterday' }), 'header.if-match');
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).patch(api('/tenants/current'), { name: 'Anonymous' }));
    });

    it('answers 403 csrf_failed with a wrong CSRF header, and keeps the name', async () => {
      const a = await onboardAdmin(t.app, 'Protected');
      const res = await a.client.patch(api('/tenants/current'), { name: 'Forged' }, { 'x-csrf-token': 'forged' });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe('csrf_failed');
      expect((await a.client.get(api('/tenants/current'))).json().name).toBe('Protected');
    });
  });
});
