import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, Client, expectValidation, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * The HTTP platform, through the real app on PostgreSQL: the error envelope, the
 * body-size limit, X-Correlation-ID, rate limits shared by several API processes, health checks and
 * the 500 that says nothing internal.
 */

const CORRELATION_CHARS = /^[A-Za-z0-9._-]{8,100}$/;

/** The spec's envelope: {error: {code, message, correlation_id, details}} and nothing else. */
function expectEnvelope(
  res: { statusCode: number; headers: Record<string, unknown>; json(): any },
  status: number,
  code: string,
  correlationId?: string,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = res.json();
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'correlation_id', 'details', 'message']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  expect(body.error.correlation_id).toMatch(CORRELATION_CHARS);
  // The body names the same correlation ID as the response header.
  expect(body.error.correlation_id).toBe(res.headers['x-correlation-id']);
  if (correlationId) expect(body.error.correlation_id).toBe(correlationId);
  return body.error as { code: string; message: string; correlation_id: string; details: any };
}

describe('HTTP platform', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let viewer: Awaited<ReturnType<typeof addMember>>;

  beforeAll(async () => {
    t = await startTestApp({ env: { BODY_LIMIT_BYTES: '2048' } });
    admin = await onboardAdmin(t.app, 'Platform Org');
    viewer = await addMember(t.app, admin.client, ['viewer']);
  });
  afterAll(async () => t.close());

  describe('error envelope', () => {
    it('401 unauthenticated without a session', async () => {
      const err = expectEnvelope(await new Client(t.app).get(api('/auth/me')), 401, 'unauthenticated');
      expect(err.details).toBeNull();
    });

    it('403 forbidden naming the missing permission', async () => {
      const res = await viewer.client.post(api('/users'), { email: 'someone@example.com', display_name: 'Some One', roles: [] });
      const err = expectEnvelope(res, 403, 'forbidden');
      expect(err.details).toEqual({ required_permission: 'user:manage' });
    });

    it('403 csrf_failed without the CSRF header', async () => {
      const res = await admin.client.patch(api('/settings'), { approval_ttl_seconds: 120 }, { 'x-csrf-token': 'not-the-cookie' });
      expectEnvelope(res, 403, 'csrf_failed');
    });

    it("404 not_found for another organisation's object and for an unknown id", async () => {
      const other = await onboardAdmin(t.app, 'Other Org');
      const cross = await admin.client.patch(api(`/users/${other.userId}`), { display_name: 'Renamed' });
      expectEnvelope(cross, 404, 'not_found');
      const unknown = await admin.client.patch(api(`/users/${randomUUID()}`), { display_name: 'Renamed' });
      expectEnvelope(unknown, 404, 'not_found');
    });

    it('422 validation_failed with an array naming each bad field', async () => {
      const res = await admin.client.post(api('/users'), { email: 'not-an-email', display_name: 'x', roles: ['no-such-role'] });
      const err = expectEnvelope(res, 422, 'validation_failed');
      expect(Array.isArray(err.details)).toBe(true);
      expect(err.details.map((d: { field: string }) => d.field).sort()).toEqual(['display_name', 'email', 'roles.0']);
      for (const d of err.details) expect(typeof d.message).toBe('string');
    });

    it('422 naming query parameters by a query. prefix', async () => {
      expectValidation(await admin.client.get(api('/audit?limit=0')), 'query.limit');
      expectValidation(await admin.client.get(api('/audit?limit=201')), 'query.limit');
      expect((await admin.client.get(api('/audit?limit=200'))).statusCode).toBe(200);
    });

    it('422 invalid_cursor for a garbled cursor and for a cursor of another list', async () => {
      expectEnvelope(await admin.client.get(api('/audit?cursor=garbage')), 422, 'invalid_cursor');
      const page = (await admin.client.get(api('/audit?limit=1'))).json();
      expect(page.next_cursor).toEqual(expect.any(String));
      // The same cursor works for its own list...
      expect((await admin.client.get(api(`/audit?limit=1&cursor=${encodeURIComponent(page.next_cursor)}`))).statusCode).toBe(200);
      // ...not for another organisation's.
      const other = await onboardAdmin(t.app, 'Cursor Org');
      expectEnvelope(await other.client.get(api(`/audit?cursor=${encodeURIComponent(page.next_cursor)}`)), 422, 'invalid_cursor');
    });

    it('an unknown route answers 404 not_found in the envelope, with the correlation ID', async () => {
      const res = await t.app.inject({ url: api('/no/such/operation'), headers: { 'x-correlation-id': 'unknown-route-01' } });
      const err = expectEnvelope(res, 404, 'not_found', 'unknown-route-01');
      expect(err.details).toBeNull();
      expectEnvelope(await t.app.inject({ method: 'DELETE', url: '/nowhere' }), 404, 'not_found');
    });

    it('malformed JSON answers 400 bad_request', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/auth/dev-login'),
        headers: { 'content-type': 'application/json', 'x-correlation-id': 'bad-json-0001' },
        payload: '{"email": "a@example.com",',
      });
      expectEnvelope(res, 400, 'bad_request', 'bad-json-0001');
    });

    it('malformed JSON on a signed-in operation answers 400 bad_request', async () => {
      const broken = await t.app.inject({
        method: 'PATCH',
        url: api('/settings'),
        headers: {
          'content-type': 'application/json',
          cookie: [...admin.client.cookies].map(([k, v]) => `${k}=${v}`).join('; '),
          'x-csrf-token': admin.client.csrf!,
        },
        payload: '{approval_ttl_seconds: 120}',
      });
      expectEnvelope(broken, 400, 'bad_request');
    });

    it('a body over BODY_LIMIT_BYTES answers 413 payload_too_large in the envelope', async () => {
      const big = { email: 'big@example.com', tenant_id: null, padding: 'x'.repeat(4096) };
      const res = await new Client(t.app).post(api('/auth/dev-login'), big, { 'x-correlation-id': 'too-large-0001' });
      const err = expectEnvelope(res, 413, 'payload_too_large', 'too-large-0001');
      expect(err.details).toBeNull();
      // The same on a signed-in operation.
      const signedIn = await admin.client.post(api('/users'), { email: 'x@example.com', display_name: 'y'.repeat(3000), roles: [] });
      expectEnvelope(signedIn, 413, 'payload_too_large');
    });

    it('a body under the limit is accepted', async () => {
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email: `${'a'.repeat(40)}@example.com` });
      expect(res.statusCode).toBe(200);
    });
  });

  describe('X-Correlation-ID', () => {
    it('echoes a valid one in the header and in error bodies', async () => {
      const id = 'Valid.ID_with-all-9';
      const ok = await admin.client.get(api('/auth/me'), { 'x-correlation-id': id });
      expect(ok.statusCode).toBe(200);
      expect(ok.headers['x-correlation-id']).toBe(id);
      expectEnvelope(await new Client(t.app).get(api('/auth/me'), { 'x-correlation-id': id }), 401, 'unauthenticated', id);
    });

    it('accepts exactly 8 and exactly 100 characters', async () => {
      for (const id of ['12345678', 'z'.repeat(100)]) {
        const res = await admin.client.get(api('/auth/me'), { 'x-correlation-id': id });
        expect(res.statusCode).toBe(200);
        expect(res.headers['x-correlation-id']).toBe(id);
      }
    });

    it('generates one when absent, a new one per request, and echoes it', async () => {
      const one = await admin.client.get(api('/auth/me'));
      const two = await admin.client.get(api('/auth/me'));
      expect(one.headers['x-correlation-id']).toMatch(CORRELATION_CHARS);
      expect(two.headers['x-correlation-id']).toMatch(CORRELATION_CHARS);
      expect(one.headers['x-correlation-id']).not.toBe(two.headers['x-correlation-id']);
      const err = expectEnvelope(await new Client(t.app).get(api('/auth/me')), 401, 'unauthenticated');
      expect(err.correlation_id).toMatch(CORRELATION_CHARS);
    });

    it.each([
      ['too short', '1234567'],
      ['too long', 'a'.repeat(101)],
      ['a space', 'has space-in-it'],
      ['a colon', 'abc:defgh'],
      ['a slash', 'abc/defgh'],
      ['a non-ASCII letter', 'corrélation-id'],
    ])('answers 422 validation_failed naming header.x-correlation-id for %s', async (_what, id) => {
      const res = await admin.client.get(api('/auth/me'), { 'x-correlation-id': id });
      const err = expectEnvelope(res, 422, 'validation_failed');
      expect(err.details.map((d: { field: string }) => d.field)).toEqual(['header.x-correlation-id']);
      // The invalid value is not adopted: a generated one replaces it.
      expect(err.correlation_id).not.toBe(id);
    });

    it('is recorded in the audit entry of a write', async () => {
      const id = 'audit-correlation-0001';
      const res = await admin.client.patch(api('/settings'), { approval_ttl_seconds: 1800 }, { 'x-correlation-id': id });
      expect(res.statusCode).toBe(200);
      const items = (await admin.client.get(api('/audit?action=settings.updated'))).json().items;
      expect(items.map((e: { correlation_id: string }) => e.correlation_id)).toContain(id);
    });

    it('is recorded in the audit entry of a denial', async () => {
      const id = 'denied-correlation-0001';
      await viewer.client.patch(api('/settings'), { approval_ttl_seconds: 120 }, { 'x-correlation-id': id });
      const items = (await admin.client.get(api('/audit?action=permission.denied'))).json().items;
      const entry = items.find((e: { correlation_id: string }) => e.correlation_id === id);
      expect(entry).toMatchObject({ outcome: 'denied', actor: { id: viewer.userId } });
    });

    it('is recorded in the log lines of the request', async () => {
      const id = 'log-correlation-00001';
      await admin.client.patch(api('/settings'), { approval_ttl_seconds: 900 }, { 'x-correlation-id': id });
      const lines = t.logs.map((l) => JSON.parse(l)).filter((l) => l.correlation_id === id);
      expect(lines.length).toBeGreaterThanOrEqual(2);
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
      const done = lines.find((l) => l.msg === 'request completed');
      expect(done.res.statusCode).toBe(200);
    });
  });

  describe('health checks', () => {
    it('GET /healthz and GET /readyz answer 200 at the host root', async () => {
      const health = await t.app.inject({ url: '/healthz' });
      expect(health.statusCode).toBe(200);
      const ready = await t.app.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(200);
    });

    it('are not under the API prefix', async () => {
      expectEnvelope(await t.app.inject({ url: api('/healthz') }), 404, 'not_found');
      expectEnvelope(await t.app.inject({ url: api('/readyz') }), 404, 'not_found');
    });
  });
});

describe('rate limits', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.reverse()) await t.close();
    apps.length = 0;
  });
  const start = async (opts: Parameters<typeof startTestApp>[0]) => {
    const t = await startTestApp(opts);
    apps.push(t);
    return t;
  };

  it("the 6th request of one person in a minute answers 429 rate_limited with Retry-After", async () => {
    const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
    const t = await start({ clock, env: { RATE_LIMIT_PERSON_PER_MINUTE: '5' } });
    const a = await onboardAdmin(t.app);
    const b = await onboardAdmin(t.app);
    clock.advance(60 + 20); // a fresh window, 40 seconds before it ends
    for (let i = 1; i <= 5; i++) expect((await a.client.get(api('/auth/me'))).statusCode, `request ${i}`).toBe(200);
    const limited = await a.client.get(api('/auth/me'), { 'x-correlation-id': 'rate-limited-0001' });
    const err = expectEnvelope(limited, 429, 'rate_limited', 'rate-limited-0001');
    expect(limited.headers['retry-after']).toMatch(/^\d+$/);
    expect(Number(limited.headers['retry-after'])).toBe(40);
    expect(err.details).toMatchObject({ limit_per_minute: 5 });
    // Per person: someone else still gets through.
    expect((await b.client.get(api('/auth/me'))).statusCode).toBe(200);
    // Writes count too.
    expectEnvelope(await a.client.patch(api('/settings'), { approval_ttl_seconds: 120 }), 429, 'rate_limited');
    // Once the window has passed, the person is served again.
    clock.advance(40);
    expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
  });

  it('the limit is shared by two API processes on one database', async () => {
    const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
    const env = { RATE_LIMIT_PERSON_PER_MINUTE: '5' };
    const one = await start({ clock, env });
    const two = await start({ clock, env, share: one });
    const a = await onboardAdmin(one.app);
    const onTwo = new Client(two.app);
    for (const [k, v] of a.client.cookies) onTwo.cookies.set(k, v);
    clock.advance(60);

    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      statuses.push((await a.client.get(api('/auth/me'))).statusCode);
      statuses.push((await onTwo.get(api('/auth/me'))).statusCode);
    }
    // Each process saw only 3 requests; together they are 6.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const onOne = await a.client.get(api('/auth/me'));
    expectEnvelope(onOne, 429, 'rate_limited');
    expect(onOne.headers['retry-after']).toMatch(/^\d+$/);
  });

  it('sign-in is limited per IP address', async () => {
    const t = await start({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '3' } });
    const signIn = (email: string, remoteAddress = '127.0.0.1') =>
      t.app.inject({ method: 'POST', url: api('/auth/dev-login'), remoteAddress, payload: { email } });
    const statuses = [];
    // Different people from one address share the address's budget.
    for (let i = 0; i < 3; i++) statuses.push((await signIn(`signin-${i}@example.com`)).statusCode);
    expect(statuses).toEqual([200, 200, 200]);
    const limited = await signIn('signin-4@example.com');
    expectEnvelope(limited, 429, 'rate_limited');
    expect(limited.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
    // Another address has its own budget.
    expect((await signIn('signin-5@example.com', '10.1.2.3')).statusCode).toBe(200);
  });

  it('public operations are limited per IP address', async () => {
    const t = await start({ env: { RATE_LIMIT_PUBLIC_PER_MINUTE: '2' } });
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await t.app.inject({ url: api('/auth/providers') })).statusCode);
    expect(codes).toEqual([200, 200, 429]);
  });

  it('health checks are not rate limited', async () => {
    const t = await start({
      env: { RATE_LIMIT_PUBLIC_PER_MINUTE: '1', RATE_LIMIT_SIGNIN_PER_MINUTE: '1', RATE_LIMIT_PERSON_PER_MINUTE: '1' },
    });
    for (let i = 0; i < 10; i++) {
      const health = await t.app.inject({ url: '/healthz' });
      expect(health.statusCode).toBe(200);
      expect(health.headers['retry-after']).toBeUndefined();
      expect((await t.app.inject({ url: '/readyz' })).statusCode).toBe(200);
    }
  });
});

describe('internal errors and readiness', () => {
  it('a 500 says internal_error and nothing internal', async () => {
    const internals = 'connect ECONNREFUSED 10.9.8.7:5432 password=hunter2-internal at Pool.connect (/srv/api/db.ts:12)';
    const t = await startTestApp({
      routes: (app) => {
        app.get('/test-only/boom', async () => {
          // XX000 (PostgreSQL's internal_error): a fault of ours, not the database being unreachable (that is a 503).
          throw Object.assign(new Error(internals), { code: 'XX000' });
        });
      },
    });
    try {
      const res = await t.app.inject({ url: '/test-only/boom', headers: { 'x-correlation-id': 'internal-error-01' } });
      const err = expectEnvelope(res, 500, 'internal_error', 'internal-error-01');
      expect(err.details).toBeNull();
      for (const leak of ['ECONNREFUSED', '10.9.8.7', 'hunter2', 'Pool.connect', '/srv/api', 'stack']) {
        expect(res.body).not.toContain(leak);
      }
      // The cause goes to the log, at error level, with the correlation ID.
      const logged = t.logs.map((l) => JSON.parse(l)).filter((l) => l.correlation_id === 'internal-error-01');
      expect(logged.some((l) => l.level >= 50 && l.err)).toBe(true);
    } finally {
      await t.close();
    }
  });

  it('with the database gone: /readyz answers 503, /healthz 200, and an operation 503 service_unavailable with Retry-After', async () => {
    const t = await startTestApp();
    const a = await onboardAdmin(t.app);
    await t.database.close();
    try {
      const ready = await t.app.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      const res = await a.client.get(api('/users'), { 'x-correlation-id': 'database-gone-01' });
      const err = expectEnvelope(res, 503, 'service_unavailable', 'database-gone-01');
      expect(res.headers['retry-after']).toBe('5');
      expect(err.details).toBeNull();
      expect(err.message).not.toMatch(/pool|database|pg|kysely|sql/i);
    } finally {
      await t.close();
    }
  });
});
