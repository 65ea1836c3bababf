import { Socket, createServer, connect, type Server } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { openDatabase, type Database } from '../../api/db/database.js';
import { api, Client, freshDatabase, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Every answer HTTP itself gives, in the spec's envelope with a correlation ID: unknown routes (404),
 * unknown methods (405 with Allow), path parameters too long (414), bodies too large (413), in another
 * content type (415) or not JSON (400), headers too large (431, from Node's parser, before there is a
 * request), and a database that cannot be reached (503 with Retry-After, and /readyz within a second).
 */

const CORRELATION_CHARS = /^[A-Za-z0-9._-]{8,100}$/;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** The envelope, exactly, naming the correlation ID of the response header. */
function expectEnvelope(res: Answer, status: number, code: string, correlationId?: string) {
  expect(res.status, res.body).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/json/);
  const body = JSON.parse(res.body);
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'correlation_id', 'details', 'message']);
  expect(body.error.code).toBe(code);
  expect(body.error.message).toEqual(expect.any(String));
  expect(body.error.correlation_id).toMatch(CORRELATION_CHARS);
  expect(body.error.correlation_id).toBe(res.headers['x-correlation-id']);
  if (correlationId) expect(body.error.correlation_id).toBe(correlationId);
  return body.error as { code: string; message: string; correlation_id: string; details: unknown };
}

const answer = (res: LightMyRequestResponse): Answer => ({ status: res.statusCode, headers: res.headers, body: res.body });

/** Sends bytes as they are and reads the answer until the server closes or `ms` pass. */
function raw(port: number, request: string, ms = 5000): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // Kept-alive answers do not close: stop once the whole body is in.
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, body = ''] = text.split('\r\n\r\n');
      const length = /content-length:\s*(\d+)/i.exec(head ?? '')?.[1];
      if (length !== undefined && Buffer.byteLength(body) >= Number(length)) socket.destroy();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const status = Number(statusLine.split(' ')[1]);
      if (!status) return reject(new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`));
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(':');
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status, headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(request);
  });
}

describe('HTTP errors in the envelope', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    t = await startTestApp({ env: { BODY_LIMIT_BYTES: '2048' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => t.close());

  it('404 not_found for an unknown route', async () => {
    const err = expectEnvelope(answer(await t.app.inject({ url: api('/no/such/thing'), headers: { 'x-correlation-id': 'unknown-0001' } })), 404, 'not_found', 'unknown-0001');
    expect(err.details).toBeNull();
    expectEnvelope(answer(await t.app.inject({ method: 'POST', url: '/nowhere' })), 404, 'not_found');
  });

  it('405 method_not_allowed with Allow for a known path called with another method', async () => {
    const cases: Array<[method: string, url: string, allow: string]> = [
      ['DELETE', api('/agents'), 'GET, HEAD, POST'],
      ['PUT', api('/settings'), 'GET, HEAD, PATCH'],
      ['PUT', api('/agents/6c0e5d8e-2a52-4a1f-9a57-0d6f0b1c2d3e'), 'GET, HEAD, PATCH'],
      ['GET', api('/auth/dev-login'), 'POST'],
      ['POST', '/healthz', 'GET, HEAD'],
    ];
    for (const [method, url, allow] of cases) {
      const res = answer(await t.app.inject({ method: method as never, url }));
      const err = expectEnvelope(res, 405, 'method_not_allowed');
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      expect(err.details).toBeNull();
    }
    // HEAD has no body, but the status and Allow are the same.
    const head = await t.app.inject({ method: 'HEAD', url: api('/auth/dev-login') });
    expect(head.statusCode).toBe(405);
    expect(head.headers.allow).toBe('POST');
  });

  it('414 uri_too_long for a path parameter over 100 characters, without echoing the path', async () => {
    const long = 'a'.repeat(101);
    const res = answer(await t.app.inject({ url: api(`/agents/${long}`), headers: { 'x-correlation-id': 'too-long-0001' } }));
    const err = expectEnvelope(res, 414, 'uri_too_long', 'too-long-0001');
    expect(res.body).not.toContain(long);
    expect(err.details).toBeNull();
    // The same on a write operation and through a real socket.
    const real = await raw(port, `POST /api/v1/agents/${long}/suspend HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`);
    expectEnvelope(real, 414, 'uri_too_long');
  });

  it('400 bad_request for a path that is not percent-encoded UTF-8, without echoing it', async () => {
    const res = answer(await t.app.inject({ url: api('/agents/%E0%A4%A') }));
    expectEnvelope(res, 400, 'bad_request');
    expect(res.body).not.toContain('%E0');
  });

  it('413 payload_too_large for a body over BODY_LIMIT_BYTES', async () => {
    const res = await new Client(t.app).post(api('/auth/dev-login'), { email: 'a@example.com', padding: 'x'.repeat(4096) });
    expectEnvelope(answer(res), 413, 'payload_too_large');
  });

  it('415 unsupported_media_type for a body in another content type', async () => {
    for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const res = await t.app.inject({ method: 'POST', url: api('/auth/dev-login'), headers: { 'content-type': type }, payload: 'email=a@example.com' });
      expectEnvelope(answer(res), 415, 'unsupported_media_type');
    }
  });

  it('400 bad_request for a body that is not JSON', async () => {
    const res = await t.app.inject({ method: 'POST', url: api('/auth/dev-login'), headers: { 'content-type': 'application/json' }, payload: '{"email": ' });
    expectEnvelope(answer(res), 400, 'bad_request');
  });

  it('431 header_too_large from Node\'s parser, with a new correlation ID in the header and the body', async () => {
    const res = await raw(port, `GET /api/v1/auth/me HTTP/1.1\r\nHost: x\r\nx-correlation-id: lost-0001\r\nx-padding: ${'a'.repeat(20_000)}\r\n\r\n`);
    const err = expectEnvelope(res, 431, 'header_too_large');
    // The headers could not be read, the caller's ID with them: a new one is made and returned.
    expect(err.correlation_id).not.toBe('lost-0001');
    expect(t.logs.some((l) => l.includes(err.correlation_id))).toBe(true);
  });

  it('400 bad_request for a request that is not HTTP', async () => {
    expectEnvelope(await raw(port, 'HELLO THERE\r\n\r\n'), 400, 'bad_request');
  });

  it('the same errors through a real socket keep the envelope', async () => {
    const res = await raw(port, 'DELETE /api/v1/agents HTTP/1.1\r\nHost: x\r\nx-correlation-id: real-405-0001\r\nConnection: close\r\n\r\n');
    expectEnvelope(res, 405, 'method_not_allowed', 'real-405-0001');
    expect(res.headers.allow).toBe('GET, HEAD, POST');
  });
});

/**
 * A TCP relay between the API and PostgreSQL, so a test can take the database away from one API (and give
 * it back) without stopping the server the other tests use: `down` closes the port (connections refused),
 * `hang` accepts and never answers (a partition or a stalled server), `starting` answers every new
 * connection as PostgreSQL does while it starts (57P03). Every change cuts the connections already open.
 */
class PgRelay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  mode: 'forward' | 'hang' | 'starting' = 'forward';
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async up(): Promise<void> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  async down(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = undefined;
  }

  set(mode: PgRelay['mode']): void {
    this.mode = mode;
    this.cut();
  }

  private cut(): void {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  private track(s: Socket): void {
    this.sockets.add(s);
    s.on('close', () => this.sockets.delete(s));
    s.on('error', () => undefined);
  }

  private accept(client: Socket): void {
    this.track(client);
    if (this.mode === 'hang') return;
    if (this.mode === 'starting') {
      client.once('data', () => {
        const field = (type: string, value: string) => Buffer.concat([Buffer.from(type), Buffer.from(`${value}\0`)]);
        const fields = Buffer.concat([
          field('S', 'FATAL'),
          field('V', 'FATAL'),
          field('C', '57P03'),
          field('M', 'the database system is starting up'),
          Buffer.from([0]),
        ]);
        const length = Buffer.alloc(4);
        length.writeInt32BE(fields.length + 4);
        client.end(Buffer.concat([Buffer.from('E'), length, fields]));
      });
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    this.track(upstream);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', close);
    upstream.on('close', close);
  }
}

describe('database loss', () => {
  let relay: PgRelay;
  let app: FastifyInstance;
  let database: Database;
  let drop: () => Promise<void>;
  let cookies: Record<string, string>;

  beforeAll(async () => {
    const fresh = await freshDatabase();
    drop = fresh.drop;
    const url = new URL(fresh.runtimeUrl);
    relay = new PgRelay({ host: url.hostname, port: Number(url.port) });
    await relay.up();
    url.hostname = '127.0.0.1';
    url.port = String(relay.port);
    const config = loadConfig({ LOG_LEVEL: 'error', DATABASE_URL: url.toString(), DATABASE_POOL_MAX: '4' });
    database = await openDatabase(config);
    const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });
    app = await buildApp({ config, db: database.db, logStream: quiet });
    await app.ready();
    const admin = await onboardAdmin(app, 'Outage Org');
    cookies = { cookie: [...admin.client.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
  });
  afterAll(async () => {
    relay.set('forward');
    await app?.close();
    await database?.close();
    await relay.down();
    await drop?.();
  });

  const me = () => app.inject({ url: api('/auth/me'), headers: cookies });
  const timed = async <T>(fn: () => Promise<T>) => {
    const started = performance.now();
    const value = await fn();
    return { value, ms: performance.now() - started };
  };
  /** Retries until the database is back in the pool's hands (a few seconds at most). */
  async function resumed(): Promise<void> {
    const until = Date.now() + 10_000;
    for (;;) {
      const res = await me();
      if (res.statusCode === 200) return;
      if (Date.now() > until) throw new Error(`service did not resume: ${res.statusCode} ${res.body}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('answers normally while the database is there', async () => {
    expect((await me()).statusCode).toBe(200);
    expect((await app.inject({ url: '/readyz' })).statusCode).toBe(200);
  });

  it('answers 503 service_unavailable with Retry-After, never 500, while connections are refused; then resumes', async () => {
    await relay.down();
    try {
      const res = await me();
      const err = expectEnvelope(answer(res), 503, 'service_unavailable');
      expect(res.headers['retry-after']).toBe('5');
      expect(err.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|postgres/i);
      // Without signing in too: token exchange is rate-limited through the database.
      const token = await app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: 'tg_nobody', client_secret: 'x' },
      });
      expectEnvelope(answer(token), 503, 'service_unavailable');
      const ready = await timed(() => app.inject({ url: '/readyz' }));
      expect(ready.value.statusCode).toBe(503);
      expect(ready.ms).toBeLessThan(1000);
    } finally {
      await relay.up();
    }
    await resumed();
  });

  it('answers 503 when the server says it is starting up (57P03)', async () => {
    relay.set('starting');
    try {
      expectEnvelope(answer(await me()), 503, 'service_unavailable');
    } finally {
      relay.set('forward');
    }
    await resumed();
  });

  it('/readyz answers 503 within one second when the database does not answer at all', async () => {
    relay.set('hang');
    try {
      const probes = await Promise.all([1, 2, 3].map(() => timed(() => app.inject({ url: '/readyz' }))));
      for (const p of probes) {
        expect(p.value.statusCode).toBe(503);
        expect(p.value.json()).toEqual({ status: 'unavailable', checks: { database: 'unreachable' } });
        expect(p.ms).toBeLessThan(1000);
      }
      // A request waits for a connection no longer than the pool's bound, then answers 503.
      const res = await timed(() => me());
      expectEnvelope(answer(res.value), 503, 'service_unavailable');
      expect(res.ms).toBeLessThan(10_000);
    } finally {
      relay.set('forward');
    }
    await resumed();
  }, 30_000);
});
