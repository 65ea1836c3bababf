import { randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECTIONS } from '../../console/src/sections.js';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { api, onboardAdmin, uniqueSlug } from '../support/harness.js';

/** Sign-in, onboarding, the organisation switch and sign-out, in Chromium against the real app. */
describe('console: sign-in, onboarding and organisations', () => {
  let t: ConsoleApp;
  let browser: Browser;

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }), launchBrowser()]);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** The signed-in person and organisation, as the API tells the page (same cookies). */
  const whoAmI = (page: Page) =>
    page.evaluate(async () => {
      const res = await fetch('/api/v1/auth/me');
      return res.ok ? ((await res.json()) as { user: { email: string }; tenant: { id: string; name: string } }) : res.status;
    });

  it('takes a newcomer from a deep link through sign-in and onboarding into their new organisation', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await page.goto('/agents');
    await page.waitForURL(`${t.url}/sign-in?return_to=%2Fagents`);
    await page.getByRole('heading', { name: 'Sign in to Tollgate' }).waitFor();
    await expectAccessible(page, 'the sign-in page');

    const email = `newcomer-${randomBytes(4).toString('hex')}@example.com`;
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Welcome to Tollgate' }).waitFor();
    expect(page.url()).toBe(`${t.url}/onboarding`);
    await expectAccessible(page, 'the onboarding page');

    // A taken short name: the API's refusal, in words, and nothing created.
    const taken = await onboardAdmin(t.app, 'Taken Org');
    await page.getByLabel('Organisation name').fill('Northwind Robotics');
    expect(await page.getByLabel('Short name (in addresses)').inputValue()).toBe('northwind-robotics');
    await page.getByLabel('Short name (in addresses)').fill(taken.tenant.slug);
    await page.getByLabel('Your name').fill('Nora Newcomer');
    await page.getByRole('button', { name: 'Create organisation' }).click();
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toMatch(/correlation ID/);
    await expectAccessible(page, 'an onboarding error');
    expect(await whoAmI(page)).toBe(401);

    const slug = uniqueSlug('northwind');
    await page.getByLabel('Short name (in addresses)').fill(slug);
    await page.getByRole('button', { name: 'Create organisation' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    const me = await whoAmI(page);
    expect(me).toMatchObject({ user: { email }, tenant: { name: 'Northwind Robotics' } });
    expect(await page.getByLabel('Organisation').inputValue()).toBe((me as { tenant: { id: string } }).tenant.id);
    expect(await page.getByRole('banner').textContent()).toContain('Nora Newcomer');
    // The administrator sees every section.
    expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link').count()).toBe(13);
    await expectAccessible(page, 'the first signed-in page');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Tollgate' }).waitFor();
    expect(await whoAmI(page)).toBe(401);
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('returns to the page asked for after sign-in, and switches between the person’s organisations', async () => {
    const first = await onboardAdmin(t.app, 'First Org');
    const second = await onboardAdmin(t.app, 'Second Org');
    const email = `both-${randomBytes(4).toString('hex')}@example.com`;
    for (const admin of [first, second]) {
      const added = await admin.client.post(api('/users'), { email, display_name: 'Bo Both', roles: ['auditor'] });
      expect(added.statusCode, added.body).toBe(201);
    }
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, email, '/evidence');
    await page.waitForURL(`${t.url}/evidence`);
    const before = (await whoAmI(page)) as { tenant: { id: string } };
    const other = before.tenant.id === first.tenant.id ? second : first;

    const orgSwitch = page.getByLabel('Organisation');
    expect(await orgSwitch.locator('option').allTextContents()).toEqual(expect.arrayContaining(['First Org', 'Second Org']));
    await orgSwitch.selectOption(other.tenant.id);
    await expect.poll(async () => ((await whoAmI(page)) as { tenant: { id: string } }).tenant.id).toBe(other.tenant.id);
    await expect.poll(() => orgSwitch.inputValue()).toBe(other.tenant.id);
    // The navigation shows the sections the person's roles there grant, and only those.
    const granted = new Set(((await whoAmI(page)) as unknown as { permissions: string[] }).permissions);
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('link').allTextContents()).toEqual(SECTIONS.filter((s) => granted.has(s.permission)).map((s) => s.label));
    expect(granted.has('agent:control')).toBe(false);
    await expectAccessible(page, 'the page after an organisation switch');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('sends a signed-out page back to sign-in when its session ends', async () => {
    const admin = await onboardAdmin(t.app, 'Ending Org');
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/agents');
    // Signed out elsewhere (every session of the person ends); the next request of the page gets 401.
    expect((await admin.client.post(api('/auth/logout-all'))).statusCode).toBe(204);
    await page.getByRole('link', { name: 'Approvals' }).click();
    await page.getByRole('heading', { name: 'Sign in to Tollgate' }).waitFor();
    expect(page.url()).toContain('/sign-in?return_to=');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('after sign-in follows only a return_to on this console', async () => {
    const admin = await onboardAdmin(t.app, 'Return Org');
    const { page, problems, context } = await openPage(browser, t.url);
    for (const back of ['//evil.example/x', '/\\evil.example/x', 'https://evil.example/']) {
      await page.goto(`/sign-in?return_to=${encodeURIComponent(back)}`);
      await page.getByLabel('Email').fill(admin.email);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      expect(page.url(), back).toBe(`${t.url}/`);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Sign in to Tollgate' }).waitFor();
    }
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
