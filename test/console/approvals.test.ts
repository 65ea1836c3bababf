import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../client/index.js';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan } from '../support/harness.js';

/**
 * The approvals inbox in Chromium: an agent's payment is held for approval while its gateway client
 * waits; an approver decides it in the console with a reason; the client's resubmission then runs.
 */
describe('console: approvals', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let approver: Awaited<ReturnType<typeof addMember>>;
  let credentials: { clientId: string; clientSecret: string };
  let agentId: string;

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }), launchBrowser()]);
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    approver = await addMember(t.app, admin.client, ['approver']);
    const agent = (await admin.client.post(api('/agents'), { name: 'Payments agent' })).json();
    agentId = agent.id;
    const identity = (await admin.client.post(api(`/agents/${agentId}/identities`))).json();
    credentials = { clientId: identity.client_id, clientSecret: identity.client_secret };
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const payment = tools.find((x) => x.tool_key === 'payments.create_payment')!;
    const bound = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: payment.id, actions: ['invoke'], constraints: { max_amount: 500 } });
    expect(bound.statusCode).toBe(201);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('shows the held call with its parameters and reason codes; the approver approves with a reason, and the waiting client runs it', async () => {
    const gateway = new GatewayClient({ baseUrl: t.url, credentials, waitSeconds: 120, pollIntervalSeconds: 0.25 });
    const outcome = gateway.authoriseAndExecute({ tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 120, currency: 'EUR', payee: 'acme' }, justification: 'Invoice 2026-118' });

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, approver.email, '/approvals');
    expect(page.url()).toBe(`${t.url}/approvals`);
    // The inbox refreshes by itself: the request shows without a reload.
    const row = page.getByRole('row').filter({ hasText: 'payments.create_payment' });
    await row.waitFor({ timeout: 20_000 });
    await expect.poll(() => row.textContent()).toContain('Payments agent');
    expect(await row.textContent()).toContain('TOOL_APPROVAL_REQUIRED');
    await expectAccessible(page, 'the approvals inbox');

    await row.getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Approval: payments.create_payment' }).waitFor();
    const request = page.getByRole('region', { name: 'The request' });
    expect(await request.textContent()).toContain('Invoice 2026-118');
    expect(await request.getByLabel('Parameters').textContent()).toContain('"amount": 120');
    await expectAccessible(page, 'an approval request');

    await page.getByRole('button', { name: 'Approve' }).click();
    const dialog = page.getByRole('dialog', { name: 'Approve this tool call' });
    const confirm = dialog.getByRole('button', { name: 'Approve' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel('Reason (required)').fill('Invoice checked against the order');
    await expectAccessible(page, 'the approval dialog');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'The request is approved.' }).waitFor();

    const result = await outcome;
    expect(result).toMatchObject({ executed: true, decision: 'allow', state: 'executed' });
    expect(result.reason_codes).toContain('APPROVAL_GRANTED');
    // The console shows the resubmission's outcome on the request's page.
    await page.getByText('Action state').locator('..').getByText('executed').waitFor({ timeout: 15_000 });
    const approvals = (await admin.client.get(api('/approvals?status=approved'))).json().items;
    expect(approvals[0]).toMatchObject({ status: 'approved', votes: [{ approver_id: approver.userId, decision: 'approve', reason: 'Invoice checked against the order' }] });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows a refused decision in words with its correlation ID, and decides nothing', async () => {
    const gateway = new GatewayClient({ baseUrl: t.url, credentials });
    const held = await gateway.submit({ tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 480, currency: 'EUR', payee: 'acme' } });
    expect(held.needs_approval).toBe(true);
    const approvalId = held.approval_id!;
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, approver.email, `/approvals/${approvalId}`);
    await page.getByRole('heading', { name: 'Approval: payments.create_payment' }).waitFor();
    // Stale CSRF token: the API refuses, and the page says what to do, with the correlation ID.
    await context.addCookies([{ name: 'tollgate_csrf', value: 'stale', url: t.url }]);
    await page.getByRole('button', { name: 'Reject' }).click();
    const dialog = page.getByRole('dialog', { name: 'Reject this tool call' });
    await dialog.getByLabel('Reason (required)').fill('Wrong payee');
    await dialog.getByRole('button', { name: 'Reject' }).click();
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('security token is stale');
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'an error in the dialog');
    expect((await admin.client.get(api(`/approvals/${approvalId}`))).json()).toMatchObject({ status: 'pending', votes: [] });
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
