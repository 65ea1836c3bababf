import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import helmet from '@fastify/helmet';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HELMET_OPTIONS } from '../../api/platform/security-headers.js';
import { api, Client, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Security headers on every answer, through the real app on PostgreSQL: success, errors before and
 * after routing, the health checks; `Cache-Control: no-store` on every answer of an operation whose
 * caller is not public, on every error and on every answer that sets a cookie.
 */

type Res = { statusCode: number; headers: Record<string, unknown> };

function expectSecurityHeaders(res: Res, what: string): void {
  const h = res.headers;
  expect(h['x-content-type-options'], what).toBe('nosniff');
  const csp = String(h['content-security-policy'] ?? '');
  const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name, values.join(' ')]));
  expect(directives.get('default-src'), `${what}: ${csp}`).toBe("'self'");
  expect(directives.get('frame-ancestors'), `${what}: ${csp}`).toBe("'none'");
  expect(directives.get('object-src'), `${what}: ${csp}`).toBe("'none'");
  expect(directives.get('base-uri'), `${what}: ${csp}`).toBe("'self'");
  expect(directives.get('form-action'), `${what}: ${csp}`).toBe("'self'");
  expect(h['referrer-policy'], what).toBe('no-referrer');
  expect(h['x-frame-options'], what).toBe('DENY');
  expect(h['strict-transport-security'], what).toBe('max-age=31536000');
  expect(h['x-powered-by'], what).toBeUndefined();
}

const expectNoStore = (res: Res, what: string) => expect(res.headers['cache-control'], what).toBe('no-store');

describe('security headers', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp();
    admin = await onboardAdmin(t.app, 'Headers Org');
  });
  afterAll(async () => t.close());

  it('on an authenticated success, with no-store', async () => {
    const res = await admin.client.get(api('/auth/me'));
    expect(res.statusCode).toBe(200);
    expectSecurityHeaders(res, 'GET /auth/me');
    expectNoStore(res, 'GET /auth/me');
  });

  it('on an authenticated write, with no-store', async () => {
    const res = await admin.client.post(api('/agents'), {
      name: 'Header Agent',
      owner_id: admin.userId,
      purpose: 'Checks headers',
      environment: 'development',
      data_classification: 'internal',
    });
    expect(res.statusCode, res.body).toBe(201);
    expectSecurityHeaders(res, 'POST /agents');
    expectNoStore(res, 'POST /agents');
  });

  it('on a public success; no-store only where it sets a cookie', async () => {
    const doc = await new Client(t.app).get(api('/openapi.json'));
    expect(doc.statusCode).toBe(200);
    expectSecurityHeaders(doc, 'GET /openapi.json');
    // Nothing personal in the document: caches may keep it.
    expect(doc.headers['cache-control']).toBeUndefined();

    const login = await new Client(t.app).post(api('/auth/dev-login'), { email: `h-${randomUUID()}@example.com` });
    expect(login.statusCode).toBe(200);
    expect(login.headers['set-cookie']).toBeDefined();
    expectSecurityHeaders(login, 'POST /auth/dev-login');
    expectNoStore(login, 'POST /auth/dev-login');
  });

  it('every header helmet itself sets with these options, on a success and on answers cut short (401, 403, 404)', async () => {
    // Helmet run on its own, per request, as the app ran it before it wrote helmet's headers once read.
    const probe = Fastify({ logger: false });
    await probe.register(helmet, HELMET_OPTIONS);
    probe.get('/', async () => ({}));
    const own = (await probe.inject({ method: 'GET', url: '/' })).headers;
    await probe.close();
    const helmets = Object.entries(own).filter(([k]) => !['content-type', 'content-length', 'date', 'connection', 'keep-alive'].includes(k));
    expect(helmets.length).toBeGreaterThanOrEqual(10);
    const answers = {
      'GET /auth/me': await admin.client.get(api('/auth/me')),
      '401': await new Client(t.app).get(api('/auth/me')),
      '404': await admin.client.get(api(`/agents/${randomUUID()}`)),
      '403 csrf_failed': await admin.client.post(api('/agents'), { name: 'x' }, { 'x-csrf-token': 'wrong' }),
    };
    for (const [what, res] of Object.entries(answers)) {
      for (const [name, value] of helmets) expect(res.headers[name], `${what}: ${name}`).toBe(value);
    }
  });

  it('on the health checks', async () => {
    for (const url of ['/healthz', '/readyz']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expectSecurityHeaders(res, url);
    }
  });

  it('on 401 before routing reaches the handler, with no-store', async () => {
    const res = await new Client(t.app).get(api('/auth/me'));
    expect(res.statusCode).toBe(401);
    expectSecurityHeaders(res, '401');
    expectNoStore(res, '401');
  });

  it('on 403 csrf_failed, with no-store', async () => {
    const res = await admin.client.post(api('/agents'), { name: 'x' }, { 'x-csrf-token': 'wrong' });
    expect(res.statusCode).toBe(403);
    expectSecurityHeaders(res, '403');
    expectNoStore(res, '403');
  });

  it('on 404 of an unknown operation and of an unknown record, with no-store', async () => {
    const unknownOperation = await new Client(t.app).get(api('/no-such-thing'));
    expect(unknownOperation.statusCode).toBe(404);
    expectSecurityHeaders(unknownOperation, '404 operation');
    expectNoStore(unknownOperation, '404 operation');

    const unknownRecord = await admin.client.get(api(`/agents/${randomUUID()}`));
    expect(unknownRecord.statusCode).toBe(404);
    expectSecurityHeaders(unknownRecord, '404 record');
    expectNoStore(unknownRecord, '404 record');
  });

  it('on 422 validation_failed and on an unreadable body, with no-store, also for public operations', async () => {
    const invalid = await admin.client.post(api('/agents'), { name: '' });
    expect(invalid.statusCode).toBe(422);
    expectSecurityHeaders(invalid, '422');
    expectNoStore(invalid, '422');

    const publicInvalid = await new Client(t.app).post(api('/auth/dev-login'), { email: 'not an email' });
    expect(publicInvalid.statusCode).toBe(422);
    expectSecurityHeaders(publicInvalid, '422 public');
    expectNoStore(publicInvalid, '422 public');

    const garbled = await t.app.inject({
      method: 'POST',
      url: api('/auth/dev-login'),
      headers: { 'content-type': 'application/json' },
      payload: '{"email":',
    });
    expect(garbled.statusCode).toBe(400);
    expectSecurityHeaders(garbled, '400');
    expectNoStore(garbled, '400');
  });

  it('on 405 method_not_allowed, with no-store', async () => {
    const res = await admin.client.request('PUT', api('/agents'));
    expect(res.statusCode).toBe(405);
    expectSecurityHeaders(res, '405');
    expectNoStore(res, '405');
  });

  it('on answers written before any hook runs: the router (414, an undecodable path) and the HTTP parser (431)', async () => {
    const tooLong = await t.app.inject({ method: 'GET', url: api(`/agents/${'a'.repeat(150)}`) });
    expect(tooLong.statusCode).toBe(414);
    expectSecurityHeaders(tooLong, '414');
    expectNoStore(tooLong, '414');

    const undecodable = await t.app.inject({ method: 'GET', url: api('/agents/%E0%A4%A') });
    expect(undecodable.statusCode).toBe(400);
    expectSecurityHeaders(undecodable, '400 path');
    expectNoStore(undecodable, '400 path');

    // Node's parser refuses the request before fastify sees it: only a real socket shows that answer.
    const server = await startTestApp();
    try {
      await server.app.listen({ port: 0, host: '127.0.0.1' });
      const { port } = server.app.server.address() as { port: number };
      const res = await new Promise<Res>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/healthz', headers: { 'x-padding': 'a'.repeat(20_000) } }, (r) => {
          r.resume();
          r.on('end', () => resolve({ statusCode: r.statusCode ?? 0, headers: r.headers }));
        });
        req.on('error', reject);
        req.end();
      });
      expect(res.statusCode).toBe(431);
      expectSecurityHeaders(res, '431');
      expectNoStore(res, '431');
    } finally {
      await server.close();
    }
  });

  it('no-store on every read of the OpenAPI document whose caller is not public', async () => {
    const doc = (await admin.client.get(api('/openapi.json'))).json() as {
      paths: Record<string, Record<string, { 'x-tollgate-caller': string }>>;
    };
    const reads = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([method, op]) => method === 'get' && op['x-tollgate-caller'] !== 'public')
        .map(([, op]) => ({ path, who: op['x-tollgate-caller'] })),
    );
    expect(reads.length).toBeGreaterThan(20);
    for (const { path } of reads) {
      const res = await admin.client.get(api(path.replace(/\{[^}]+\}/g, randomUUID())));
      expect(res.statusCode, path).toBeLessThan(500);
      expectSecurityHeaders(res, path);
      expectNoStore(res, `GET ${path} (${res.statusCode})`);
    }
  });
});
