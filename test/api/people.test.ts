import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, Client, onboardAdmin, startTestApp, expectValidation, type TestApp } from '../support/harness.js';

describe('users, roles, settings, notifications and audit', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  describe('POST /users', () => {
    it('adds a person with roles, notifies them and audits it with the correlation ID', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.post(
        api('/users'),
        { email: 'Grace@Example.com', display_name: 'Grace Hopper', roles: ['approver', 'approver', 'viewer'] },
        { 'x-correlation-id': 'corr-users-create-1' },
      );
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({
        email: 'Grace@Example.com',
        display_name: 'Grace Hopper',
        roles: ['approver', 'viewer'],
        status: 'active',
        version: 1,
      });
      const audit = (await a.client.get(api(`/audit?action=user.created&target_id=${res.json().id}`))).json().items;
      expect(audit).toEqual([expect.objectContaining({ correlation_id: 'corr-users-create-1', outcome: 'success' })]);

      const grace = new Client(t.app);
      await grace.post(api('/auth/dev-login'), { email: 'grace@example.com' });
      const notes = (await grace.get(api('/notifications'))).json().items;
      expect(notes[0]).toMatchObject({ kind: 'membership.added', read: false });
    });

    it('lets one person belong to two organisations; adding a member twice is a conflict', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const res = await b.client.post(api('/users'), { email: a.email, display_name: 'Also In B', roles: ['auditor'] });
      expect(res.statusCode).toBe(201);
      expect(res.json().id).toBe(a.userId);
      const again = await b.client.post(api('/users'), { email: a.email, display_name: 'Again', roles: ['auditor'] });
      expect(again.statusCode).toBe(409);
      expect(again.json().error.code).toBe('conflict');
      const me = (await a.client.get(api('/auth/me'))).json();
      expect(me.tenants.map((x: { id: string }) => x.id).sort()).toEqual([a.tenant.id, b.tenant.id].sort());
      // Names are per organisation: B's name does not rename the person in A.
      expect(me.user.display_name).toBe('Ada Admin');
    });

    it.each([
      ['email', { email: 'nope' }],
      ['email', { email: `${'x'.repeat(250)}@example.com` }],
      ['display_name', { display_name: 'A' }],
      ['display_name', { display_name: 'x'.repeat(201) }],
      ['roles.0', { roles: ['emperor'] }],
      ['roles', { roles: 'approver' }],
      ['roles', { roles: undefined }],
    ])('answers 422 naming %s for %j', async (field, over) => {
      const a = await onboardAdmin(t.app);
      const body = { email: 'valid@example.com', display_name: 'Valid Name', roles: ['viewer'], ...over };
      expectValidation(await a.client.post(api('/users'), body), field);
    });
  });

  describe('GET /users', () => {
    it('pages through every member once, filters with q, and never shows another organisation', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      await addMember(t.app, b.client, ['viewer']);
      const emails = [a.email];
      for (let i = 0; i < 4; i++) {
        const email = `pager-${i}-${Date.now()}@example.com`;
        await a.client.post(api('/users'), { email, display_name: `Pager ${i}`, roles: ['viewer'] });
        emails.push(email);
      }
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const query: string = `/users?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
        const page = (await a.client.get(api(query))).json();
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((u: { email: string }) => u.email));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen.sort()).toEqual(emails.sort());

      const found = (await a.client.get(api('/users?q=Pager 2'))).json().items;
      expect(found.map((u: { display_name: string }) => u.display_name)).toEqual(['Pager 2']);
      const byEmail = (await a.client.get(api(`/users?q=${encodeURIComponent('%')}`))).json().items;
      expect(byEmail).toEqual([]);
    });

    it.each([
      ['query.limit', '/users?limit=0'],
      ['query.limit', '/users?limit=201'],
      ['query.limit', '/users?limit=ten'],
    ])('answers 422 naming %s for %s', async (field, url) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.get(api(url)), field);
    });

    it('answers 422 invalid_cursor for a garbled, forged or borrowed cursor', async () => {
      const a = await onboardAdmin(t.app);
      await a.client.post(api('/users'), { email: `c1-${Date.now()}@example.com`, display_name: 'C One', roles: [] });
      const good = (await a.client.get(api('/users?limit=1'))).json().next_cursor as string;
      const [body] = good.split('.');
      const forgedBody = Buffer.from(JSON.stringify({ t: '1970-01-01T00:00:00.000Z', id: a.userId })).toString('base64url');
      const auditCursor = (await a.client.get(api('/audit?limit=1'))).json().next_cursor as string;
      const b = await onboardAdmin(t.app);
      for (const bad of [`${good}x`, `${forgedBody}.${good.split('.')[1]}`, body, 'garbage', auditCursor]) {
        const res = await a.client.get(api(`/users?cursor=${encodeURIComponent(bad!)}`));
        expect(res.statusCode, bad).toBe(422);
        expect(res.json().error.code).toBe('invalid_cursor');
      }
      // Another organisation's person cannot use a cursor of this one.
      const borrowed = await b.client.get(api(`/users?cursor=${encodeURIComponent(good)}`));
      expect(borrowed.json().error.code).toBe('invalid_cursor');
    });
  });

  describe('PATCH /users/{user_id}', () => {
    it('changes roles and name, honours If-Match, notifies and audits', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      const stale = await a.client.patch(api(`/users/${m.userId}`), { roles: ['approver'] }, { 'if-match': '5' });
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error.code).toBe('version_conflict');
      const res = await a.client.patch(api(`/users/${m.userId}`), { roles: ['approver'], display_name: 'Renamed' }, { 'if-match': '1' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ roles: ['approver'], display_name: 'Renamed', version: 2 });
      expect((await m.client.get(api('/auth/me'))).json().roles).toEqual(['approver']);
      const notes = (await m.client.get(api('/notifications'))).json().items;
      expect(notes[0]).toMatchObject({ kind: 'membership.roles_changed' });
      const audit = (await a.client.get(api(`/audit?action=user.updated&target_id=${m.userId}`))).json().items;
      expect(audit[0].details).toMatchObject({ roles: { from: ['viewer'], to: ['approver'] } });
    });

    it("disabling a member ends their sessions; enabling lets them sign in again", async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      expect((await m.client.get(api('/auth/me'))).statusCode).toBe(200);
      const res = await a.client.patch(api(`/users/${m.userId}`), { status: 'disabled' });
      expect(res.json().status).toBe('disabled');
      expect((await m.client.get(api('/auth/me'))).statusCode).toBe(401);
      const relogin = await new Client(t.app).post(api('/auth/dev-login'), { email: m.email });
      expect(relogin.json().status).toBe('onboarding');
      await a.client.patch(api(`/users/${m.userId}`), { status: 'active' });
      expect((await new Client(t.app).post(api('/auth/dev-login'), { email: m.email })).json().status).toBe('signed_in');
    });

    it('keeps at least one active organisation administrator', async () => {
      const a = await onboardAdmin(t.app);
      const demote = await a.client.patch(api(`/users/${a.userId}`), { roles: ['viewer'] });
      expect(demote.statusCode).toBe(409);
      const disable = await a.client.patch(api(`/users/${a.userId}`), { status: 'disabled' });
      expect(disable.statusCode).toBe(409);
      const other = await addMember(t.app, a.client, ['org_admin']);
      expect((await a.client.patch(api(`/users/${a.userId}`), { roles: ['viewer'] })).statusCode).toBe(200);
      expect((await other.client.get(api('/users'))).statusCode).toBe(200);
    });

    it("answers 404 for another organisation's person", async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const res = await a.client.patch(api(`/users/${b.userId}`), { roles: ['viewer'] });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
      expect((await b.client.get(api('/auth/me'))).json().roles).toEqual(['org_admin']);
    });

    it.each([
      ['path.user_id', 'not-a-uuid', {}],
      ['roles.0', null, { roles: ['wizard'] }],
      ['status', null, { status: 'gone' }],
      ['display_name', null, { display_name: 'x' }],
    ])('answers 422 naming %s', async (field, id, body) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.patch(api(`/users/${id ?? a.userId}`), body), field);
    });
  });

  describe('GET /roles and /roles/permissions', () => {
    it('serves the built-in roles and the 40-permission catalogue with its matrix', async () => {
      const a = await onboardAdmin(t.app);
      const roles = (await a.client.get(api('/roles'))).json().items as Array<{ key: string; permissions: string[] }>;
      expect(roles.map((r) => r.key)).toEqual(['org_admin', 'security_admin', 'approver', 'agent_developer', 'auditor', 'viewer', 'controller']);
      const catalogue = (await a.client.get(api('/roles/permissions'))).json();
      expect(catalogue.permissions).toHaveLength(40);
      for (const r of roles) expect(catalogue.matrix[r.key]).toEqual(r.permissions);
      expect(catalogue.matrix.org_admin).toContain('policy:publish');
      expect(catalogue.matrix.security_admin).toContain('policy:publish');
    });
  });

  describe('GET and PATCH /settings', () => {
    it('starts at the defaults and changes within bounds, audited', async () => {
      const a = await onboardAdmin(t.app);
      expect((await a.client.get(api('/settings'))).json()).toEqual({
        content_retention: 'redacted_excerpts',
        approval_ttl_seconds: 900,
        owners_count_as_self: false,
        version: 1,
      });
      for (const ttl of [60, 86400]) {
        const res = await a.client.patch(api('/settings'), { approval_ttl_seconds: ttl });
        expect(res.statusCode).toBe(200);
        expect(res.json().approval_ttl_seconds).toBe(ttl);
      }
      const res = await a.client.patch(api('/settings'), { content_retention: 'metadata_only' }, { 'if-match': '3' });
      expect(res.json()).toEqual({ content_retention: 'metadata_only', approval_ttl_seconds: 86400, owners_count_as_self: false, version: 4 });
      const stale = await a.client.patch(api('/settings'), { content_retention: 'redacted_excerpts' }, { 'if-match': '3' });
      expect(stale.json().error.code).toBe('version_conflict');
      const audit = (await a.client.get(api('/audit?action=settings.updated'))).json().items;
      expect(audit).toHaveLength(3);
    });

    it.each([
      ['approval_ttl_seconds', { approval_ttl_seconds: 59 }],
      ['approval_ttl_seconds', { approval_ttl_seconds: 86401 }],
      ['approval_ttl_seconds', { approval_ttl_seconds: 90.5 }],
      ['content_retention', { content_retention: 'forever' }],
    ])('answers 422 naming %s for %j', async (field, body) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.patch(api('/settings'), body), field);
    });

    it('lets an auditor read the settings but not change them', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['auditor']);
      expect((await m.client.get(api('/settings'))).statusCode).toBe(200);
      const res = await m.client.patch(api('/settings'), { approval_ttl_seconds: 120 });
      expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'settings:manage' } });
    });
  });

  describe('GET /notifications and POST /notifications/{id}/read', () => {
    it("lists the person's own notifications and marks one read; others' answer 404", async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] });
      const list = (await m.client.get(api('/notifications'))).json();
      expect(list.items.map((n: { kind: string }) => n.kind)).toEqual(['membership.roles_changed', 'membership.added']);
      const [first] = list.items;
      expect((await m.client.post(api(`/notifications/${first.id}/read`))).statusCode).toBe(204);
      const after = (await m.client.get(api('/notifications'))).json().items[0];
      expect(after).toMatchObject({ id: first.id, read: true, read_at: expect.any(String) });

      // The administrator cannot mark the member's notification, nor can another organisation.
      expect((await a.client.post(api(`/notifications/${first.id}/read`))).statusCode).toBe(404);
      const b = await onboardAdmin(t.app);
      expect((await b.client.post(api(`/notifications/${first.id}/read`))).statusCode).toBe(404);
      expectValidation(await m.client.post(api('/notifications/nope/read')), 'path.notification_id');
    });

    it.each([['/notifications?limit=0'], ['/notifications?limit=201'], ['/notifications?cursor=']])(
      'answers 422 for %s',
      async (url) => {
        const a = await onboardAdmin(t.app);
        const res = await a.client.get(api(url));
        expect(res.statusCode).toBe(422);
        expect(['validation_failed', 'invalid_cursor']).toContain(res.json().error.code);
      },
    );

    it('pages with a default of 20', async () => {
      const a = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      for (let i = 0; i < 21; i++) await a.client.patch(api(`/users/${m.userId}`), { roles: [i % 2 ? 'viewer' : 'auditor'] });
      const first = (await m.client.get(api('/notifications'))).json();
      expect(first.items).toHaveLength(20);
      const second = (await m.client.get(api(`/notifications?cursor=${encodeURIComponent(first.next_cursor)}`))).json();
      expect(second.items).toHaveLength(2);
      expect(second.next_cursor).toBeNull();
    });
  });

  describe('GET /audit', () => {
    it('filters by action, actor, outcome and target, newest first, within the organisation', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const m = await addMember(t.app, a.client, ['viewer']);
      await a.client.patch(api(`/users/${m.userId}`), { display_name: 'Changed Name' });
      await m.client.get(api('/settings')); // viewer lacks settings:read: a denial

      const all = (await a.client.get(api('/audit'))).json().items;
      const times = all.map((e: { at: string }) => Date.parse(e.at));
      expect([...times].sort((x, y) => y - x)).toEqual(times);
      expect(all.every((e: { actor: { id: string } }) => e.actor.id !== b.userId)).toBe(true);

      const byAction = (await a.client.get(api('/audit?action=user.updated'))).json().items;
      expect(byAction.map((e: { target_id: string }) => e.target_id)).toEqual([m.userId]);
      const byActor = (await a.client.get(api(`/audit?actor_id=${m.userId}`))).json().items;
      expect(byActor).toEqual([
        expect.objectContaining({ action: 'permission.denied', outcome: 'denied', details: { required_permission: 'settings:read' } }),
      ]);
      const denied = (await a.client.get(api('/audit?outcome=denied'))).json().items;
      expect(denied).toHaveLength(1);
      const byTarget = (await a.client.get(api(`/audit?target_id=${m.userId}`))).json().items;
      expect(byTarget.map((e: { action: string }) => e.action).sort()).toEqual(['user.created', 'user.updated']);
      expect((await b.client.get(api(`/audit?target_id=${m.userId}`))).json().items).toEqual([]);
    });

    it.each([
      ['query.limit', '/audit?limit=0'],
      ['query.limit', '/audit?limit=201'],
      ['query.action', `/audit?action=${'x'.repeat(201)}`],
    ])('answers 422 naming %s for %s', async (field, url) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.get(api(url)), field);
    });

    it('pages newest first without repeating an entry', async () => {
      const a = await onboardAdmin(t.app);
      for (let i = 0; i < 5; i++) await a.client.patch(api('/settings'), { approval_ttl_seconds: 100 + i });
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: Array<{ id: string }>; next_cursor: string | null } = (
          await a.client.get(api(`/audit?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`))
        ).json();
        ids.push(...page.items.map((e) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.length).toBe(6); // onboarding and five settings changes
    });
  });
});
