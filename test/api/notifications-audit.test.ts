import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  addMember,
  api,
  Client,
  expectValidation,
  onboardAdmin,
  startTestApp,
  TestClock,
  type TestApp,
} from '../support/harness.js';

/**
 * Notifications (GET /notifications, POST /notifications/{notification_id}/read; signed in) and
 * the audit log (GET /audit; audit:read). The clock is moved by hand, so "newest first" is about
 * distinct times rather than insertion order.
 */

type Res = { statusCode: number; json(): any; body: string };

const correlation = (prefix: string) => `${prefix}-${randomBytes(8).toString('hex')}`;

function expectUnauthenticated(res: Res) {
  expect(res.statusCode).toBe(401);
  expect(res.json().error.code).toBe('unauthenticated');
}

function expectForbidden(res: Res, permission: string) {
  expect(res.statusCode).toBe(403);
  expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: permission } });
}

function expectNotFound(res: Res, label?: string) {
  expect(res.statusCode, label).toBe(404);
  expect(res.json().error.code, label).toBe('not_found');
}

function expectInvalidCursor(res: Res, label: string) {
  expect(res.statusCode, label).toBe(422);
  expect(res.json().error.code, label).toBe('invalid_cursor');
}

/** Follows next_cursor from the first page to the last. */
async function walk(client: Client, path: string, limit?: number) {
  const pages: any[][] = [];
  let cursor: string | null = null;
  do {
    const params = [limit ? `limit=${limit}` : '', cursor ? `cursor=${encodeURIComponent(cursor)}` : ''].filter(Boolean);
    const sep = path.includes('?') ? '&' : '?';
    const url: string = params.length ? `${path}${sep}${params.join('&')}` : path;
    const res = await client.get(api(url));
    expect(res.statusCode, url).toBe(200);
    const body = res.json();
    pages.push(body.items);
    cursor = body.next_cursor;
    expect(pages.length).toBeLessThan(100);
  } while (cursor);
  return { pages, items: pages.flat() };
}

const ids = (items: Array<{ id: string }>) => items.map((x) => x.id);

describe('notifications and the audit log', () => {
  let t: TestApp;
  const clock = new TestClock();
  const tick = () => clock.advance(1);

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  describe('GET /notifications', () => {
    it("lists the signed-in person's own notifications in this organisation, newest first", async () => {
      const a = await onboardAdmin(t.app, 'Notes Org');
      const adminNotes = (await a.client.get(api('/notifications'))).json();
      expect(adminNotes.next_cursor).toBeNull();
      expect(adminNotes.items).toEqual([
        {
          id: expect.any(String),
          kind: 'organisation.welcome',
          title: expect.any(String),
          body: expect.any(String),
          read: false,
          read_at: null,
          created_at: expect.any(String),
        },
      ]);

      tick();
      const m = await addMember(t.app, a.client, ['viewer']);
      tick();
      await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] });
      const list = (await m.client.get(api('/notifications'))).json();
      expect(list.items.map((n: { kind: string }) => n.kind)).toEqual(['membership.roles_changed', 'membership.added']);
      const times = list.items.map((n: { created_at: string }) => Date.parse(n.created_at));
      expect(times[0]).toBeGreaterThan(times[1]);
      // Each person sees only their own.
      expect(ids((await a.client.get(api('/notifications'))).json().items)).toEqual(ids(adminNotes.items));
    });

    it('keeps the notifications of each organisation apart for a person in two organisations', async () => {
      const a = await onboardAdmin(t.app, 'Home Notes');
      const b = await onboardAdmin(t.app, 'Away Notes');
      tick();
      expect((await b.client.post(api('/users'), { email: a.email, display_name: 'Visiting Ada', roles: ['auditor'] })).statusCode).toBe(201);
      // In A the person sees only A's welcome.
      expect((await a.client.get(api('/notifications'))).json().items.map((n: { kind: string }) => n.kind)).toEqual([
        'organisation.welcome',
      ]);
      const inB = new Client(t.app);
      await inB.post(api('/auth/dev-login'), { email: a.email, tenant_id: b.tenant.id });
      expect((await inB.get(api('/notifications'))).json().items.map((n: { kind: string }) => n.kind)).toEqual([
        'membership.added',
      ]);
    });

    it('pages 20 at a time by default, and next_cursor walks every notification once', async () => {
      const a = await onboardAdmin(t.app, 'Many Notes');
      const m = await addMember(t.app, a.client, ['viewer']);
      for (let i = 0; i < 24; i++) {
        tick();
        const res = await a.client.patch(api(`/users/${m.userId}`), { roles: [i % 2 ? 'viewer' : 'auditor'] });
        expect(res.statusCode).toBe(200);
      }
      const first = (await m.client.get(api('/notifications'))).json();
      expect(first.items).toHaveLength(20);
      expect(first.next_cursor).toEqual(expect.any(String));

      const byDefault = await walk(m.client, '/notifications');
      expect(byDefault.pages.map((p) => p.length)).toEqual([20, 5]);
      expect(ids(byDefault.pages[0]!)).toEqual(ids(first.items));
      const all = byDefault.items;
      expect(new Set(ids(all)).size).toBe(25);
      expect(all.at(-1).kind).toBe('membership.added');
      const times = all.map((n: { created_at: string }) => Date.parse(n.created_at));
      expect([...times].sort((x, y) => y - x)).toEqual(times);

      const byFour = await walk(m.client, '/notifications', 4);
      expect(byFour.pages.map((p) => p.length)).toEqual([4, 4, 4, 4, 4, 4, 1]);
      expect(ids(byFour.items)).toEqual(ids(all));
      const max = (await m.client.get(api('/notifications?limit=200'))).json();
      expect(ids(max.items)).toEqual(ids(all));
      expect(max.next_cursor).toBeNull();
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/notifications')));
    });

    it.each([
      ['0', '/notifications?limit=0'],
      ['201', '/notifications?limit=201'],
      ['-5', '/notifications?limit=-5'],
      ['many', '/notifications?limit=many'],
    ])('answers 422 naming query.limit for limit=%s', async (_, url) => {
      const a = await onboardAdmin(t.app, 'Limit Notes');
      expectValidation(await a.client.get(api(url)), 'query.limit');
    });

    it("answers 422 invalid_cursor for a garbled cursor, another person's cursor or another list's", async () => {
      const a = await onboardAdmin(t.app, 'Cursor Notes');
      const m1 = await addMember(t.app, a.client, ['viewer']);
      const m2 = await addMember(t.app, a.client, ['viewer']);
      for (const m of [m1, m2]) {
        tick();
        await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] });
      }
      const m1Cursor = (await m1.client.get(api('/notifications?limit=1'))).json().next_cursor as string;
      expect(m1Cursor).toEqual(expect.any(String));
      expect((await m1.client.get(api(`/notifications?cursor=${encodeURIComponent(m1Cursor)}`))).statusCode).toBe(200);
      const auditCursor = (await a.client.get(api('/audit?limit=1'))).json().next_cursor as string;
      const cases: Array<[string, Client, string]> = [
        ['garbage', m1.client, 'garbage'],
        ['tampered', m1.client, `x${m1Cursor}`],
        ['body only', m1.client, m1Cursor.split('.')[0]!],
        ["another person's cursor", m2.client, m1Cursor],
        ['a cursor of /audit', a.client, auditCursor],
      ];
      for (const [label, client, cursor] of cases) {
        expectInvalidCursor(await client.get(api(`/notifications?cursor=${encodeURIComponent(cursor)}`)), label);
      }
    });
  });

  describe('POST /notifications/{notification_id}/read', () => {
    it('answers 204 and marks only that notification read, at the time it was read', async () => {
      const a = await onboardAdmin(t.app, 'Read Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      tick();
      await a.client.patch(api(`/users/${m.userId}`), { roles: ['auditor'] });
      const [newest, oldest] = (await m.client.get(api('/notifications'))).json().items;
      tick();
      const readAt = clock.now().toISOString();
      const res = await m.client.post(api(`/notifications/${oldest.id}/read`));
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      const after = (await m.client.get(api('/notifications'))).json().items;
      expect(after).toEqual([
        expect.objectContaining({ id: newest.id, read: false, read_at: null }),
        expect.objectContaining({ id: oldest.id, read: true, read_at: readAt }),
      ]);
      expect(Date.parse(after[1].read_at)).toBe(Date.parse(readAt));
    });

    it("answers 404 for another person's notification, another organisation's, and an unknown id", async () => {
      const a = await onboardAdmin(t.app, 'Owner Org');
      const m = await addMember(t.app, a.client, ['viewer']);
      const [note] = (await m.client.get(api('/notifications'))).json().items;
      const other = await onboardAdmin(t.app, 'Stranger Org');

      // The member also belongs to the other organisation; signed in there, A's notification is not theirs to read.
      await other.client.post(api('/users'), { email: m.email, display_name: 'Also Here', roles: ['viewer'] });
      const mElsewhere = new Client(t.app);
      await mElsewhere.post(api('/auth/dev-login'), { email: m.email, tenant_id: other.tenant.id });

      const cases: Array<[string, Client, string]> = [
        ['the administrator of the same organisation', a.client, note.id],
        ["another organisation's administrator", other.client, note.id],
        ['the same person signed in to another organisation', mElsewhere, note.id],
        ['an id nobody has', m.client, randomUUID()],
      ];
      for (const [label, client, id] of cases) {
        expectNotFound(await client.post(api(`/notifications/${id}/read`)), label);
      }
      expect((await m.client.get(api('/notifications'))).json().items[0]).toMatchObject({ id: note.id, read: false, read_at: null });
    });

    it('answers 422 naming path.notification_id for an id that is not a uuid', async () => {
      const a = await onboardAdmin(t.app, 'Bad Id Org');
      expectValidation(await a.client.post(api('/notifications/not-a-uuid/read')), 'path.notification_id');
      expectValidation(await a.client.post(api('/notifications/42/read')), 'path.notification_id');
    });

    it('answers 401 without a session', async () => {
      const a = await onboardAdmin(t.app, 'Anon Read Org');
      const [note] = (await a.client.get(api('/notifications'))).json().items;
      expectUnauthenticated(await new Client(t.app).post(api(`/notifications/${note.id}/read`)));
      expect((await a.client.get(api('/notifications'))).json().items[0].read).toBe(false);
    });
  });

  describe('GET /audit', () => {
    /** An organisation with a known history, one second apart: onboarded, member added, settings changed, a denial. */
    async function history(name: string) {
      const a = await onboardAdmin(t.app, name);
      tick();
      const corrCreate = correlation('created');
      const add = await a.client.post(
        api('/users'),
        { email: `audited-${randomBytes(4).toString('hex')}@example.com`, display_name: 'Audited Member', roles: ['viewer'] },
        { 'x-correlation-id': corrCreate },
      );
      expect(add.statusCode).toBe(201);
      const member = new Client(t.app);
      await member.post(api('/auth/dev-login'), { email: add.json().email });
      tick();
      const corrSettings = correlation('settings');
      expect((await a.client.patch(api('/settings'), { approval_ttl_seconds: 120 }, { 'x-correlation-id': corrSettings })).statusCode).toBe(200);
      tick();
      const corrDenied = correlation('denied');
      expectForbidden(await member.get(api('/audit'), { 'x-correlation-id': corrDenied }), 'audit:read');
      tick();
      return { ...a, memberId: add.json().id as string, member, corrCreate, corrSettings, corrDenied };
    }

    it('lists the entries newest first', async () => {
      const h = await history('Order Org');
      const res = await h.client.get(api('/audit'));
      expect(res.statusCode).toBe(200);
      const items = res.json().items;
      expect(res.json().next_cursor).toBeNull();
      expect(items.map((e: { action: string }) => e.action)).toEqual([
        'permission.denied',
        'settings.updated',
        'user.created',
        'tenant.onboarded',
      ]);
      const times = items.map((e: { at: string }) => Date.parse(e.at));
      for (let i = 1; i < times.length; i++) expect(times[i - 1]).toBeGreaterThan(times[i]);
      expect(items[1]).toMatchObject({
        id: expect.any(String),
        actor: { type: 'person', id: h.userId },
        target_type: expect.any(String),
        target_id: h.tenant.id,
        outcome: 'success',
        correlation_id: h.corrSettings,
        details: expect.objectContaining({ approval_ttl_seconds: { from: 900, to: 120 } }),
      });
    });

    it('records a missing permission as denied, naming the permission, with the correlation ID', async () => {
      const h = await history('Denied Org');
      const entries = (await h.client.get(api('/audit?outcome=denied'))).json().items;
      expect(entries).toEqual([
        expect.objectContaining({
          action: 'permission.denied',
          outcome: 'denied',
          actor: { type: 'person', id: h.memberId },
          correlation_id: h.corrDenied,
          details: { required_permission: 'audit:read' },
        }),
      ]);
    });

    it.each([
      ['action', 'action=user.created', ['user.created']],
      ['action', 'action=settings.updated', ['settings.updated']],
      ['outcome', 'outcome=success', ['settings.updated', 'user.created', 'tenant.onboarded']],
      ['outcome', 'outcome=denied', ['permission.denied']],
    ] as const)('narrows by %s (%s)', async (_, query, expected) => {
      const h = await history(`Filter ${query}`);
      const res = await h.client.get(api(`/audit?${query}`));
      expect(res.statusCode).toBe(200);
      expect(res.json().items.map((e: { action: string }) => e.action)).toEqual(expected);
    });

    it('narrows by actor_id and by target_id, and by several filters together', async () => {
      const h = await history('Actor Target Org');
      const all = (await h.client.get(api('/audit'))).json().items as Array<{ id: string; action: string }>;
      const subsetOf = (items: Array<{ id: string }>) => all.filter((e) => ids(items).includes(e.id));

      const byMember = (await h.client.get(api(`/audit?actor_id=${h.memberId}`))).json().items;
      expect(byMember.map((e: { action: string }) => e.action)).toEqual(['permission.denied']);
      const byAdmin = (await h.client.get(api(`/audit?actor_id=${h.userId}`))).json().items;
      expect(byAdmin.map((e: { action: string }) => e.action)).toEqual(['settings.updated', 'user.created', 'tenant.onboarded']);

      const byTarget = (await h.client.get(api(`/audit?target_id=${h.memberId}`))).json().items;
      expect(byTarget).toEqual([expect.objectContaining({ action: 'user.created', correlation_id: h.corrCreate })]);
      const byTenant = (await h.client.get(api(`/audit?target_id=${h.tenant.id}`))).json().items;
      expect(byTenant.map((e: { action: string }) => e.action)).toEqual(['settings.updated', 'tenant.onboarded']);

      // Filtered lists keep the unfiltered order.
      for (const items of [byMember, byAdmin, byTarget, byTenant]) expect(ids(items)).toEqual(ids(subsetOf(items)));

      const combined = (await h.client.get(api(`/audit?actor_id=${h.userId}&target_id=${h.tenant.id}&action=settings.updated`))).json().items;
      expect(combined.map((e: { correlation_id: string }) => e.correlation_id)).toEqual([h.corrSettings]);
      expect((await h.client.get(api(`/audit?actor_id=${h.memberId}&outcome=success`))).json().items).toEqual([]);
      expect((await h.client.get(api('/audit?action=no.such.action'))).json().items).toEqual([]);
    });

    it('pages newest first with next_cursor, without repeating or skipping an entry', async () => {
      const h = await history('Paging Audit Org');
      for (let i = 0; i < 5; i++) {
        tick();
        await h.client.patch(api('/settings'), { approval_ttl_seconds: 200 + i });
      }
      const all = (await h.client.get(api('/audit'))).json();
      expect(all.items).toHaveLength(9);
      expect(all.next_cursor).toBeNull();
      for (const limit of [1, 2, 4, 9]) {
        const walked = await walk(h.client, '/audit', limit);
        expect(walked.pages.length, `limit ${limit}`).toBe(Math.ceil(9 / limit));
        for (const page of walked.pages) expect(page.length).toBeLessThanOrEqual(limit);
        expect(ids(walked.items), `limit ${limit}`).toEqual(ids(all.items));
      }
      const filtered = await walk(h.client, '/audit?action=settings.updated', 2);
      expect(filtered.items).toHaveLength(6);
      expect(ids(filtered.items)).toEqual(ids(all.items.filter((e: { action: string }) => e.action === 'settings.updated')));
    });

    it("never shows another organisation's entries", async () => {
      const a = await history('Isolated A');
      const b = await history('Isolated B');
      const aItems = (await walk(a.client, '/audit', 200)).items;
      const bItems = (await walk(b.client, '/audit', 200)).items;
      expect(aItems).toHaveLength(4);
      expect(bItems).toHaveLength(4);
      const bCorrelations = [b.corrCreate, b.corrSettings, b.corrDenied];
      for (const e of aItems) {
        expect(bCorrelations).not.toContain(e.correlation_id);
        expect([b.userId, b.memberId]).not.toContain(e.actor.id);
        expect([b.tenant.id, b.memberId]).not.toContain(e.target_id);
      }
      for (const q of [`actor_id=${b.userId}`, `actor_id=${b.memberId}`, `target_id=${b.tenant.id}`, `target_id=${b.memberId}`]) {
        expect((await a.client.get(api(`/audit?${q}`))).json().items, q).toEqual([]);
      }
    });

    it('answers 401 without a session', async () => {
      expectUnauthenticated(await new Client(t.app).get(api('/audit')));
    });

    it.each([
      ['security_admin', 200],
      ['auditor', 200],
      ['approver', 403],
      ['agent_developer', 403],
      ['viewer', 403],
    ] as const)('as %s answers %i (audit:read); a denial is itself audited', async (role, status) => {
      const a = await onboardAdmin(t.app, `Audit Roles ${role}`);
      const m = await addMember(t.app, a.client, [role]);
      const corr = correlation(role);
      const res = await m.client.get(api('/audit'), { 'x-correlation-id': corr });
      const denials = (await a.client.get(api(`/audit?actor_id=${m.userId}&outcome=denied`))).json().items;
      if (status === 403) {
        expectForbidden(res, 'audit:read');
        expect(denials).toEqual([
          expect.objectContaining({ correlation_id: corr, details: { required_permission: 'audit:read' } }),
        ]);
      } else {
        expect(res.statusCode).toBe(200);
        expect(ids(res.json().items)).toEqual(ids((await a.client.get(api('/audit'))).json().items.filter(
          (e: { correlation_id: string }) => e.correlation_id !== corr,
        )));
        expect(denials).toEqual([]);
      }
    });

    it.each([
      ['0', '/audit?limit=0'],
      ['201', '/audit?limit=201'],
      ['x', '/audit?limit=x'],
    ])('answers 422 naming query.limit for limit=%s', async (_, url) => {
      const a = await onboardAdmin(t.app, 'Audit Limits');
      expectValidation(await a.client.get(api(url)), 'query.limit');
    });

    it("answers 422 invalid_cursor for a garbled cursor, a cursor of /users, or another organisation's", async () => {
      const a = await history('Cursor Audit A');
      const b = await history('Cursor Audit B');
      const good = (await a.client.get(api('/audit?limit=1'))).json().next_cursor as string;
      expect((await a.client.get(api(`/audit?cursor=${encodeURIComponent(good)}`))).statusCode).toBe(200);
      const usersCursor = (await a.client.get(api('/users?limit=1'))).json().next_cursor as string;
      const bCursor = (await b.client.get(api('/audit?limit=1'))).json().next_cursor as string;
      expect(usersCursor).toEqual(expect.any(String));
      const cases: Array<[string, string]> = [
        ['garbage', 'not-a-cursor'],
        ['tampered', `${good.slice(0, 4)}${good.slice(5)}`],
        ['signature only', `.${good.split('.')[1]}`],
        ['a cursor of /users', usersCursor],
        ["another organisation's cursor", bCursor],
      ];
      for (const [label, cursor] of cases) {
        expectInvalidCursor(await a.client.get(api(`/audit?cursor=${encodeURIComponent(cursor)}`)), label);
      }
    });
  });
});
