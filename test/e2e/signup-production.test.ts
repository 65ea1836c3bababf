import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, productionProblems } from '../../api/config.js';
import { freshDatabase, uniqueSlug } from '../support/harness.js';
import { HttpClient } from '../support/http-client.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { startTestSmtp, type TestSmtp } from '../support/smtp-server.js';
import { startStandin, type Standin } from '../support/standin.js';
import { testTls } from '../support/tls.js';
import { SAFE_PRODUCTION_ENV } from '../support/production-env.js';

const SITE_SECRET = 'signup-client-secret-e2e-5b90';
const GOOD_TOKEN = 'e2e-passed-challenge';

/** Every condition of the production guard safe; sign-up on, email over SMTP with STARTTLS. */
const PRODUCTION: Record<string, string> = {
  ...SAFE_PRODUCTION_ENV,
  SMTP_FROM: 'Tollgate <no-reply@tollgate.test>',
  SIGNUP_ENABLED: 'true',
  SIGNUP_CLIENT_SECRET: SITE_SECRET,
  CHALLENGE_VERIFIER: 'siteverify',
  LOG_LEVEL: 'info',
};

/**
 * A real `tollgate api` process in production mode, its guard satisfied, sends the sign-up's code over SMTP
 * with STARTTLS (the server's certificate from a private CA, SMTP_CA_FILE) and checks the challenge over
 * HTTPS; the person verifies and creates an organisation.
 */
describe('sign-up in production (a real tollgate api)', () => {
  let db: Awaited<ReturnType<typeof freshDatabase>>;
  let smtp: TestSmtp;
  let siteverify: Standin;
  let dir: string;
  let api: ReturnType<typeof spawnTollgate> | undefined;
  let base: string;

  beforeAll(async () => {
    db = await freshDatabase();
    smtp = await startTestSmtp();
    siteverify = await startStandin({
      tls: true,
      handler: (_req, res, body) => {
        const form = new URLSearchParams(body);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ success: form.get('secret') === SITE_SECRET && form.get('response') === GOOD_TOKEN }));
      },
    });
    dir = mkdtempSync(join(tmpdir(), 'tollgate-signup-e2e-'));
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, testTls().ca);
    const port = await freePort();
    base = `http://127.0.0.1:${port}/api/v1`;
    api = spawnTollgate(['api'], {
      ...PRODUCTION,
      DATABASE_URL: db.runtimeUrl,
      PORT: String(port),
      SMTP_HOST: smtp.host,
      SMTP_PORT: String(smtp.port),
      SMTP_USERNAME: smtp.username,
      SMTP_PASSWORD: smtp.password,
      SMTP_CA_FILE: ca,
      CHALLENGE_VERIFY_URL: `${siteverify.url}/siteverify`,
      // The challenge service's certificate is from the same test CA; Node's own setting trusts it.
      NODE_EXTRA_CA_CERTS: ca,
    });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, api);
  }, 90_000);

  afterAll(async () => {
    await stop(api);
    await smtp?.close();
    await siteverify?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('signs up, receives the code over SMTP, verifies it and creates an organisation', async () => {
    const browser = new HttpClient(base);
    const email = `newcomer-${process.pid}@example.org`;
    const signup = await browser.post('/auth/signup', {
      email,
      name: 'Katherine Johnson',
      password: 'orbital mechanics by hand 1962',
      consent: true,
      challenge_token: GOOD_TOKEN,
    });
    expect(signup.status, JSON.stringify(signup.json)).toBe(202);

    const mail = await smtp.waitFor(1);
    expect(mail.secure).toBe(true);
    expect(mail.to).toEqual([email]);
    const code = /verification code is (\d{8})/.exec(mail.text)?.[1];
    expect(code).toMatch(/^\d{8}$/);
    // Production logs neither the code nor the address.
    expect(api!.output()).not.toContain(code!);
    expect(api!.output()).not.toContain(email);

    const verified = await browser.post('/auth/signup/verify', { email, code });
    expect(verified.status, JSON.stringify(verified.json)).toBe(200);
    expect(browser.jar.has('tollgate_onboarding')).toBe(true);
    const onboard = await browser.post('/tenants/onboard', {
      name: 'Johnson Orbital',
      slug: uniqueSlug('orbital'),
      primary_region: 'eu-west',
      admin_display_name: 'Katherine Johnson',
    });
    expect(onboard.status, JSON.stringify(onboard.json)).toBe(201);
    const me = await browser.get('/auth/me');
    expect(me.status).toBe(200);
    expect(me.json.user.email).toBe(email);
    expect(me.json.roles).toEqual(['org_admin']);
    expect(siteverify.requests).toHaveLength(1);
  });

  it('refuses a sign-up whose challenge the service does not pass', async () => {
    const res = await new HttpClient(base).post('/auth/signup', {
      email: `bot-${process.pid}@example.org`,
      name: 'Not A Person',
      password: 'orbital mechanics by hand 1962',
      consent: true,
      challenge_token: 'made-up',
    });
    expect(res.status).toBe(422);
    expect(res.json.error.details[0].field).toBe('challenge_token');
  });
});

describe('the production guard for sign-up and email', () => {
  const safe = {
    ...PRODUCTION,
    DATABASE_URL: 'postgres://tollgate_app:pw@db.internal:5432/tollgate',
  };
  const problems = (over: Record<string, string | undefined>) => productionProblems(loadConfig({ ...safe, ...over }));

  it('accepts sign-up with siteverify over https (Turnstile by default)', () => {
    expect(problems({})).toEqual([]);
    expect(loadConfig(safe).challenge).toMatchObject({ verifier: 'siteverify', verifyUrl: 'https://challenges.cloudflare.com/turnstile/v0/siteverify' });
    expect(problems({ CHALLENGE_VERIFY_URL: 'https://api.hcaptcha.com/siteverify' })).toEqual([]);
  });

  it.each<[string, Record<string, string | undefined>, string]>([
    ['the development verifier', { CHALLENGE_VERIFIER: 'development' }, 'CHALLENGE_VERIFIER'],
    ['no challenge while sign-up is on', { CHALLENGE_VERIFIER: 'none' }, 'CHALLENGE_VERIFIER'],
    ['a plain-http siteverify URL', { CHALLENGE_VERIFY_URL: 'http://captcha.internal/siteverify' }, 'CHALLENGE_VERIFY_URL'],
  ])('refuses %s', (_name, over, variable) => {
    expect(problems(over).some((p) => p.startsWith(`${variable}:`))).toBe(true);
  });

  it('allows no challenge when sign-up is off', () => {
    expect(problems({ SIGNUP_ENABLED: 'false', CHALLENGE_VERIFIER: 'none' })).toEqual([]);
  });

  it('refuses an SMTP_CA_FILE that is not a readable PEM file, at start', () => {
    expect(() => loadConfig({ ...safe, SMTP_CA_FILE: '/nonexistent/ca.pem' })).toThrow(/SMTP_CA_FILE/);
  });
});
