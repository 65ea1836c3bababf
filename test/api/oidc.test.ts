import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, productionProblems } from '../../api/config.js';
import { OIDC_FLOW_COOKIE, showsMfa } from '../../api/modules/auth/oidc.js';
import { api, Client, expectValidation, onboardAdmin, startTestApp, uniqueSlug, type TestApp } from '../support/harness.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';

/**
 * OpenID Connect sign-in end to end on real PostgreSQL and a real OpenID provider (oidc-provider on loopback
 * over TLS): /auth/login -> the provider's login -> /auth/callback -> a session -> /auth/me.
 */
describe('OpenID Connect sign-in', () => {
  const redirectUri = 'https://tollgate.test/api/v1/auth/callback';
  let t: TestApp;
  let op: TestOidcProvider;
  let dir: string;
  let n = 0;

  /** A new account at the provider; answers its id. */
  const account = (email: string, amr: string[], extra: { email_verified?: boolean } = {}) => {
    const id = `acct-${++n}`;
    op.accounts.set(id, { email, amr, name: 'Olive Oidc', ...extra });
    return id;
  };

  /** Starts sign-in with `client`, signs in at the provider as `accountId`, answers the callback's URL (not yet called). */
  const toCallback = async (client: Client, accountId: string, returnTo?: string) => {
    const login = await client.get(api(`/auth/login${returnTo === undefined ? '' : `?return_to=${encodeURIComponent(returnTo)}`}`));
    expect(login.statusCode, login.body).toBe(302);
    const back = await op.signIn(String(login.headers.location), accountId);
    expect(back.origin + back.pathname).toBe(redirectUri);
    return `${back.pathname}${back.search}`;
  };

  const signIn = async (client: Client, accountId: string, returnTo?: string) => client.get(await toCallback(client, accountId, returnTo));

  const auditOf = async (admin: Client, action: string) =>
    (await admin.get(api(`/audit?action=${action}`))).json().items as Array<{ outcome: string; actor: { id: string }; details: Record<string, unknown> }>;

  beforeAll(async () => {
    op = await startOidcProvider({ redirectUri });
    dir = mkdtempSync(join(tmpdir(), 'tollgate-oidc-'));
    writeFileSync(join(dir, 'ca.pem'), op.ca);
    t = await startTestApp({
      env: {
        OIDC_ISSUER: op.issuer,
        OIDC_CLIENT_ID: op.clientId,
        OIDC_CLIENT_SECRET: op.clientSecret,
        OIDC_REDIRECT_URI: redirectUri,
        OIDC_CA_FILE: join(dir, 'ca.pem'),
        // Every test signs in several times; the sign-in rate limit is not what this file tests.
        RATE_LIMIT_SIGNIN_PER_MINUTE: '100000',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await op?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the provider among the sign-in methods', async () => {
    const res = await new Client(t.app).get(api('/auth/providers'));
    expect(res.statusCode).toBe(200);
    expect(res.json().providers).toContainEqual({ id: 'oidc', kind: 'oidc', name: 'Single sign-on', login_url: '/api/v1/auth/login' });
  });

  it('sends the browser to the provider with PKCE (S256), state and nonce, and keeps them in a signed HttpOnly cookie', async () => {
    const client = new Client(t.app);
    const res = await client.get(api('/auth/login'));
    expect(res.statusCode).toBe(302);
    const url = new URL(String(res.headers.location));
    expect(url.origin).toBe(op.issuer);
    expect(url.searchParams.get('client_id')).toBe(op.clientId);
    expect(url.searchParams.get('redirect_uri')).toBe(redirectUri);
    expect(url.searchParams.get('response_type')).toBe('code');
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    expect(url.searchParams.get('state')).toBeTruthy();
    expect(url.searchParams.get('nonce')).toBeTruthy();
    expect(url.searchParams.get('scope')?.split(' ')).toContain('openid');
    const cookie = (res.cookies as Array<{ name: string; httpOnly?: boolean; sameSite?: string; value: string }>).find((c) => c.name === OIDC_FLOW_COOKIE)!;
    expect(cookie.httpOnly).toBe(true);
    expect(cookie.sameSite).toBe('Lax');
    expect(t.app.unsignCookie(cookie.value).valid).toBe(true);
    // The verifier itself never goes to the provider.
    const flow = JSON.parse(Buffer.from(t.app.unsignCookie(cookie.value).value!, 'base64url').toString());
    expect(res.headers.location).not.toContain(flow.verifier);
  });

  it('asks the provider for its registration page with signup=true', async () => {
    const res = await new Client(t.app).get(api('/auth/login?signup=true'));
    expect(new URL(String(res.headers.location)).searchParams.get('prompt')).toBe('create');
    const plain = await new Client(t.app).get(api('/auth/login'));
    expect(new URL(String(plain.headers.location)).searchParams.has('prompt')).toBe(false);
  });

  it('answers 200 with the URL to a caller that accepts only JSON', async () => {
    const res = await new Client(t.app).get(api('/auth/login'), { accept: 'application/json' });
    expect(res.statusCode).toBe(200);
    expect(new URL(res.json().authorization_url).origin).toBe(op.issuer);
  });

  it('refuses a bad signup flag with 422', async () => {
    expectValidation(await new Client(t.app).get(api('/auth/login?signup=maybe')), 'query.signup');
  });

  it('signs in a person with MFA, linked by verified email on the first sign-in, by issuer and subject after', async () => {
    const admin = await onboardAdmin(t.app);
    const acct = account(admin.email, ['pwd', 'otp']);
    const client = new Client(t.app);
    const res = await signIn(client, acct, '/agents?tab=risk');
    expect(res.statusCode, res.body).toBe(302);
    expect(res.headers.location).toBe('/agents?tab=risk');
    expect(client.cookies.has('tollgate_session')).toBe(true);
    expect(client.cookies.has(OIDC_FLOW_COOKIE)).toBe(false);
    const me = await client.get(api('/auth/me'));
    expect(me.statusCode).toBe(200);
    expect(me.json().user).toMatchObject({ id: admin.userId, email: admin.email });
    expect(me.json().tenant.id).toBe(admin.tenant.id);

    // The email changes at the provider: the identity (issuer, subject) still signs in the same person.
    op.accounts.get(acct)!.email = `changed-${admin.email}`;
    const again = new Client(t.app);
    expect((await signIn(again, acct)).statusCode).toBe(302);
    expect((await again.get(api('/auth/me'))).json().user.id).toBe(admin.userId);

    const entries = (await auditOf(admin.client, 'auth.signin')).filter((e) => e.actor.id === admin.userId);
    expect(entries.map((e) => [e.outcome, e.details.first_sign_in])).toEqual([
      ['success', false],
      ['success', true],
    ]);
  });

  it('logs neither the code, the state, the client secret nor any token', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const callback = await toCallback(client, account(admin.email, ['otp']));
    const res = await client.get(callback);
    expect(res.statusCode).toBe(302);
    const params = new URL(callback, 'https://tollgate.test').searchParams;
    const logs = t.logs.join('\n');
    for (const secret of [params.get('code')!, params.get('state')!, op.clientSecret, client.cookies.get('tollgate_session')!]) {
      expect(logs).not.toContain(secret);
    }
  });

  it('answers the JSON result to a caller that accepts only JSON', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const res = await client.get(await toCallback(client, account(admin.email, ['hwk'])), { accept: 'application/json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'signed_in', user: { id: admin.userId }, tenant: { id: admin.tenant.id }, return_to: '/' });
    expect(res.json().csrf_token).toBe(client.csrf);
  });

  it('sends a refused browser to the console’s sign-in page with the reason, and opens no session', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const callback = await toCallback(client, account(admin.email, ['pwd']));
    const res = await client.get(callback, { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' });
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/sign-in?sign_in_error=mfa_required');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(client.cookies.has('tollgate_session')).toBe(false);
    expect(client.cookies.has(OIDC_FLOW_COOKIE)).toBe(false);
    // The same callback again: the attempt is spent, and the page is told so.
    const again = await client.get(callback, { accept: 'text/html' });
    expect(again.headers.location).toBe('/sign-in?sign_in_error=no_sign_in_in_progress');
    const refused = (await auditOf(admin.client, 'auth.signin')).filter((e) => e.actor.id === admin.userId);
    expect(refused).toMatchObject([{ outcome: 'denied', details: { reason: 'mfa_required' } }]);
  });

  it('refuses a sign-in without MFA with a clear message and an audit entry, and opens no session', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const res = await signIn(client, account(admin.email, ['pwd']));
    expect(res.statusCode).toBe(403);
    expect(res.json().error.code).toBe('forbidden');
    expect(res.json().error.details.reason).toBe('mfa_required');
    expect(res.json().error.message).toMatch(/multi-factor authentication/);
    expect(client.cookies.has('tollgate_session')).toBe(false);
    expect(client.cookies.has('tollgate_onboarding')).toBe(false);
    expect((await client.get(api('/auth/me'))).statusCode).toBe(401);
    const refused = (await auditOf(admin.client, 'auth.signin')).filter((e) => e.actor.id === admin.userId);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ outcome: 'denied', details: { reason: 'mfa_required', method: 'oidc' } });
  });

  it('refuses a new person without MFA and creates nobody', async () => {
    const email = `nomfa-${uniqueSlug()}@example.com`;
    const res = await signIn(new Client(t.app), account(email, ['pwd']));
    expect(res.statusCode).toBe(403);
    // Nobody was created: a development sign-in with that email makes a new person with no organisation.
    const dev = await new Client(t.app).post(api('/auth/dev-login'), { email });
    expect(dev.json().status).toBe('onboarding');
  });

  it('decides MFA from amr, or from a configured acr, under configurable claim names', () => {
    const settings = loadConfig({}).oidcSignIn;
    expect(showsMfa({ amr: ['pwd', 'otp'] }, settings)).toBe(true);
    expect(showsMfa({ amr: ['pwd', 'mfa'] }, settings)).toBe(true);
    expect(showsMfa({ amr: ['swk'] }, settings)).toBe(true);
    expect(showsMfa({ amr: ['pwd'] }, settings)).toBe(false);
    expect(showsMfa({}, settings)).toBe(false);
    expect(showsMfa({ acr: 'gold' }, settings)).toBe(false);
    const custom = loadConfig({ OIDC_MFA_ACR_VALUES: 'gold,urn:mace:incommon:iap:silver', OIDC_AMR_CLAIM: 'auth_methods', OIDC_ACR_CLAIM: 'loa' }).oidcSignIn;
    expect(showsMfa({ loa: 'gold' }, custom)).toBe(true);
    expect(showsMfa({ acr: 'gold' }, custom)).toBe(false);
    expect(showsMfa({ auth_methods: ['otp'] }, custom)).toBe(true);
    expect(showsMfa({ amr: ['otp'] }, custom)).toBe(false);
  });

  it('gives a new person the onboarding cookie, and creating an organisation works after it', async () => {
    const email = `new-${uniqueSlug()}@example.com`;
    const client = new Client(t.app);
    const res = await signIn(client, account(email, ['pwd', 'otp']));
    expect(res.statusCode, res.body).toBe(302);
    expect(client.cookies.has('tollgate_onboarding')).toBe(true);
    expect(client.cookies.has('tollgate_session')).toBe(false);
    const waiting = await client.get(api('/auth/onboarding'));
    expect(waiting.statusCode).toBe(200);
    expect(waiting.json().user).toMatchObject({ email, display_name: 'Olive Oidc' });
    const onboard = await client.post(api('/tenants/onboard'), {
      name: 'Oidc Org',
      slug: uniqueSlug(),
      primary_region: 'eu-west',
      admin_display_name: 'Olive Oidc',
    });
    expect(onboard.statusCode, onboard.body).toBe(201);
    const me = await client.get(api('/auth/me'));
    expect(me.statusCode).toBe(200);
    expect(me.json().user.email).toBe(email);
  });

  it('links no one by an unverified email', async () => {
    const admin = await onboardAdmin(t.app);
    const res = await signIn(new Client(t.app), account(admin.email, ['otp'], { email_verified: false }));
    expect(res.statusCode).toBe(403);
    expect(res.json().error.details.reason).toBe('email_not_verified');
  });

  it('refuses a disabled person, audited', async () => {
    const admin = await onboardAdmin(t.app);
    const email = `member-${uniqueSlug()}@example.com`;
    const added = await admin.client.post(api('/users'), { email, display_name: 'Dee Sabled', roles: ['viewer'] });
    expect(added.statusCode, added.body).toBe(201);
    const id = added.json().id as string;
    expect((await admin.client.patch(api(`/users/${id}`), { status: 'disabled' })).statusCode).toBe(200);
    const client = new Client(t.app);
    const res = await signIn(client, account(email, ['pwd', 'otp']));
    expect(res.statusCode).toBe(403);
    expect(res.json().error.details.reason).toBe('account_disabled');
    expect(client.cookies.has('tollgate_session')).toBe(false);
    expect(client.cookies.has('tollgate_onboarding')).toBe(false);
    const refused = (await auditOf(admin.client, 'auth.signin')).filter((e) => e.actor.id === id);
    expect(refused.map((e) => [e.outcome, e.details.reason])).toEqual([['denied', 'account_disabled']]);
  });

  // Wherever return_to points, the person lands on this service: a path of its own, or /.
  it.each<[string, string]>([
    ['/agents', '/agents'],
    ['/policies?tab=draft#v2', '/policies?tab=draft#v2'],
    ['https://evil.example/steal', '/'],
    ['http://tollgate.test.evil.example/', '/'],
    ['https://tollgate.test/agents', '/'],
    ['//evil.example', '/'],
    ['///evil.example', '/'],
    ['/\\evil.example', '/'],
    ['\\\\evil.example', '/'],
    ['javascript:alert(1)', '/'],
    ['JaVaScRiPt:alert(1)', '/'],
    ['data:text/html,<script>alert(1)</script>', '/'],
    ['%2F%2Fevil.example', '/'],
    ['/%2F%2Fevil.example', '/'],
    ['/%5Cevil.example', '/'],
    ['/%252F%252Fevil.example', '/'],
    ['/\t/evil.example', '/'],
    ['agents', '/'],
    ['', '/'],
  ])('return_to %j lands on %j', async (returnTo, expected) => {
    const admin = await onboardAdmin(t.app);
    const res = await signIn(new Client(t.app), account(admin.email, ['otp']), returnTo);
    expect(res.statusCode, res.body).toBe(302);
    expect(res.headers.location).toBe(expected);
  });

  it('refuses a callback without a sign-in in progress in this browser', async () => {
    const res = await new Client(t.app).get(api('/auth/callback?code=abc&state=def'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.details.reason).toBe('no_sign_in_in_progress');
  });

  it('refuses an attempt older than ten minutes', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const callback = await toCallback(client, account(admin.email, ['otp']));
    const flow = JSON.parse(Buffer.from(t.app.unsignCookie(client.cookies.get(OIDC_FLOW_COOKIE)!).value!, 'base64url').toString());
    const old = { ...flow, exp: Date.now() - 1000 };
    client.cookies.set(OIDC_FLOW_COOKIE, t.app.signCookie(Buffer.from(JSON.stringify(old)).toString('base64url')));
    const res = await client.get(callback);
    expect(res.statusCode).toBe(401);
    expect(res.json().error.details.reason).toBe('no_sign_in_in_progress');
  });

  it('refuses a flow cookie that is not signed by this service', async () => {
    const client = new Client(t.app);
    await client.get(api('/auth/login'));
    const value = client.cookies.get(OIDC_FLOW_COOKIE)!;
    client.cookies.set(OIDC_FLOW_COOKIE, value.slice(0, value.lastIndexOf('.')) + '.forged');
    const res = await client.get(api('/auth/callback?code=abc&state=def'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.details.reason).toBe('no_sign_in_in_progress');
  });

  it("refuses another attempt's state (a callback forced into this browser)", async () => {
    const admin = await onboardAdmin(t.app);
    const victim = new Client(t.app);
    await victim.get(api('/auth/login'));
    // The attacker's own sign-in, completed at the provider, delivered to the victim's browser.
    const attacker = new Client(t.app);
    const callback = await toCallback(attacker, account(admin.email, ['otp']));
    const res = await victim.get(callback);
    expect(res.statusCode).toBe(401);
    expect(victim.cookies.has('tollgate_session')).toBe(false);
  });

  it("refuses an ID token whose nonce is not the attempt's", async () => {
    const admin = await onboardAdmin(t.app);
    const first = new Client(t.app);
    await first.get(api('/auth/login'));
    const flowOf = (c: Client) => JSON.parse(Buffer.from(t.app.unsignCookie(c.cookies.get(OIDC_FLOW_COOKIE)!).value!, 'base64url').toString());
    const second = new Client(t.app);
    const callback = await toCallback(second, account(admin.email, ['otp']));
    // The second attempt's verifier and state, but the first one's nonce: only the nonce check can refuse it.
    const forged = { ...flowOf(second), nonce: flowOf(first).nonce };
    second.cookies.set(OIDC_FLOW_COOKIE, t.app.signCookie(Buffer.from(JSON.stringify(forged)).toString('base64url')));
    const res = await second.get(callback);
    expect(res.statusCode).toBe(401);
    expect(second.cookies.has('tollgate_session')).toBe(false);
  });

  it('refuses a replayed callback: the code is used once', async () => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const callback = await toCallback(client, account(admin.email, ['otp']));
    const flowCookie = client.cookies.get(OIDC_FLOW_COOKIE)!;
    expect((await client.get(callback)).statusCode).toBe(302);
    const replay = new Client(t.app);
    replay.cookies.set(OIDC_FLOW_COOKIE, flowCookie);
    const res = await replay.get(callback);
    expect(res.statusCode).toBe(401);
    expect(res.json().error.details.reason).toBe('invalid_grant');
    expect(replay.cookies.has('tollgate_session')).toBe(false);
  });

  it("refuses the provider's error answer", async () => {
    const client = new Client(t.app);
    const login = await client.get(api('/auth/login'));
    const state = new URL(String(login.headers.location)).searchParams.get('state')!;
    const res = await client.get(api(`/auth/callback?error=access_denied&state=${state}&iss=${encodeURIComponent(op.issuer)}`));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.details.reason).toBe('access_denied');
  });

  it.each<[string, (c: Record<string, unknown>) => Record<string, unknown>]>([
    ['for another audience', (c) => ({ ...c, aud: 'someone-else' })],
    ['expired', (c) => ({ ...c, iat: Math.floor(Date.now() / 1000) - 7200, exp: Math.floor(Date.now() / 1000) - 3600 })],
    ['from another issuer', (c) => ({ ...c, iss: 'https://evil.example' })],
  ])('refuses an ID token %s', async (_name, change) => {
    const admin = await onboardAdmin(t.app);
    const client = new Client(t.app);
    const callback = await toCallback(client, account(admin.email, ['otp']));
    op.tamper = change;
    try {
      const res = await client.get(callback);
      expect(res.statusCode).toBe(401);
      expect(client.cookies.has('tollgate_session')).toBe(false);
    } finally {
      op.tamper = undefined;
    }
  });

  it('opens the session in the oldest organisation, and switching organisation keeps working', async () => {
    const admin = await onboardAdmin(t.app);
    const second = await admin.client.post(api('/tenants/onboard'), {
      name: 'Second Org',
      slug: uniqueSlug(),
      primary_region: 'eu-west',
      admin_display_name: 'Ada Admin',
    });
    expect(second.statusCode, second.body).toBe(201);
    const client = new Client(t.app);
    expect((await signIn(client, account(admin.email, ['otp']))).statusCode).toBe(302);
    const me = (await client.get(api('/auth/me'))).json();
    expect(me.tenant.id).toBe(admin.tenant.id);
    expect(me.tenants).toHaveLength(2);
    expect((await client.post(api('/auth/switch-tenant'), { tenant_id: second.json().tenant.id })).statusCode).toBe(204);
    expect((await client.get(api('/auth/me'))).json().tenant.id).toBe(second.json().tenant.id);
  });

  it('keeps logout and logout-all working for OpenID Connect sessions', async () => {
    const admin = await onboardAdmin(t.app);
    const acct = account(admin.email, ['otp']);
    const laptop = new Client(t.app);
    const phone = new Client(t.app);
    const tablet = new Client(t.app);
    for (const c of [laptop, phone, tablet]) expect((await signIn(c, acct)).statusCode).toBe(302);
    expect((await laptop.post(api('/auth/logout'))).statusCode).toBe(204);
    expect((await laptop.get(api('/auth/me'))).statusCode).toBe(401);
    expect((await phone.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await phone.post(api('/auth/logout-all'))).statusCode).toBe(204);
    expect((await tablet.get(api('/auth/me'))).statusCode).toBe(401);
  });
});

describe('OpenID Connect settings', () => {
  it('answers 404 at /auth/login and lists no provider when OpenID Connect is not configured; sign-in is rate-limited', async () => {
    const t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '3' } });
    try {
      const client = new Client(t.app);
      const login = await client.get(api('/auth/login'));
      expect(login.statusCode).toBe(404);
      expect(login.json().error.code).toBe('not_found');
      expect((await client.get(api('/auth/providers'))).json().providers.map((p: { kind: string }) => p.kind)).toEqual(['development']);
      // Login and callback share the sign-in budget of the client's address.
      expect((await client.get(api('/auth/callback?code=a&state=b'))).statusCode).toBe(401);
      expect((await client.get(api('/auth/login'))).statusCode).toBe(404);
      expect((await client.get(api('/auth/callback?code=a&state=b'))).statusCode).toBe(429);
    } finally {
      await t.close();
    }
  });

  it('is refused by the production guard when the issuer or callback URL is not https, or no MFA value is left', () => {
    const production = {
      ENVIRONMENT: 'production',
      OIDC_ISSUER: 'https://id.example.com',
      OIDC_REDIRECT_URI: 'https://tollgate.example.com/api/v1/auth/callback',
    };
    const oidcProblems = (env: Record<string, string>) =>
      productionProblems(loadConfig({ ...production, ...env })).filter((p) => p.startsWith('OIDC_'));
    expect(oidcProblems({}).filter((p) => !/missing/.test(p))).toEqual([]);
    expect(oidcProblems({ OIDC_ISSUER: 'http://id.example.com' }).join()).toContain('OIDC_ISSUER: must be an https URL');
    expect(oidcProblems({ OIDC_REDIRECT_URI: 'http://tollgate.example.com/api/v1/auth/callback' }).join()).toContain('OIDC_REDIRECT_URI');
    expect(oidcProblems({ OIDC_MFA_AMR_VALUES: '' }).join()).toContain('OIDC_MFA_AMR_VALUES');
    expect(oidcProblems({ OIDC_MFA_AMR_VALUES: '', OIDC_MFA_ACR_VALUES: 'gold' }).join()).not.toContain('OIDC_MFA_AMR_VALUES');
  });

  it.each<[Record<string, string>, string]>([
    [{ OIDC_CA_FILE: '/nonexistent/ca.pem' }, 'OIDC_CA_FILE'],
    [{ OIDC_SCOPES: 'email profile' }, 'OIDC_SCOPES'],
    [{ OIDC_REDIRECT_URI: 'tollgate.example.com/callback' }, 'OIDC_REDIRECT_URI'],
    [{ OIDC_AMR_CLAIM: 'a b' }, 'OIDC_AMR_CLAIM'],
  ])('refuses to start with %j', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(variable);
  });
});
