import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_CHALLENGE_TOKEN } from '../../api/modules/auth/index.js';
import { MemoryMailer } from '../../api/modules/mail/index.js';
import { api, asOwner, Client, expectValidation, startTestApp, TestClock, uniqueSlug, type TestApp } from '../support/harness.js';
import { startTestSmtp, type ReceivedMail, type TestSmtp } from '../support/smtp-server.js';
import { startStandin, type Standin } from '../support/standin.js';
import { testTls } from '../support/tls.js';
import { freePort } from '../support/postgres-cluster.js';

/** The challenge site's secret key (SIGNUP_CLIENT_SECRET) and the one token the stand-in passes. */
const SITE_SECRET = 'signup-client-secret-test-7e21';
const GOOD_TOKEN = 'passed-challenge-token';
const PASSWORD = 'correct horse battery staple 42';

let counter = 0;
const newEmail = () => `person-${process.pid}-${++counter}-${Date.now() % 100000}@example.org`;
const codeOf = (m: ReceivedMail) => {
  const code = /verification code is (\d{8})/.exec(m.text)?.[1];
  if (!code) throw new Error(`no code in: ${m.text}`);
  return code;
};

/**
 * Self-service sign-up on real PostgreSQL, with its email sent over real SMTP (STARTTLS, authenticated) to a
 * test server that collects it, and its challenge checked by a stand-in `siteverify` service.
 */
describe('self-service sign-up', () => {
  const clock = new TestClock();
  let t: TestApp;
  let smtp: TestSmtp;
  let siteverify: Standin;
  let siteverifyDown = false;
  let dir: string;

  beforeAll(async () => {
    smtp = await startTestSmtp();
    siteverify = await startStandin({
      handler: (_req, res, body) => {
        if (siteverifyDown) return void res.writeHead(502).end();
        const form = new URLSearchParams(body);
        const success = form.get('secret') === SITE_SECRET && form.get('response') === GOOD_TOKEN;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(success ? { success: true, hostname: 'localhost' } : { success: false, 'error-codes': ['invalid-input-response'] }));
      },
    });
    dir = mkdtempSync(join(tmpdir(), 'tollgate-signup-'));
    writeFileSync(join(dir, 'ca.pem'), testTls().ca);
    t = await startTestApp({
      clock,
      env: {
        SIGNUP_ENABLED: 'true',
        SIGNUP_CLIENT_SECRET: SITE_SECRET,
        CHALLENGE_VERIFIER: 'siteverify',
        CHALLENGE_VERIFY_URL: `${siteverify.url}/siteverify`,
        EMAIL_BACKEND: 'smtp',
        SMTP_HOST: smtp.host,
        SMTP_PORT: String(smtp.port),
        SMTP_USERNAME: smtp.username,
        SMTP_PASSWORD: smtp.password,
        SMTP_STARTTLS: 'true',
        SMTP_CA_FILE: join(dir, 'ca.pem'),
        SMTP_FROM: 'Tollgate <no-reply@tollgate.test>',
        RATE_LIMIT_SIGNIN_PER_MINUTE: '100000',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await smtp?.close();
    await siteverify?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const signUp = (client: Client, over: Record<string, unknown> = {}) =>
    client.post(api('/auth/signup'), {
      email: newEmail(),
      name: 'Grace Hopper',
      password: PASSWORD,
      consent: true,
      challenge_token: GOOD_TOKEN,
      ...over,
    });
  const signupRow = (email: string) =>
    asOwner(t, async (c) => (await c.query('select * from signups where lower(email) = lower($1)', [email])).rows[0]);
  /** Waits for the message `n`, then checks that no other came meanwhile. */
  const mailTo = async (email: string, n: number) => {
    const m = await smtp.waitFor(n);
    expect(m.to).toEqual([email]);
    return m;
  };
  const noMoreMailAfter = async (count: number) => {
    await new Promise((r) => setTimeout(r, 300));
    expect(smtp.messages.length).toBe(count);
  };

  it('a new person signs up, receives the code over SMTP with STARTTLS, verifies it and creates an organisation', async () => {
    const client = new Client(t.app);
    const email = newEmail();
    const before = smtp.messages.length;
    const res = await signUp(client, { email });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ status: 'accepted', message: expect.any(String), resend_after_seconds: 60 });

    const mail = await mailTo(email, before + 1);
    expect(mail.secure).toBe(true); // sent only after STARTTLS
    expect(mail.user).toBe(smtp.username);
    expect(mail.from).toBe('no-reply@tollgate.test');
    expect(mail.subject).toBe('Your Tollgate verification code');
    const code = codeOf(mail);
    expect(mail.html).toContain(`>${code}</strong>`);
    expect(mail.html).toContain('Hello Grace Hopper,');

    // The code and the password are kept as hashes only.
    const row = await signupRow(email);
    expect(row.code_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(row)).not.toContain(code);
    expect(row.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(row.consent_at).toBeInstanceOf(Date);
    expect(t.logs.join('\n')).not.toContain(code);
    expect(t.logs.join('\n')).not.toContain(email);

    const verified = await client.post(api('/auth/signup/verify'), { email, code });
    expect(verified.statusCode, verified.body).toBe(200);
    const v = verified.json();
    expect(v).toMatchObject({ status: 'onboarding', user: { email, display_name: 'Grace Hopper' } });
    expect(client.cookies.has('tollgate_onboarding')).toBe(true);
    expect(client.csrf).toBe(v.csrf_token);
    expect(await signupRow(email)).toBeUndefined();
    const credential = await asOwner(t, async (c) => (await c.query('select * from local_credentials where user_id = $1', [v.user.id])).rows[0]);
    expect(credential.password_hash).toBe(row.password_hash);
    expect(credential.consent_at).toEqual(row.consent_at);
    // The API writes the hash but cannot read it back.
    const read = await t.database.db.selectFrom('local_credentials').select('password_hash').execute().catch((err: Error) => err);
    expect(String(read)).toContain('permission denied');

    const onboarding = await client.get(api('/auth/onboarding'));
    expect(onboarding.statusCode).toBe(200);
    expect(onboarding.json().user.email).toBe(email);
    const slug = uniqueSlug('signup');
    const onboard = await client.post(api('/tenants/onboard'), { name: 'Hopper Labs', slug, primary_region: 'eu-west', admin_display_name: 'Grace Hopper' });
    expect(onboard.statusCode, onboard.body).toBe(201);
    const me = await client.get(api('/auth/me'));
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ user: { id: v.user.id, email }, tenant: { slug }, roles: ['org_admin'] });

    // The code works once.
    expectValidation(await new Client(t.app).post(api('/auth/signup/verify'), { email, code }), 'code');
  });

  it('answers the same for an address that already has an account, and emails its owner instead of a code', async () => {
    const client = new Client(t.app);
    const email = newEmail();
    // The person exists already (here by a development sign-in).
    expect((await client.post(api('/auth/dev-login'), { email })).statusCode).toBe(200);
    const before = smtp.messages.length;
    const fresh = await signUp(new Client(t.app));
    const existing = await signUp(new Client(t.app), { email: email.toUpperCase() });
    expect(existing.statusCode).toBe(202);
    expect(existing.json()).toEqual(fresh.json());
    await smtp.waitFor(before + 2);
    const notice = smtp.messages.slice(before).find((m) => m.subject === 'You already have a Tollgate account');
    expect(notice?.to.map((a) => a.toLowerCase())).toEqual([email]);
    expect(notice?.text).not.toMatch(/\d{8}/);
    expect(await signupRow(email)).toBeUndefined();
    // Not again within the hour, however often it is tried.
    expect((await signUp(new Client(t.app), { email })).statusCode).toBe(202);
    await noMoreMailAfter(before + 2);
  });

  it('escapes what the person typed in the HTML part, and keeps it as typed in the text part', async () => {
    const email = newEmail();
    const before = smtp.messages.length;
    const name = 'Ada <b>&</b> "Lovelace"';
    expect((await signUp(new Client(t.app), { email, name })).statusCode).toBe(202);
    const mail = await mailTo(email, before + 1);
    expect(mail.text).toContain(`Hello ${name},`);
    expect(mail.html).toContain('Hello Ada &lt;b&gt;&amp;&lt;/b&gt; &quot;Lovelace&quot;,');
    expect(mail.html).not.toContain('<b>');
  });

  it('a filled honeypot answers 202 and does nothing', async () => {
    const email = newEmail();
    const before = smtp.messages.length;
    const res = await signUp(new Client(t.app), { email, website: 'https://spam.example' });
    expect(res.statusCode).toBe(202);
    expect(res.json().status).toBe('accepted');
    expect(await signupRow(email)).toBeUndefined();
    await noMoreMailAfter(before);
  });

  it('refuses without consent, with a weak password, or without a passed challenge (422 naming the field)', async () => {
    const before = smtp.messages.length;
    expectValidation(await signUp(new Client(t.app), { consent: false }), 'consent');
    // Left out, consent is false (the spec's default).
    expectValidation(await signUp(new Client(t.app), { consent: undefined }), 'consent');
    for (const [password, why] of [
      ['short1!A', 'at least 12 characters'],
      ['Password2024!', 'most common'],
      ['P@ssw0rd12345', 'most common'],
      ['qwertyuiop123', 'most common'],
      ['aaaaaaaaaaaaaaa', 'repeated'],
      ['123456789012', 'running'],
      ['GraceHopper!2024', 'your name'],
    ] as const) {
      const res = await signUp(new Client(t.app), { password });
      expectValidation(res, 'password');
      expect(res.json().error.details[0].message).toContain(why);
    }
    const email = `ada.lovelace-${counter++}@example.org`;
    expectValidation(await signUp(new Client(t.app), { email, password: `xx${email.split('@')[0]}!!` }), 'password');
    expectValidation(await signUp(new Client(t.app), { challenge_token: 'forged' }), 'challenge_token');
    expectValidation(await signUp(new Client(t.app), { challenge_token: null }), 'challenge_token');
    await noMoreMailAfter(before);
    // The stand-in was asked with the site's secret and the client's address.
    const asked = new URLSearchParams(siteverify.requests.at(-1)!.body);
    expect(asked.get('secret')).toBe(SITE_SECRET);
    expect(asked.get('response')).toBe('forged');
    expect(asked.get('remoteip')).toBe('127.0.0.1');
  });

  it('answers 503 when the challenge service cannot be asked, and lets nobody through', async () => {
    siteverifyDown = true;
    try {
      const email = newEmail();
      const res = await signUp(new Client(t.app), { email });
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('service_unavailable');
      expect(await signupRow(email)).toBeUndefined();
    } finally {
      siteverifyDown = false;
    }
  });

  it.each<[string, string, Record<string, unknown>]>([
    ['/auth/signup', 'email', { email: 'not-an-email' }],
    ['/auth/signup', 'email', { email: `${'a'.repeat(250)}@example.org` }],
    ['/auth/signup', 'name', { name: 'G' }],
    ['/auth/signup', 'name', { name: 'G'.repeat(121) }],
    ['/auth/signup', 'password', { password: 'p'.repeat(257) }],
    ['/auth/signup', 'consent', { consent: 'yes' }],
    ['/auth/signup', 'challenge_token', { challenge_token: 't'.repeat(2049) }],
    ['/auth/signup', 'website', { website: 'w'.repeat(201) }],
    ['/auth/signup/resend', 'email', { email: 'nope' }],
    ['/auth/signup/verify', 'code', { email: 'a@example.org', code: '12345' }],
    ['/auth/signup/verify', 'code', { email: 'a@example.org', code: '1234567890123' }],
    ['/auth/signup/verify', 'email', { email: undefined, code: '12345678' }],
  ])('%s refuses a bad %s with 422', async (path, field, over) => {
    const base = path === '/auth/signup' ? { email: newEmail(), name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: GOOD_TOKEN } : { email: newEmail() };
    expectValidation(await new Client(t.app).post(api(path), { ...base, ...over }), field);
  });

  it('a wrong code counts; after five wrong tries even the right code is refused until a new one is sent', async () => {
    const client = new Client(t.app);
    const email = newEmail();
    const before = smtp.messages.length;
    await signUp(client, { email });
    const code = codeOf(await mailTo(email, before + 1));
    const wrong = code === '00000000' ? '11111111' : '00000000';
    for (let i = 1; i <= 5; i++) {
      const res = await client.post(api('/auth/signup/verify'), { email, code: wrong });
      expectValidation(res, 'code');
      expect((await signupRow(email)).attempts).toBe(i);
    }
    expectValidation(await client.post(api('/auth/signup/verify'), { email, code }), 'code');

    clock.advance(61);
    expect((await client.post(api('/auth/signup/resend'), { email })).statusCode).toBe(202);
    const fresh = codeOf(await mailTo(email, before + 2));
    expect((await signupRow(email)).attempts).toBe(0);
    // Spaces or a dash copied along with the code do not matter.
    const typed = `${fresh.slice(0, 4)} - ${fresh.slice(4)}`;
    expect((await client.post(api('/auth/signup/verify'), { email, code: typed })).statusCode).toBe(200);
  });

  it('a code expires after 15 minutes', async () => {
    const client = new Client(t.app);
    const email = newEmail();
    const before = smtp.messages.length;
    await signUp(client, { email });
    const code = codeOf(await mailTo(email, before + 1));
    clock.advance(15 * 60 + 1);
    const res = await client.post(api('/auth/signup/verify'), { email, code });
    expectValidation(res, 'code');
    expect(res.json().error.message).toBe('The code is wrong or has expired.');
  });

  it('resend has a 60-second cooldown; a new code replaces the old one', async () => {
    const client = new Client(t.app);
    const email = newEmail();
    const before = smtp.messages.length;
    await signUp(client, { email });
    const first = codeOf(await mailTo(email, before + 1));

    clock.advance(30);
    const early = await client.post(api('/auth/signup/resend'), { email });
    expect(early.statusCode).toBe(202);
    // Signing up again within the cooldown sends nothing either.
    expect((await signUp(client, { email })).statusCode).toBe(202);
    await noMoreMailAfter(before + 1);

    clock.advance(30);
    const late = await client.post(api('/auth/signup/resend'), { email });
    expect(late.statusCode).toBe(202);
    expect(late.json()).toEqual(early.json());
    const second = codeOf(await mailTo(email, before + 2));
    if (second !== first) expectValidation(await client.post(api('/auth/signup/verify'), { email, code: first }), 'code');
    expect((await client.post(api('/auth/signup/verify'), { email, code: second })).statusCode).toBe(200);
  });

  it('answers resend and verify for an unknown address exactly as for a known one, sending nothing', async () => {
    const before = smtp.messages.length;
    const unknown = newEmail();
    const res = await new Client(t.app).post(api('/auth/signup/resend'), { email: unknown });
    expect(res.statusCode).toBe(202);
    expect(res.json().status).toBe('accepted');
    const verify = await new Client(t.app).post(api('/auth/signup/verify'), { email: unknown, code: '12345678' });
    expectValidation(verify, 'code');
    expect(verify.json().error.message).toBe('The code is wrong or has expired.');
    await noMoreMailAfter(before);
  });
});

describe('sign-up settings', () => {
  it('answers 404 for every sign-up operation while SIGNUP_ENABLED is off', async () => {
    const t = await startTestApp({ env: { EMAIL_BACKEND: 'memory' } });
    try {
      const c = new Client(t.app);
      const bodies: Array<[string, Record<string, unknown>]> = [
        ['/auth/signup', { email: newEmail(), name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: DEV_CHALLENGE_TOKEN }],
        ['/auth/signup/resend', { email: newEmail() }],
        ['/auth/signup/verify', { email: newEmail(), code: '12345678' }],
      ];
      for (const [path, body] of bodies) {
        const res = await c.post(api(path), body);
        expect(res.statusCode, path).toBe(404);
        expect(res.json().error.code).toBe('not_found');
      }
      // Before validation, too.
      expect((await c.post(api('/auth/signup'), { email: 'not-an-email' })).statusCode).toBe(404);
      expect((t.app.deps.mailer as MemoryMailer).messages).toEqual([]);
      expect((await c.get(api('/auth/providers'))).json().signup_enabled).toBe(false);
    } finally {
      await t.close();
    }
  });

  it('with the memory backend (make run) keeps the email and logs the code at info; the development challenge token passes', async () => {
    const t = await startTestApp({ env: { SIGNUP_ENABLED: 'true', EMAIL_BACKEND: 'memory' } });
    try {
      const c = new Client(t.app);
      const email = newEmail();
      expectValidation(await c.post(api('/auth/signup'), { email, name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: 'anything' }), 'challenge_token');
      const res = await c.post(api('/auth/signup'), { email, name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: DEV_CHALLENGE_TOKEN });
      expect(res.statusCode).toBe(202);
      const kept = (t.app.deps.mailer as MemoryMailer).messages;
      expect(kept).toHaveLength(1);
      expect(kept[0]!.to).toBe(email);
      const code = /verification code is (\d{8})/.exec(kept[0]!.text)![1]!;
      const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.signup_code);
      expect(line).toMatchObject({ level: 30, signup_code: code });
      expect(t.logs.join('\n')).not.toContain(email);
      expect((await c.post(api('/auth/signup/verify'), { email, code })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });

  it.each<[string, () => Promise<{ host: string; port: number; close(): Promise<void> }>]>([
    ['offers no STARTTLS', () => startTestSmtp({ withoutStartTls: true })],
    ['cannot be reached', async () => ({ host: '127.0.0.1', port: await freePort(), close: async () => undefined })],
  ])('answers 503 when the SMTP server %s, sends nothing in the clear and lets the person retry at once', async (_name, start) => {
    const server = await start();
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-signup-'));
    writeFileSync(join(dir, 'ca.pem'), testTls().ca);
    const t = await startTestApp({
      env: {
        SIGNUP_ENABLED: 'true',
        EMAIL_BACKEND: 'smtp',
        SMTP_HOST: server.host,
        SMTP_PORT: String(server.port),
        SMTP_USERNAME: 'tollgate-mailer',
        SMTP_PASSWORD: 'smtp-test-password-4d1c',
        SMTP_CA_FILE: join(dir, 'ca.pem'),
      },
    });
    try {
      const email = newEmail();
      const body = { email, name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: DEV_CHALLENGE_TOKEN };
      const res = await new Client(t.app).post(api('/auth/signup'), body);
      expect(res.statusCode).toBe(503);
      expect(res.json().error.code).toBe('service_unavailable');
      if ('messages' in server) expect((server as TestSmtp).messages).toEqual([]);
      expect(t.logs.some((l) => l.includes('sign-up email could not be sent'))).toBe(true);
      expect(t.logs.join('\n')).not.toContain(email);
      expect(t.logs.join('\n')).not.toContain('smtp-test-password-4d1c');
      // The failed send did not start the cooldown: a resend tries again at once (and fails again here).
      expect((await new Client(t.app).post(api('/auth/signup/resend'), { email })).statusCode).toBe(503);
    } finally {
      await t.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('limits sign-up operations per client address (429 rate_limited with Retry-After)', async () => {
    const t = await startTestApp({ env: { SIGNUP_ENABLED: 'true', EMAIL_BACKEND: 'memory', RATE_LIMIT_SIGNIN_PER_MINUTE: '3' }, clock: new TestClock() });
    try {
      const from = (ip: string) => ({ remoteAddress: ip });
      const post = (ip: string, path: string, body: Record<string, unknown>) =>
        t.app.inject({ method: 'POST', url: api(path), payload: body, ...from(ip) });
      const statuses = [];
      for (const path of ['/auth/signup/resend', '/auth/signup/verify', '/auth/signup/resend', '/auth/signup/resend']) {
        statuses.push((await post('10.0.0.7', path, path.endsWith('verify') ? { email: newEmail(), code: '12345678' } : { email: newEmail() })).statusCode);
      }
      expect(statuses).toEqual([202, 422, 202, 429]);
      const limited = await post('10.0.0.7', '/auth/signup', { email: newEmail(), name: 'Grace Hopper', password: PASSWORD, consent: true, challenge_token: DEV_CHALLENGE_TOKEN });
      expect(limited.statusCode).toBe(429);
      expect(limited.json().error.code).toBe('rate_limited');
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      // Another address has its own budget.
      expect((await post('10.0.0.8', '/auth/signup/resend', { email: newEmail() })).statusCode).toBe(202);
    } finally {
      await t.close();
    }
  });
});
