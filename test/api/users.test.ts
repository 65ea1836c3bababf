import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  api,
  Client,
  expectValidation,
  onboardAdmin,
  startTestApp,
  type TestApp,
} from '../support/harness.js';

/**
 * People of an organisation (spec "Users, roles and settings"):
 * GET /users (user:read), POST /users (user:manage), PATCH /users/{user_id} (user:manage).
 */

type Res = { statusCode: number; json(): any; headers: Record<string, unknown> };

const newEmail = (prefix = 'person') => `${prefix}-${randomBytes(5).toString('hex')}@example.com`;
const correlation = (prefix = 'users') => `${prefix}-${randomBytes(8).toString('hex')}`;
const uuidRe = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function expectUnauthenticated(res: Res) {
  expect(res.statusCode).toBe(401);
  expect(res.json().error).toMatchObject({ code: 'unauthenticated', correlation_id: expect.any(String) });
}

function expectForbidden(res: Res, permission: string) {
  expect(res.statusCode).toBe(403);
  expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: permission } });
}

function expectNotFound(res: Res) {
  expect(res.statusCode).toBe(404);
  expect(res.json().error.code).toBe('not_found');
}

function expectInvalidCursor(res: Res, label: string) {
  expect(res.statusCode, label).toBe(422);
  expect(res.json().error.code, label).toBe('invalid_cursor');
}

/** Follows next_cursor from the first page to the last. */
async function walk(client: Client, path: string, limit: number) {
  const pages: any[][] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const url: string = `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await client.get(api(url));
    expect(res.statusCode, url).toBe(200);
    const body = res.json();
    pages.push(body.items);
    cursor = body.next_cursor;
    expect(pages.length).toBeLessThan(100);
  } while (cursor);
  return { pages, items: pages.flat() };
}

/** Clients of one member per built-in role other than org_admin, in one organisation. */
const MEMBER_ROLES = ['security_admin', 'approver', 'agent_developer', 'auditor', 'viewer'] as const;
type MemberRole = (typeof MEMBER_ROLES)[number];

describe('people of an organisation', () => {
  let t: TestApp;
  let org: Awaited<ReturnType<typeof onboardAdmin>>;
  const members = {} as Record<MemberRole, { client: Client; userId: string; email: string }>;

  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    org = await onboardAdmin(t.app, 'Roles Org');
    for (const role of MEMBER_ROLES) members[role] = await addMember(t.app, org.client, [role]);
  });
  afterAll(async () => t.close());

  describe('GET /users', () => {
    it('lists the members of the organisation with their roles, status and version', async () => {
      const res = await org.client.get(api('/users'));
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.next_cursor).toBeNull();
      expect(body.items).toHaveLength(1 + MEMBER_ROLES.length);
      expect(body.items).toContainEqual(
        expect.objectContaining({ id: org.userId, email: org.email, display_name: 'Ada Admin', roles: ['org_admin'], status: 'active' }),
      );
      for (const role of MEMBER_ROLES) {
        expect(body.items).toContainEqual(
          expect.objectContaining({
            id: members[role].userId,
            email: members[role].email,
            display_name: 'Mem Ber',
            roles: [role],
            status: 'active',
            version: 1,
          }),
        );
      }
    });

    it('answers 401 without a session, and with a session cookie that is not a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/users')));
      expectUnauthenticated(await new Client(t.app).get(api('/users'), { cookie: 'tollgate_session=not-a-session' }));
    });

    it.each([
      ['security_admin', 200],
      ['auditor', 200],
      ['approver', 403],
      ['agent_developer', 403],
      ['viewer', 403],
    ] as const)('as %s answers %i (user:read)', async (role, status) => {
      const res = await members[role].client.get(api('/users'));
      if (status === 403) expectForbidden(res, 'user:read');
      else expect(res.statusCode).toBe(200);
    });

    it('walks every page once with next_cursor and never repeats or skips a member', async () => {
      const a = await onboardAdmin(t.app, 'Pager Org');
      const emails = [a.email];
      for (let i = 0; i < 8; i++) {
        const email = newEmail(`pager${i}`);
        expect((await a.client.post(api('/users'), { email, display_name: `Pager ${i}`, roles: ['viewer'] })).statusCode).toBe(201);
        emails.push(email);
      }
      for (const limit of [1, 3, 4, 9, 200]) {
        const { pages, items } = await walk(a.client, '/users', limit);
        for (const page of pages) expect(page.length).toBeLessThanOrEqual(limit);
        expect(pages.length).toBe(Math.max(1, Math.ceil(emails.length / limit)));
        const seen = items.map((u: { email: string }) => u.email);
        expect(new Set(seen).size, `limit ${limit}`).toBe(seen.length);
        expect([...seen].sort()).toEqual([...emails].sort());
      }
    });

    it('serves 50 members a page by default', async () => {
      const a = await onboardAdmin(t.app, 'Big Org');
      for (let i = 0; i < 51; i++) {
        const res = await a.client.post(api('/users'), { email: newEmail(`bulk${i}`), display_name: `Bulk ${i}`, roles: ['viewer'] });
        expect(res.statusCode).toBe(201);
      }
      const first = (await a.client.get(api('/users'))).json();
      expect(first.items).toHaveLength(50);
      expect(first.next_cursor).toEqual(expect.any(String));
      const second = (await a.client.get(api(`/users?cursor=${encodeURIComponent(first.next_cursor)}`))).json();
      expect(second.items).toHaveLength(2);
      expect(second.next_cursor).toBeNull();
      const ids = [...first.items, ...second.items].map((u: { id: string }) => u.id);
      expect(new Set(ids).size).toBe(52);
    });

    it.each([
      ['0', '/users?limit=0'],
      ['201', '/users?limit=201'],
      ['-1', '/users?limit=-1'],
      ['2.5', '/users?limit=2.5'],
      ['ten', '/users?limit=ten'],
    ])('answers 422 naming query.limit for limit=%s', async (_, url) => {
      expectValidation(await org.client.get(api(url)), 'query.limit');
    });

    it('accepts the bounds limit=1 and limit=200', async () => {
      const one = await org.client.get(api('/users?limit=1'));
      expect(one.statusCode).toBe(200);
      expect(one.json().items).toHaveLength(1);
      expect(one.json().next_cursor).toEqual(expect.any(String));
      const max = await org.client.get(api('/users?limit=200'));
      expect(max.statusCode).toBe(200);
      expect(max.json().items).toHaveLength(1 + MEMBER_ROLES.length);
    });

    it('answers 422 invalid_cursor for a garbled or forged cursor', async () => {
      const good = (await org.client.get(api('/users?limit=1'))).json().next_cursor as string;
      expect((await org.client.get(api(`/users?limit=1&cursor=${encodeURIComponent(good)}`))).statusCode).toBe(200);
      const [body, sig] = good.split('.') as [string, string];
      // The same position claim, signed with a key that is not the service's.
      const forgedBody = Buffer.from(JSON.stringify({ t: '1970-01-01T00:00:00.000Z', id: randomUUID() })).toString('base64url');
      const wrongKeySig = createHmac('sha256', 'not-the-secret').update(forgedBody).digest().subarray(0, 16).toString('base64url');
      const flipped = `${body.slice(0, -1)}${body.endsWith('A') ? 'B' : 'A'}.${sig}`;
      const cases: Array<[string, string]> = [
        ['garbage', 'garbage'],
        ['truncated signature', good.slice(0, -3)],
        ['extra character', `${good}x`],
        ['body only', body],
        ['three parts', `${good}.${sig}`],
        ['flipped body character', flipped],
        ['another position with this signature', `${forgedBody}.${sig}`],
        ['signed with another key', `${forgedBody}.${wrongKeySig}`],
      ];
      for (const [label, bad] of cases) {
        expectInvalidCursor(await org.client.get(api(`/users?cursor=${encodeURIComponent(bad)}`)), label);
      }
    });

    it("answers 422 invalid_cursor for a cursor of another list or of another organisation's list", async () => {
      const auditCursor = (await org.client.get(api('/audit?limit=1'))).json().next_cursor;
      expect(auditCursor).toEqual(expect.any(String));
      expectInvalidCursor(await org.client.get(api(`/users?cursor=${encodeURIComponent(auditCursor)}`)), 'audit cursor');

      const b = await onboardAdmin(t.app, 'Other Org');
      await addMember(t.app, b.client, ['viewer']);
      const otherOrgCursor = (await b.client.get(api('/users?limit=1'))).json().next_cursor;
      expect(otherOrgCursor).toEqual(expect.any(String));
      expectInvalidCursor(await org.client.get(api(`/users?cursor=${encodeURIComponent(otherOrgCursor)}`)), 'other org cursor');
    });

    it('filters with q on email and on display name, case-insensitively', async () => {
      const a = await onboardAdmin(t.app, 'Search Org');
      const tag = randomBytes(3).toString('hex');
      const grace = await a.client.post(api('/users'), {
        email: `grace.${tag}@navy.example.com`,
        display_name: 'Grace Hopper',
        roles: ['viewer'],
      });
      const alan = await a.client.post(api('/users'), {
        email: `alan.${tag}@bletchley.example.com`,
        display_name: 'Alan Turing',
        roles: ['auditor'],
      });
      const ids = async (q: string) =>
        ((await a.client.get(api(`/users?q=${encodeURIComponent(q)}`))).json().items as Array<{ id: string }>)
          .map((u) => u.id)
          .sort();
      expect(await ids('navy.example')).toEqual([grace.json().id]);
      expect(await ids('BLETCHLEY')).toEqual([alan.json().id]);
      expect(await ids('Hopper')).toEqual([grace.json().id]);
      expect(await ids('alan tur')).toEqual([alan.json().id]);
      expect(await ids(tag)).toEqual([grace.json().id, alan.json().id].sort());
      expect(await ids('nobody-by-this-name')).toEqual([]);
      // The organisation's administrator is matched like anyone else.
      expect(await ids('Ada Admin')).toEqual([a.userId]);
    });

    it("never lists another organisation's people, even when searching for them", async () => {
      const a = await onboardAdmin(t.app, 'Org A');
      const b = await onboardAdmin(t.app, 'Org B');
      const bMember = await addMember(t.app, b.client, ['viewer']);
      const aItems = (await a.client.get(api('/users?limit=200'))).json().items as Array<{ id: string }>;
      expect(aItems.map((u) => u.id)).toEqual([a.userId]);
      expect((await a.client.get(api(`/users?q=${encodeURIComponent(bMember.email)}`))).json().items).toEqual([]);
      expect((await a.client.get(api(`/users?q=${encodeURIComponent(b.email)}`))).json().items).toEqual([]);
      const bIds = ((await b.client.get(api('/users'))).json().items as Array<{ id: string }>).map((u) => u.id).sort();
      expect(bIds).toEqual([b.userId, bMember.userId].sort());
    });
  });

  describe('POST /users', () => {
    it('answers 201 with the new member, who is then listed', async () => {
      const a = await onboardAdmin(t.app, 'Create Org');
      const email = newEmail('grace');
      const res = await a.client.post(api('/users'), { email, display_name: 'Grace Hopper', roles: ['approver', 'viewer'] });
      expect(res.statusCode).toBe(201);
      const user = res.json();
      expect(user).toMatchObject({
        email,
        display_name: 'Grace Hopper',
        roles: ['approver', 'viewer'],
        status: 'active',
        version: expect.any(Number),
      });
      expect(user.id).toMatch(uuidRe);
      const listed = (await a.client.get(api('/users'))).json().items;
      expect(listed).toContainEqual(expect.objectContaining({ id: user.id, email, roles: ['approver', 'viewer'] }));
    });

    it('answers 401 without a session', async () => {
      const res = await new Client(t.app).post(api('/users'), { email: newEmail(), display_name: 'No Body', roles: ['viewer'] });
      expectUnauthenticated(res);
    });

    it.each(MEMBER_ROLES)('answers 403 forbidden naming user:manage to a %s, and adds nobody', async (role) => {
      const email = newEmail(`denied-${role}`);
      const res = await members[role].client.post(api('/users'), { email, display_name: 'Not Added', roles: ['viewer'] });
      expectForbidden(res, 'user:manage');
      expect((await org.client.get(api(`/users?q=${encodeURIComponent(email)}`))).json().items).toEqual([]);
    });

    it('answers 409 conflict for a person who already belongs to the organisation, whatever the email case', async () => {
      const a = await onboardAdmin(t.app, 'Conflict Org');
      const email = newEmail('twice');
      expect((await a.client.post(api('/users'), { email, display_name: 'First Time', roles: ['viewer'] })).statusCode).toBe(201);
      for (const again of [email, email.toUpperCase(), a.email]) {
        const res = await a.client.post(api('/users'), { email: again, display_name: 'Second Time', roles: ['auditor'] });
        expect(res.statusCode, again).toBe(409);
        expect(res.json().error.code).toBe('conflict');
      }
      const items = (await a.client.get(api('/users'))).json().items as Array<{ display_name: string; roles: string[] }>;
      expect(items).toHaveLength(2);
      expect(items.some((u) => u.display_name === 'Second Time')).toBe(false);
    });

    it("adds an administrator of organisation A to organisation B: one person, two organisations", async () => {
      const a = await onboardAdmin(t.app, 'Home Org');
      const b = await onboardAdmin(t.app, 'Guest Org');
      const res = await b.client.post(api('/users'), { email: a.email, display_name: 'Guest Ada', roles: ['auditor'] });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ id: a.userId, email: a.email, display_name: 'Guest Ada', roles: ['auditor'] });

      // Signed in to B, the person holds B's roles; A is untouched.
      const inB = new Client(t.app);
      const login = await inB.post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      expect(login.statusCode).toBe(200);
      const meB = (await inB.get(api('/auth/me'))).json();
      expect(meB).toMatchObject({ user: { id: a.userId }, tenant: { id: b.tenant.id }, roles: ['auditor'] });
      const meA = (await a.client.get(api('/auth/me'))).json();
      expect(meA).toMatchObject({ tenant: { id: a.tenant.id }, roles: ['org_admin'] });
      expect(meA.tenants.map((x: { id: string }) => x.id).sort()).toEqual([a.tenant.id, b.tenant.id].sort());
      expect((await a.client.get(api('/users'))).json().items.map((u: { id: string }) => u.id)).toEqual([a.userId]);
    });

    it('sends the new member a membership.added notification in that organisation', async () => {
      const a = await onboardAdmin(t.app, 'Notify Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const items = (await m.client.get(api('/notifications'))).json().items;
      expect(items).toEqual([expect.objectContaining({ kind: 'membership.added', read: false })]);
      // The administrator who added them is not notified of it.
      const adminKinds = (await a.client.get(api('/notifications'))).json().items.map((n: { kind: string }) => n.kind);
      expect(adminKinds).not.toContain('membership.added');
    });

    it("audits user.created with the actor, the target and the request's X-Correlation-ID", async () => {
      const a = await onboardAdmin(t.app, 'Audit Org');
      const corr = correlation('create');
      const res = await a.client.post(
        api('/users'),
        { email: newEmail('audited'), display_name: 'Audited Person', roles: ['auditor'] },
        { 'x-correlation-id': corr },
      );
      expect(res.statusCode).toBe(201);
      expect(res.headers['x-correlation-id']).toBe(corr);
      const entries = (await a.client.get(api('/audit?action=user.created'))).json().items;
      expect(entries).toEqual([
        expect.objectContaining({
          action: 'user.created',
          outcome: 'success',
          correlation_id: corr,
          actor: { type: 'person', id: a.userId },
          target_id: res.json().id,
        }),
      ]);
    });

    it('accepts display_name of 2 and of 200 characters', async () => {
      const a = await onboardAdmin(t.app, 'Bounds Org');
      for (const name of ['Al', 'n'.repeat(200)]) {
        const res = await a.client.post(api('/users'), { email: newEmail('bound'), display_name: name, roles: ['viewer'] });
        expect(res.statusCode, `${name.length} characters`).toBe(201);
        expect(res.json().display_name).toBe(name);
      }
    });

    const valid = () => ({ email: newEmail('valid'), display_name: 'Valid Name', roles: ['viewer'] as unknown });
    it.each([
      ['email', 'missing', { email: undefined }],
      ['email', 'not an email', { email: 'not-an-email' }],
      ['email', 'not a string', { email: 42 }],
      ['email', 'longer than 254', { email: `${'x'.repeat(250)}@example.com` }],
      ['display_name', 'missing', { display_name: undefined }],
      ['display_name', '1 character', { display_name: 'A' }],
      ['display_name', '201 characters', { display_name: 'x'.repeat(201) }],
      ['display_name', 'not a string', { display_name: 12 }],
      ['roles', 'missing', { roles: undefined }],
      ['roles', 'not an array', { roles: 'viewer' }],
      ['roles.0', 'an unknown role', { roles: ['emperor'] }],
      ['roles.1', 'an unknown role after a known one', { roles: ['viewer', 'root'] }],
      ['roles.0', 'not a string', { roles: [7] }],
    ])('answers 422 naming %s when it is %s', async (field, _, over) => {
      const body = { ...valid(), ...over };
      const res = await org.client.post(api('/users'), body);
      expectValidation(res, field);
      expect(res.json().error.details).toEqual(
        expect.arrayContaining([expect.objectContaining({ field, message: expect.any(String) })]),
      );
    });
  });

  describe('PATCH /users/{user_id}', () => {
    it('changes roles, status and display name, bumping the version', async () => {
      const a = await onboardAdmin(t.app, 'Patch Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const before = (await a.client.get(api('/users'))).json().items.find((u: { id: string }) => u.id === m.userId);
      const res = await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor', 'approver'], display_name: 'New Name' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        id: m.userId,
        email: m.email,
        roles: ['auditor', 'approver'],
        display_name: 'New Name',
        status: 'active',
        version: before.version + 1,
      });
      expect((await m.client.get(api('/auth/me'))).json().roles.sort()).toEqual(['approver', 'auditor']);
      const listed = (await a.client.get(api('/users'))).json().items.find((u: { id: string }) => u.id === m.userId);
      expect(listed).toMatchObject({ roles: ['auditor', 'approver'], display_name: 'New Name', version: before.version + 1 });
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).patch(api(`/users/${members.viewer.userId}`), { display_name: 'Nope Nope' }));
    });

    it.each(MEMBER_ROLES)('answers 403 forbidden naming user:manage to a %s, and changes nothing', async (role) => {
      const target = members.viewer;
      const res = await members[role].client.patch(api(`/users/${target.userId}`), { roles: ['org_admin'] });
      expectForbidden(res, 'user:manage');
      expect((await target.client.get(api('/auth/me'))).json().roles).toEqual(['viewer']);
    });

    it("answers 404 for another organisation's person and for an unknown id", async () => {
      const a = await onboardAdmin(t.app, 'Patch A');
      const b = await onboardAdmin(t.app, 'Patch B');
      const bMember = await addMember(t.app, b.client, ['viewer']);
      for (const id of [b.userId, bMember.userId, randomUUID()]) {
        expectNotFound(await a.client.patch(api(`/users/${id}`), { roles: ['org_admin'], status: 'disabled' }));
      }
      expect((await bMember.client.get(api('/auth/me'))).json().roles).toEqual(['viewer']);
      expect((await b.client.get(api('/auth/me'))).json().roles).toEqual(['org_admin']);
    });

    it.each([
      ['path.user_id', 'a path id that is not a uuid', 'not-a-uuid', {}],
      ['path.user_id', 'a numeric path id', '12345', { display_name: 'Fine Name' }],
      ['roles.0', 'an unknown role', null, { roles: ['wizard'] }],
      ['roles', 'roles not an array', null, { roles: 'viewer' }],
      ['status', 'an unknown status', null, { status: 'gone' }],
      ['display_name', 'a 1-character name', null, { display_name: 'x' }],
      ['display_name', 'a 201-character name', null, { display_name: 'x'.repeat(201) }],
    ])('answers 422 naming %s for %s', async (field, _, id, body) => {
      expectValidation(await org.client.patch(api(`/users/${id ?? members.viewer.userId}`), body), field);
    });

    it('answers 409 version_conflict for a stale If-Match and 200 for the current version', async () => {
      const a = await onboardAdmin(t.app, 'IfMatch Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const current = (await a.client.get(api('/users'))).json().items.find((u: { id: string }) => u.id === m.userId).version;
      const stale = await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] }, { 'if-match': String(current + 1) });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error.code).toBe('version_conflict');
      expect((await m.client.get(api('/auth/me'))).json().roles).toEqual(['viewer']);

      const ok = await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] }, { 'if-match': `"${current}"` });
      expect(ok.statusCode).toBe(200);
      expect(ok.json()).toMatchObject({ roles: ['auditor'], version: current + 1 });
      // The version read before that change is now stale.
      const again = await a.client.patch(api(`/users/${m.userId}`), { roles: ['viewer'] }, { 'if-match': String(current) });
      expect(again.statusCode).toBe(409);
      expect(again.json().error.code).toBe('version_conflict');
    });

    it("disabling a member ends their sessions: their client gets 401, even after they are enabled again", async () => {
      const a = await onboardAdmin(t.app, 'Disable Org');
      const m = await addMember(t.app, a.client, ['auditor']);
      const second = new Client(t.app);
      expect((await second.post(api('/auth/dev-login'), { email: m.email })).statusCode).toBe(200);
      expect((await m.client.get(api('/users'))).statusCode).toBe(200);

      const res = await a.client.patch(api(`/users/${m.userId}`), { status: 'disabled' });
      expect(res.statusCode).toBe(200);
      expect(res.json().status).toBe('disabled');
      expectUnauthenticated(await m.client.get(api('/users')));
      expectUnauthenticated(await second.get(api('/auth/me')));
      // A disabled member cannot sign in to the organisation.
      expectNotFound(await new Client(t.app).post(api('/auth/dev-login'), { email: m.email, tenant_id: a.tenant.id }));

      const enabled = await a.client.patch(api(`/users/${m.userId}`), { status: 'active' });
      expect(enabled.json().status).toBe('active');
      // The sessions were ended, not merely suspended.
      expectUnauthenticated(await m.client.get(api('/auth/me')));
      expectUnauthenticated(await second.get(api('/auth/me')));
      const fresh = new Client(t.app);
      expect((await fresh.post(api('/auth/dev-login'), { email: m.email })).statusCode).toBe(200);
      expect((await fresh.get(api('/users'))).statusCode).toBe(200);
    });

    it('refuses to demote or disable the last active org_admin with 409 conflict', async () => {
      const a = await onboardAdmin(t.app, 'Last Admin Org');
      for (const body of [{ roles: ['security_admin'] }, { status: 'disabled' }, { roles: ['viewer'], status: 'disabled' }]) {
        const res = await a.client.patch(api(`/users/${a.userId}`), body);
        expect(res.statusCode, JSON.stringify(body)).toBe(409);
        expect(res.json().error.code).toBe('conflict');
      }
      expect((await a.client.get(api('/auth/me'))).json().roles).toEqual(['org_admin']);
      // Adding a role while staying administrator is fine.
      expect((await a.client.patch(api(`/users/${a.userId}`), { roles: ['org_admin', 'auditor'] })).statusCode).toBe(200);

      // A disabled administrator does not count as one.
      const other = await addMember(t.app, a.client, ['org_admin']);
      expect((await a.client.patch(api(`/users/${other.userId}`), { status: 'disabled' })).statusCode).toBe(200);
      const still = await a.client.patch(api(`/users/${a.userId}`), { roles: ['auditor'] });
      expect(still.statusCode).toBe(409);
      expect(still.json().error.code).toBe('conflict');

      // With a second active administrator, the first may step down; then the second is the last.
      expect((await a.client.patch(api(`/users/${other.userId}`), { status: 'active' })).statusCode).toBe(200);
      expect((await a.client.patch(api(`/users/${a.userId}`), { roles: ['auditor'] })).statusCode).toBe(200);
      const otherClient = new Client(t.app);
      await otherClient.post(api('/auth/dev-login'), { email: other.email });
      const last = await otherClient.patch(api(`/users/${other.userId}`), { status: 'disabled' });
      expect(last.statusCode).toBe(409);
      expect(last.json().error.code).toBe('conflict');
    });

    it('keeps an active org_admin when the last two step down at the same moment', async () => {
      // Two requests in flight together: each alone would be allowed, together they would leave nobody.
      const outcomes: string[] = [];
      for (let i = 0; i < 8; i++) {
        const a = await onboardAdmin(t.app, `Race Org ${i}`);
        const b = await addMember(t.app, a.client, ['org_admin']);
        const [ra, rb] = await Promise.all([
          a.client.patch(api(`/users/${a.userId}`), { roles: ['viewer'] }),
          b.client.patch(api(`/users/${b.userId}`), { status: 'disabled' }),
        ]);
        outcomes.push([ra.statusCode, rb.statusCode].sort().join('+'));
      }
      expect(outcomes).toEqual(Array(8).fill('200+409'));
    });

    it('notifies the member of a role change, and not of a rename', async () => {
      const a = await onboardAdmin(t.app, 'Roles Notify Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const kinds = async () => ((await m.client.get(api('/notifications'))).json().items as Array<{ kind: string }>).map((n) => n.kind);
      expect(await kinds()).toEqual(['membership.added']);
      await a.client.patch(api(`/users/${m.userId}`), { display_name: 'Only Renamed' });
      expect(await kinds()).toEqual(['membership.added']);
      await a.client.patch(api(`/users/${m.userId}`), { roles: ['approver'] });
      expect(await kinds()).toEqual(['membership.roles_changed', 'membership.added']);
    });

    it("audits user.updated with what changed and the request's X-Correlation-ID", async () => {
      const a = await onboardAdmin(t.app, 'Update Audit Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const corr = correlation('update');
      const res = await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'], status: 'disabled' }, { 'x-correlation-id': corr });
      expect(res.statusCode).toBe(200);
      const entries = (await a.client.get(api(`/audit?action=user.updated&target_id=${m.userId}`))).json().items;
      expect(entries).toEqual([
        expect.objectContaining({
          outcome: 'success',
          correlation_id: corr,
          actor: { type: 'person', id: a.userId },
          target_id: m.userId,
          details: expect.objectContaining({
            roles: { from: ['viewer'], to: ['auditor'] },
            status: { from: 'active', to: 'disabled' },
          }),
        }),
      ]);
    });
  });
});
