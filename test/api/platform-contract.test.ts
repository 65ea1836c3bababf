import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HitCounter } from '../../api/platform/rate-limit.js';
import { api, Client, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/** The spec's envelope: exactly code, message, correlation_id and details (null when there are none). */
function expectEnvelope(body: any, correlation?: string) {
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'correlation_id', 'details', 'message']);
  expect(body.error).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  if (correlation) expect(body.error.correlation_id).toBe(correlation);
  else expect(body.error.correlation_id).toEqual(expect.any(String));
}

describe('HTTP platform', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { BODY_LIMIT_BYTES: '2048' } });
  });
  afterAll(async () => t.close());

  describe('error envelope', () => {
    it('answers an unknown route with 404 not_found in the envelope', async () => {
      const res = await new Client(t.app).get(api('/no/such/thing'));
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found', details: null } });
    });

    it('answers malformed JSON with 400 bad_request', async () => {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/auth/dev-login'),
        headers: { 'content-type': 'application/json' },
        payload: '{"email": ',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'bad_request' } });
    });

    it('treats an empty JSON body as no body', async () => {
      const a = await onboardAdmin(t.app);
      const headers = { 'content-type': 'application/json', 'x-csrf-token': a.client.csrf! };
      const logout = await a.client.request('POST', api('/auth/logout-all'), undefined, headers);
      expect(logout.statusCode).toBe(204);
      const b = await onboardAdmin(t.app);
      const res = await b.client.request('POST', api('/users'), undefined, { 'content-type': 'application/json', 'x-csrf-token': b.client.csrf! });
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('validation_failed');
    });

    it('answers a body over the limit with 413 payload_too_large in the envelope', async () => {
      const res = await new Client(t.app).post(api('/auth/dev-login'), { email: `${'x'.repeat(4000)}@example.com` });
      expect(res.statusCode).toBe(413);
      expect(res.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    });

    it('lists every bad field of a validation failure', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.post(api('/users'), { email: 'bad', display_name: 'x', roles: ['nope'] });
      expect(res.statusCode).toBe(422);
      expectEnvelope(res.json());
      const fields = res.json().error.details.map((d: { field: string }) => d.field).sort();
      expect(fields).toEqual(['display_name', 'email', 'roles.0']);
      for (const d of res.json().error.details) expect(d.message).toEqual(expect.any(String));
    });
  });

  describe('X-Correlation-ID', () => {
    it('echoes a well-formed ID in the header and in error bodies', async () => {
      const res = await new Client(t.app).get(api('/auth/me'), { 'x-correlation-id': 'abc.DEF_123-xyz' });
      expect(res.headers['x-correlation-id']).toBe('abc.DEF_123-xyz');
      expectEnvelope(res.json(), 'abc.DEF_123-xyz');
    });

    it('generates one when absent', async () => {
      const res = await new Client(t.app).get(api('/auth/providers'));
      expect(res.headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
    });

    it.each([['short'], ['has space in it'], ['x'.repeat(101)], ['semi;colon-id']])(
      'answers 422 naming the header for %j',
      async (id) => {
        const res = await new Client(t.app).get(api('/auth/providers'), { 'x-correlation-id': id });
        expect(res.statusCode).toBe(422);
        expect(res.json().error.details[0].field).toBe('header.x-correlation-id');
        expect(res.json().error.correlation_id).not.toBe(id);
        expect(res.headers['x-correlation-id']).toBe(res.json().error.correlation_id);
      },
    );

    it('accepts 8 and 100 characters', async () => {
      for (const id of ['a'.repeat(8), 'b'.repeat(100)]) {
        const res = await new Client(t.app).get(api('/auth/providers'), { 'x-correlation-id': id });
        expect(res.statusCode).toBe(200);
        expect(res.headers['x-correlation-id']).toBe(id);
      }
    });

    it('records the ID in the audit entry and the log lines of the request', async () => {
      const a = await onboardAdmin(t.app);
      await a.client.patch(api('/settings'), { approval_ttl_seconds: 300 }, { 'x-correlation-id': 'trace-me-settings-1' });
      const audit = (await a.client.get(api('/audit?action=settings.updated'))).json().items;
      expect(audit[0].correlation_id).toBe('trace-me-settings-1');
      const lines = t.logs.map((l) => JSON.parse(l)).filter((l) => l.correlation_id === 'trace-me-settings-1');
      expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    });
  });

  describe('health', () => {
    it('serves /healthz and /readyz at the host root, outside the API prefix', async () => {
      expect((await t.app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
      expect((await t.app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
      expect((await t.app.inject({ url: api('/healthz') })).statusCode).toBe(404);
    });
  });
});

describe('readiness and internal errors when the database is gone', () => {
  it('answers /readyz 503 and a 503 service_unavailable with Retry-After that says nothing internal', async () => {
    const t = await startTestApp();
    const a = await onboardAdmin(t.app);
    await t.database.close();
    try {
      const ready = await t.app.inject({ url: '/readyz' });
      expect(ready.statusCode).toBe(503);
      expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
      const res = await a.client.get(api('/users'), { 'x-correlation-id': 'when-the-db-is-gone' });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      expect(res.json()).toEqual({
        error: {
          code: 'service_unavailable',
          message: 'The service is unavailable right now; retry later.',
          correlation_id: 'when-the-db-is-gone',
          details: null,
        },
      });
      const logged = t.logs.map((l) => JSON.parse(l)).find((l) => l.correlation_id === 'when-the-db-is-gone' && l.level >= 50);
      expect(logged?.err).toBeDefined();
    } finally {
      await t.app.close();
    }
  });
});

describe('rate limits', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.reverse()) await t.close();
    apps.length = 0;
  });

  it('limits a person per minute with 429 rate_limited and Retry-After, across API processes', async () => {
    const clock = new TestClock(new Date('2026-11-23T09:00:10.000Z'));
    const one = await startTestApp({ clock, env: { RATE_LIMIT_PERSON_PER_MINUTE: '5' } });
    apps.push(one);
    const two = await startTestApp({ clock, share: one, env: { RATE_LIMIT_PERSON_PER_MINUTE: '5' } });
    apps.push(two);
    const a = await onboardAdmin(one.app); // one request of the person (onboarding)
    const onTwo = new Client(two.app);
    for (const [k, v] of a.client.cookies) onTwo.cookies.set(k, v);

    expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
    const limited = await onTwo.get(api('/auth/me'));
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: { code: 'rate_limited', details: { limit_per_minute: 5 } } });
    // 50 seconds are left in the window that began at 09:00:00.
    expect(limited.headers['retry-after']).toBe('50');
    expect((await a.client.get(api('/auth/me'))).statusCode).toBe(429);

    clock.advance(50);
    expect((await a.client.get(api('/auth/me'))).statusCode).toBe(200);
  });

  it('counts concurrent hits from two processes exactly: every hit gets its own place in the window', async () => {
    const clock = new TestClock(new Date('2026-11-23T09:00:10.000Z'));
    const one = await startTestApp({ clock });
    apps.push(one);
    const two = await startTestApp({ clock, share: one });
    apps.push(two);
    const counters = [new HitCounter(one.database.db, clock), new HitCounter(two.database.db, clock)];
    // Hits of several keys interleaved, 60 on the shared key, arriving faster than one statement answers.
    const hits = await Promise.all(
      Array.from({ length: 90 }, (_, i) => counters[i % 2]!.hit(i % 3 === 2 ? `other:${i % 2}` : 'shared', 60_000)),
    );
    const shared = hits.filter((_, i) => i % 3 !== 2).map((h) => h.current);
    expect(shared.sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(hits.every((h) => h.ttl === 50_000)).toBe(true);
    // A new window starts the count again.
    clock.advance(50);
    expect((await counters[1]!.hit('shared', 60_000)).current).toBe(1);
  });

  it('limits sign-in per client address, and not health checks', async () => {
    const t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '3' } });
    apps.push(t);
    const statuses = [];
    for (let i = 0; i < 4; i++) {
      statuses.push((await new Client(t.app).post(api('/auth/dev-login'), { email: `s${i}@example.com` })).statusCode);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    for (let i = 0; i < 10; i++) expect((await t.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    // Another address has its own budget.
    const other = await t.app.inject({
      method: 'POST',
      url: api('/auth/dev-login'),
      remoteAddress: '127.0.0.2',
      payload: { email: 'other@example.com' },
    });
    expect(other.statusCode).toBe(200);
  });

  it('limits public operations per client address', async () => {
    const t = await startTestApp({ env: { RATE_LIMIT_PUBLIC_PER_MINUTE: '2' } });
    apps.push(t);
    const codes = [];
    for (let i = 0; i < 3; i++) codes.push((await new Client(t.app).get(api('/auth/providers'))).statusCode);
    expect(codes).toEqual([200, 200, 429]);
  });
});
