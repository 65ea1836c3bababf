import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Logs: pino JSON logs with secrets and personal data redacted. A secret or email address
 * sent in a request (header, cookie, body, query) never appears in the log output, whatever the
 * outcome (success, validation failure, 401, 500), while every line of a request carries its
 * correlation ID.
 */

const unique = (label: string) => `${label}-${randomBytes(9).toString('hex')}`;
const uniqueEmail = (label: string) => `${label}.${randomBytes(5).toString('hex')}@example-mail.com`;

type Line = Record<string, unknown> & { correlation_id?: string; msg?: string };

describe('log redaction', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp({
      routes: (app) => {
        // An operation that fails on our side, to see what a 500 logs.
        app.post('/test-only/boom', async () => {
          throw new Error('the handler broke');
        });
      },
    });
    admin = await onboardAdmin(t.app, 'Logging Org');
  });
  afterAll(async () => t.close());

  const parsed = (): Line[] => t.logs.map((l) => JSON.parse(l) as Line);
  const linesOf = (correlationId: string) => parsed().filter((l) => l.correlation_id === correlationId);

  it('every log line is JSON', () => {
    expect(t.logs.length).toBeGreaterThan(0);
    for (const line of t.logs) expect(() => JSON.parse(line), line).not.toThrow();
  });

  it('secrets and email addresses sent in requests never appear in the log output, on any outcome', async () => {
    const s = {
      bearer: unique('bearer'),
      sessionCookie: unique('sessioncookie'),
      otherCookie: unique('othercookie'),
      csrf: unique('csrfheader'),
      password: unique('password'),
      clientSecret: unique('clientsecret'),
      token: unique('token'),
      accessToken: unique('accesstoken'),
      bodyEmail: uniqueEmail('body.person'),
      queryEmail: uniqueEmail('query.person'),
      invalidEmail: unique('notanemail'),
    };
    const ids: Record<string, string> = {};
    const cid = (name: string) => (ids[name] = `log-${name}-${randomBytes(4).toString('hex')}`);
    const status: Record<string, number> = {};

    // Sign-in with an Authorization header, foreign cookies and a body full of secrets (public operation).
    status.signin = (
      await t.app.inject({
        method: 'POST',
        url: api('/auth/dev-login'),
        headers: {
          'x-correlation-id': cid('signin'),
          authorization: `Bearer ${s.bearer}`,
          cookie: `tollgate_session=${s.sessionCookie}; tracking=${s.otherCookie}`,
          'x-csrf-token': s.csrf,
        },
        payload: { email: s.bodyEmail, password: s.password, client_secret: s.clientSecret, token: s.token },
      })
    ).statusCode;

    // A successful write by a signed-in person, with the secrets as extra body fields.
    status.create = (
      await admin.client.post(
        api('/users'),
        { email: s.bodyEmail, display_name: 'Private Person', roles: ['viewer'], password: s.password, token: s.token },
        { 'x-correlation-id': cid('create'), authorization: `Bearer ${s.bearer}` },
      )
    ).statusCode;

    // A search whose query string holds an email address.
    status.search = (
      await admin.client.get(api(`/users?q=${encodeURIComponent(s.queryEmail)}`), { 'x-correlation-id': cid('search') })
    ).statusCode;

    // A validation failure whose bad values are the secrets.
    status.invalid = (
      await admin.client.post(
        api('/users'),
        { email: s.invalidEmail, display_name: s.password, roles: [s.token], client_secret: s.clientSecret },
        { 'x-correlation-id': cid('invalid') },
      )
    ).statusCode;

    // A 401: a forged session cookie and a bearer token on a person's operation.
    status.unauthenticated = (
      await t.app.inject({
        url: api('/auth/me'),
        headers: {
          'x-correlation-id': cid('unauthenticated'),
          cookie: `tollgate_session=${s.sessionCookie}`,
          authorization: `Bearer ${s.bearer}`,
        },
      })
    ).statusCode;

    // A 401 on the gateway, which does read the Authorization header.
    status.gateway = (
      await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { 'x-correlation-id': cid('gateway'), authorization: `Bearer ${s.accessToken}` },
        payload: { tool_key: 'x', action: 'invoke', parameters: { password: s.password } },
      })
    ).statusCode;

    // A 401 at the token exchange, with a client secret in the body.
    status.exchange = (
      await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        headers: { 'x-correlation-id': cid('exchange') },
        payload: { grant_type: 'client_credentials', client_id: 'tg_unknown_client', client_secret: s.clientSecret },
      })
    ).statusCode;

    // A 500, with secrets in headers and body.
    status.boom = (
      await t.app.inject({
        method: 'POST',
        url: '/test-only/boom',
        headers: {
          'x-correlation-id': cid('boom'),
          authorization: `Bearer ${s.bearer}`,
          cookie: `tollgate_session=${s.sessionCookie}`,
        },
        payload: { password: s.password, client_secret: s.clientSecret, email: s.bodyEmail },
      })
    ).statusCode;

    expect(status).toEqual({
      signin: 200,
      create: 201,
      search: 200,
      invalid: 422,
      unauthenticated: 401,
      gateway: 401,
      exchange: 401,
      boom: 500,
    });

    const text = t.logs.join('\n');
    for (const [name, value] of Object.entries(s)) expect(text, `${name} leaked into the logs`).not.toContain(value);
    // Nor the real credentials and addresses of the signed-in administrator.
    expect(text).not.toContain(admin.email);
    expect(text).not.toContain(admin.client.cookies.get('tollgate_session'));
    expect(text).not.toContain(admin.client.csrf);
    // No email address at all.
    expect(text).not.toMatch(/[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/);

    // Every request's lines carry its correlation ID: at least the incoming request and its completion.
    for (const [name, id] of Object.entries(ids)) {
      const lines = linesOf(id);
      expect(lines.map((l) => l.msg), name).toEqual(expect.arrayContaining(['incoming request', 'request completed']));
    }
    // The 500's cause is logged, at error level, with its correlation ID.
    expect(linesOf(ids.boom!).some((l) => (l.level as number) >= 50 && l.err !== undefined)).toBe(true);
    // The search is logged by its path, without the query string.
    const search = linesOf(ids.search!).find((l) => l.msg === 'incoming request') as { req?: { path?: string } };
    expect(search.req?.path).toBe('/api/v1/users');
  });

  it('a secret in a malformed JSON body never appears in the log output', async () => {
    const secret = unique('rawsecret');
    const id = `log-badjson-${randomBytes(4).toString('hex')}`;
    const res = await t.app.inject({
      method: 'POST',
      url: api('/auth/dev-login'),
      headers: { 'content-type': 'application/json', 'x-correlation-id': id },
      // Not JSON: an unquoted secret where a string belongs.
      payload: `{"email": "x@example.com", "password": ${secret}}`,
    });
    expect(res.statusCode).toBe(400);
    expect(linesOf(id).length).toBeGreaterThan(0);
    const text = t.logs.join('\n');
    // Not the whole secret, and not a recognisable piece of it either.
    expect(text).not.toContain(secret.slice(0, 12));
  });

  it('an email address sent in a path never appears in the log output', async () => {
    const email = uniqueEmail('path.person');
    const id = `log-pathmail-${randomBytes(4).toString('hex')}`;
    const encodedId = `${id}-enc`;
    // '@' may stand in a path as it is, or percent-encoded.
    const raw = await admin.client.patch(api(`/users/${email}`), { display_name: 'Someone' }, { 'x-correlation-id': id });
    const encoded = await admin.client.patch(api(`/users/${encodeURIComponent(email)}`), { display_name: 'Someone' }, {
      'x-correlation-id': encodedId,
    });
    expect([raw.statusCode, encoded.statusCode]).toEqual([422, 422]);
    expect(linesOf(id).length).toBeGreaterThan(0);
    expect(linesOf(encodedId).length).toBeGreaterThan(0);
    const text = t.logs.join('\n');
    expect(text).not.toContain(email);
    expect(text).not.toContain(encodeURIComponent(email));
  });
});
