import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { onboardAdmin } from '../support/harness.js';
import { startOidcProvider, type TestOidcProvider } from '../support/oidc-provider.js';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

/**
 * OpenID Connect sign-in from the console, in Chromium: the sign-in page offers the provider, the browser goes
 * to a real OpenID provider (oidc-provider, over TLS with the test CA) and back through the API's callback, and
 * lands on the page it asked for, signed in; a sign-in without a second factor is refused and says so.
 */
describe('console: sign-in with OpenID Connect', () => {
  let t: ConsoleApp;
  let op: TestOidcProvider;
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    const port = await freePort();
    op = await startOidcProvider({ redirectUri: `http://127.0.0.1:${port}/api/v1/auth/callback` });
    dir = mkdtempSync(join(tmpdir(), 'tollgate-console-oidc-'));
    writeFileSync(join(dir, 'ca.pem'), op.ca);
    [t, browser] = await Promise.all([
      startConsoleApp({
        port,
        env: {
          OIDC_ISSUER: op.issuer,
          OIDC_CLIENT_ID: op.clientId,
          OIDC_CLIENT_SECRET: op.clientSecret,
          OIDC_REDIRECT_URI: `http://127.0.0.1:${port}/api/v1/auth/callback`,
          OIDC_CA_FILE: join(dir, 'ca.pem'),
          RATE_LIMIT_SIGNIN_PER_MINUTE: '1000',
        },
      }),
      launchBrowser(),
    ]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await op?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /**
   * At the provider's login page, which is plain text naming its form (POST /interaction/:uid/login with
   * `account`): the form written into that page, on the provider's origin, and submitted as a person would.
   */
  async function signInAtProvider(page: import('playwright-core').Page, account: string): Promise<void> {
    await page.waitForURL((url) => url.origin === op.issuer && /^\/interaction\//.test(url.pathname));
    const action = `${new URL(page.url()).pathname}/login`;
    await page.setContent(`<form method="post" action="${action}"><input name="account" value="${account}" aria-label="Account"><button>Sign in at the provider</button></form>`);
    await page.getByRole('button', { name: 'Sign in at the provider' }).click();
  }

  it('signs a member in through the provider and returns to the page asked for', async () => {
    const admin = await onboardAdmin(t.app, 'OIDC Org');
    op.accounts.set('ada', { email: admin.email, email_verified: true, name: 'Ada Admin', amr: ['pwd', 'otp'] });
    const { page, problems, context } = await openPage(browser, t.url, { ignoreHTTPSErrors: true });
    await page.goto('/approvals');
    await page.waitForURL(`${t.url}/sign-in?return_to=%2Fapprovals`);
    const sso = page.getByRole('link', { name: 'Sign in with Single sign-on' });
    await expectAccessible(page, 'the sign-in page with a provider');
    await sso.click();
    await signInAtProvider(page, 'ada');
    await page.waitForURL(`${t.url}/approvals`);
    await page.getByRole('heading', { name: 'Approvals' }).waitFor();
    const me = await page.evaluate(async () => (await fetch('/api/v1/auth/me')).json());
    expect(me).toMatchObject({ user: { email: admin.email }, tenant: { id: admin.tenant.id } });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('refuses a sign-in without a second factor, and the person stays signed out', async () => {
    const admin = await onboardAdmin(t.app, 'OIDC Org 2');
    op.accounts.set('pwd-only', { email: admin.email, email_verified: true, name: 'Ada Admin', amr: ['pwd'] });
    const { page, problems, context } = await openPage(browser, t.url, { ignoreHTTPSErrors: true });
    await page.goto('/sign-in');
    await page.getByRole('link', { name: 'Sign in with Single sign-on' }).click();
    await signInAtProvider(page, 'pwd-only');
    // Back on the console's sign-in page, not on a JSON answer: the refusal in words.
    await page.waitForURL(`${t.url}/sign-in?sign_in_error=mfa_required`);
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('did not confirm multi-factor authentication');
    await expectAccessible(page, 'a refused sign-in');
    expect(await page.evaluate(async () => (await fetch('/api/v1/auth/me')).status)).toBe(401);
    // A caller that is not a browser still gets the envelope (test/api/oidc.test.ts).
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
