import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, Client, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

describe('logs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  it('never contain a secret or email address sent in a request, but do carry the correlation ID', async () => {
    const secrets = {
      bearer: 'bearer-secret-5b1f0c9e7a',
      cookie: 'cookie-secret-0a8e2d4c6f',
      password: 'password-secret-93be1a7f2c',
      clientSecret: 'client-secret-4d7e9a0b1c',
      token: 'token-secret-c2f4e6a8b0',
      email: 'private.person.7731@example.com',
      queryEmail: 'searched.person.4412@example.com',
    };
    const a = await onboardAdmin(t.app);
    const correlation = 'log-redaction-check-1';
    const h = { 'x-correlation-id': correlation };

    // Secrets in headers, cookies and bodies, on success, validation failure and authentication failure.
    await t.app.inject({
      method: 'POST',
      url: api('/auth/dev-login'),
      headers: { ...h, authorization: `Bearer ${secrets.bearer}`, cookie: `tollgate_session=${secrets.cookie}` },
      payload: { email: secrets.email, password: secrets.password, client_secret: secrets.clientSecret, token: secrets.token },
    });
    await a.client.post(api('/users'), { email: secrets.email, display_name: 'P', roles: ['viewer'], password: secrets.password }, h);
    await a.client.post(api('/users'), { email: secrets.email, display_name: 'Private Person', roles: ['viewer'] }, h);
    await a.client.post(api('/users'), { email: secrets.email, display_name: 'Private Person', roles: ['viewer'] }, h);
    await a.client.get(api(`/users?q=${encodeURIComponent(secrets.queryEmail)}`), h);
    await new Client(t.app).get(api('/auth/me'), { ...h, cookie: `tollgate_session=${secrets.cookie}` });

    const lines = t.logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    const text = t.logs.join('\n');
    for (const [name, value] of Object.entries(secrets)) expect(text, name).not.toContain(value);
    expect(text).not.toContain(a.email);
    expect(text).not.toContain(a.client.cookies.get('tollgate_session'));
    const mine = lines.filter((l) => l.correlation_id === correlation);
    expect(mine.length).toBeGreaterThanOrEqual(10);
    expect(mine.some((l) => (l.req as { path?: string } | undefined)?.path === '/api/v1/users')).toBe(true);
  });
});

/** A stand-in OTLP/HTTP collector on loopback that keeps what it receives. */
async function collector() {
  const bodies: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') bodies.push(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, bodies, close: () => new Promise((r) => server.close(r)) };
}

describe('traces over OTLP/HTTP', () => {
  it('exports spans of API requests, none of health checks, and flushes on close', async () => {
    const otlp = await collector();
    const t = await startTestApp({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'tollgate-test' } });
    try {
      expect(t.app.hasRequestDecorator('opentelemetry')).toBe(true);
      await new Client(t.app).get(api('/auth/providers'));
      await t.app.inject({ url: '/healthz' });
      await t.app.inject({ url: '/readyz' });
    } finally {
      await t.close();
    }
    const exported = Buffer.concat(otlp.bodies).toString('latin1');
    await otlp.close();
    expect(otlp.bodies.length).toBeGreaterThan(0);
    expect(exported).toContain('/api/v1/auth/providers');
    expect(exported).toContain('tollgate-test');
    expect(exported).not.toContain('/healthz');
    expect(exported).not.toContain('/readyz');
  });

  it('instruments nothing when no endpoint is configured', async () => {
    const t = await startTestApp();
    try {
      expect(t.app.hasRequestDecorator('opentelemetry')).toBe(false);
    } finally {
      await t.close();
    }
  });
});
