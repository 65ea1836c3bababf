import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '../support/harness.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { SAFE_PRODUCTION_ENV } from '../support/production-env.js';

/**
 * The issue's "done when": a real `tollgate api` process with ENVIRONMENT=production and every guard satisfied
 * signs a person in through a real OpenID provider when the provider reports MFA, and refuses one without.
 * The process listens on plain HTTP on loopback, as behind a TLS-terminating ingress; the callback URL the
 * provider knows is the public https one, which this test's browser maps to the process.
 */
describe('OpenID Connect sign-in in production', () => {
  const publicOrigin = 'https://tollgate.example.test';
  let op: TestOidcProvider;
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let proc: ReturnType<typeof spawnTollgate> | undefined;
  let base: string;
  let dir: string;

  beforeAll(async () => {
    op = await startOidcProvider({
      redirectUri: `${publicOrigin}/api/v1/auth/callback`,
      accounts: {
        'with-mfa': { email: 'mia.mfa@example.com', name: 'Mia Mfa', amr: ['pwd', 'otp'] },
        'without-mfa': { email: 'pat.password@example.com', name: 'Pat Password', amr: ['pwd'] },
      },
    });
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-oidc-e2e-'));
    writeFileSync(path.join(dir, 'ca.pem'), op.ca);
    db = await freshDatabase();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    proc = spawnTollgate(['api'], {
      ...SAFE_PRODUCTION_ENV,
      PORT: String(port),
      DATABASE_URL: db.runtimeUrl,
      OIDC_ISSUER: op.issuer,
      OIDC_CLIENT_ID: op.clientId,
      OIDC_CLIENT_SECRET: op.clientSecret,
      OIDC_REDIRECT_URI: `${publicOrigin}/api/v1/auth/callback`,
      OIDC_CA_FILE: path.join(dir, 'ca.pem'),
      LOG_LEVEL: 'warn',
    });
    await waitForHttp(`${base}/readyz`, 60_000, proc);
  }, 90_000);

  afterAll(async () => {
    await stop(proc);
    await op?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A browser: its cookies for the service, requests that do not follow redirects. */
  const browser = () => {
    const jar = new Map<string, string>();
    const call = async (method: string, pathAndQuery: string, body?: unknown) => {
      const headers: Record<string, string> = { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') };
      if (method !== 'GET' && jar.has('tollgate_csrf')) headers['x-csrf-token'] = jar.get('tollgate_csrf')!;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${base}${pathAndQuery}`, {
        method,
        headers,
        redirect: 'manual',
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      for (const c of res.headers.getSetCookie()) {
        const [pair, ...attributes] = c.split(';');
        const eq = pair!.indexOf('=');
        const name = pair!.slice(0, eq).trim();
        const value = pair!.slice(eq + 1).trim();
        if (value === '' || attributes.some((a) => /max-age=0/i.test(a.trim()))) jar.delete(name);
        else jar.set(name, value);
      }
      return res;
    };
    return { jar, call };
  };

  /** /auth/login, the provider's login as `account`, then the callback on the service. */
  const signIn = async (b: ReturnType<typeof browser>, account: string) => {
    const login = await b.call('GET', '/api/v1/auth/login');
    expect(login.status).toBe(302);
    const back = await op.signIn(login.headers.get('location')!, account);
    expect(back.origin).toBe(publicOrigin);
    return b.call('GET', `${back.pathname}${back.search}`);
  };

  it('offers OpenID Connect and no development sign-in', async () => {
    const res = await fetch(`${base}/api/v1/auth/providers`);
    expect(((await res.json()) as { providers: Array<{ kind: string }> }).providers.map((p: { kind: string }) => p.kind)).toEqual(['oidc']);
  });

  it('signs in a person whose provider reports MFA: onboarding, their organisation, then /auth/me', async () => {
    const b = browser();
    const callback = await signIn(b, 'with-mfa');
    expect(callback.status).toBe(302);
    expect(callback.headers.get('location')).toBe('/');
    // Secure cookies in production.
    expect(callback.headers.getSetCookie().some((c) => c.startsWith('tollgate_onboarding=') && /;\s*Secure/i.test(c) && /HttpOnly/i.test(c))).toBe(true);
    const onboard = await b.call('POST', '/api/v1/tenants/onboard', {
      name: 'Mia Co',
      slug: `mia-${process.pid}`,
      primary_region: 'eu-west',
      admin_display_name: 'Mia Mfa',
    });
    expect(onboard.status).toBe(201);
    const me = await b.call('GET', '/api/v1/auth/me');
    expect(me.status).toBe(200);
    expect(((await me.json()) as { user: { email: string } }).user.email).toBe('mia.mfa@example.com');

    // Signing in again goes straight to a session in the organisation.
    const again = browser();
    expect((await signIn(again, 'with-mfa')).status).toBe(302);
    expect(((await (await again.call('GET', '/api/v1/auth/me')).json()) as { tenant: { slug: string } }).tenant.slug).toBe(`mia-${process.pid}`);
  });

  it('refuses a person whose provider does not report MFA', async () => {
    const b = browser();
    const callback = await signIn(b, 'without-mfa');
    expect(callback.status).toBe(403);
    const body = (await callback.json()) as { error: { details: { reason: string } } };
    expect(body.error.details.reason).toBe('mfa_required');
    expect(b.jar.has('tollgate_session')).toBe(false);
    expect(b.jar.has('tollgate_onboarding')).toBe(false);
    expect((await b.call('GET', '/api/v1/auth/onboarding')).status).toBe(401);
  });
});
