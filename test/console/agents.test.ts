import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan } from '../support/harness.js';

/**
 * The agents pages in Chromium: the list with its filters kept in the address, an agent's page with every
 * section, and containment behind a confirmation that makes the person type the agent's name, checked
 * through the API as well: the status, the history and the agent's own token.
 */
describe('console: agents', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let viewer: Awaited<ReturnType<typeof addMember>>;
  let ledger: { id: string; name: string };
  let staging: { id: string; name: string };
  let dormant: { id: string; name: string };
  let identity: { client_id: string; client_secret: string };

  const exchange = async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    expect(res.statusCode).toBe(200);
    return res.json().access_token as string;
  };
  /** The agent's own call through the gateway, with its bearer token. */
  const submitAs = (token: string) =>
    t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': randomUUID() },
      payload: { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } },
    });
  const register = async (body: Record<string, unknown>) => {
    const res = await admin.client.post(api('/agents'), body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; name: string };
  };
  const agentNames = (page: Page) => page.getByRole('table').getByRole('link').allTextContents();

  beforeAll(async () => {
    // No revocation cache: a suspension shows on the very next gateway call, not a second later.
    [t, browser] = await Promise.all([
      startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0' } }),
      launchBrowser(),
    ]);
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    viewer = await addMember(t.app, admin.client, ['viewer']);
    ledger = await register({
      name: 'Ledger reconciler',
      environment: 'production',
      description: 'Matches bank statements to the ledger',
      purpose: 'Reconcile the month-end ledger',
      framework: 'langgraph',
      data_classification: 'confidential',
      owners: [{ name: 'Fiona Finance', email: 'fiona@example.com', owner_type: 'accountable' }],
    });
    staging = await register({ name: 'Staging summariser', environment: 'staging' });
    dormant = await register({ name: 'Dormant crawler', environment: 'development' });
    const suspended = await admin.client.post(api(`/agents/${dormant.id}/suspend`), { reason: 'unused for months', confirm: true });
    expect(suspended.statusCode).toBe(200);

    identity = (await admin.client.post(api(`/agents/${ledger.id}/identities`))).json();
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const lookup = tools.find((x) => x.tool_key === 'crm.lookup_customer')!;
    const bound = await admin.client.post(api(`/agents/${ledger.id}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
    expect(bound.statusCode).toBe(201);
    const version = await admin.client.post(api(`/agents/${ledger.id}/versions`), { version_label: '1.4.0', change_summary: 'New matching rules' });
    expect(version.statusCode).toBe(201);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('suspends an agent only once its exact name is typed; the agent is suspended, its token dead, and the page shows it', async () => {
    const token = await exchange();
    const before = await submitAs(token);
    expect(before.statusCode).toBe(200);
    expect(before.json()).toMatchObject({ action: { status: 'executed' }, decision: { decision: 'allow' } });

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/agents/${ledger.id}`);
    await page.getByRole('heading', { name: 'Ledger reconciler', level: 1 }).waitFor();
    // Every section of the agent, from its own read.
    const about = page.getByRole('region', { name: 'About' });
    expect(await about.textContent()).toContain('Matches bank statements to the ledger');
    expect(await about.textContent()).toContain('langgraph');
    expect(await page.getByRole('region', { name: 'Owners' }).textContent()).toContain('fiona@example.com');
    await page.getByRole('region', { name: 'Identities' }).getByText(identity.client_id).waitFor();
    await page.getByRole('region', { name: 'Permission bindings' }).getByText('crm.lookup_customer').waitFor();
    await page.getByRole('region', { name: 'Recent decisions' }).getByText('crm.lookup_customer').waitFor();
    await page.getByRole('region', { name: 'Versions' }).getByText('1.4.0').waitFor();
    const risk = page.getByRole('region', { name: 'Risk' });
    await risk.getByText(/\d+ of 100/).waitFor();
    expect(await risk.getByRole('table').getByRole('row').count()).toBeGreaterThan(1);
    await page.getByRole('region', { name: 'Containment history' }).getByText('The agent has never been contained.').waitFor();
    await expectAccessible(page, 'an agent’s page');

    await page.getByRole('button', { name: 'Suspend', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Suspend Ledger reconciler' });
    await dialog.waitFor();
    const confirm = dialog.getByRole('button', { name: 'Suspend', exact: true });
    const typed = dialog.getByLabel('Type Ledger reconciler to confirm');
    await dialog.getByLabel('Reason (required)').fill('Unexpected transfers to a new payee');
    expect(await confirm.isDisabled()).toBe(true);
    // Not the exact name: a prefix, other case, a trailing space.
    for (const wrong of ['Ledger', 'ledger reconciler', 'Ledger reconciler ']) {
      await typed.fill(wrong);
      expect(await confirm.isDisabled(), `confirm with "${wrong}" typed`).toBe(true);
    }
    await typed.fill('Ledger reconciler');
    expect(await confirm.isEnabled()).toBe(true);
    await expectAccessible(page, 'the suspend dialog');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'The agent is suspended.' }).waitFor();
    await page.getByText('Status suspended', { exact: true }).waitFor();
    const history = page.getByRole('region', { name: 'Containment history' });
    const entry = history.getByRole('row').filter({ hasText: 'Unexpected transfers to a new payee' });
    await entry.waitFor();
    expect(await entry.textContent()).toContain('suspended');
    expect(await entry.textContent()).toContain('you');
    // What a suspended agent may have: restore, not suspend again.
    expect(await page.getByRole('button', { name: 'Suspend', exact: true }).count()).toBe(0);
    await page.getByRole('button', { name: 'Restore', exact: true }).waitFor();
    await expectAccessible(page, 'a suspended agent’s page');

    expect((await admin.client.get(api(`/agents/${ledger.id}`))).json()).toMatchObject({ status: 'suspended' });
    const events = (await admin.client.get(api(`/agents/${ledger.id}/containment`))).json().items;
    expect(events).toEqual([expect.objectContaining({ action: 'suspend', reason: 'Unexpected transfers to a new payee', actor_id: admin.userId })]);
    const after = await submitAs(token);
    expect([401, 403]).toContain(after.statusCode);
    expect(after.json().error.code).toBe('session_revoked');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('restores the suspended agent with the typed confirmation; a new token works, the old one stays dead', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/agents/${ledger.id}`);
    await page.getByText('Status suspended', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Restore', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Restore Ledger reconciler' });
    const confirm = dialog.getByRole('button', { name: 'Restore', exact: true });
    await dialog.getByLabel('Type Ledger reconciler to confirm').fill('Ledger reconciler');
    // The reason is required too.
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel('Reason (required)').fill('Payee confirmed with the bank');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'The agent is restored.' }).waitFor();
    await page.getByText('Status active', { exact: true }).waitFor();
    await page.getByRole('region', { name: 'Containment history' }).getByRole('row').filter({ hasText: 'Payee confirmed with the bank' }).waitFor();
    await page.getByRole('button', { name: 'Suspend', exact: true }).waitFor();

    expect((await admin.client.get(api(`/agents/${ledger.id}`))).json()).toMatchObject({ status: 'active' });
    const events = (await admin.client.get(api(`/agents/${ledger.id}/containment`))).json().items;
    expect(events.map((e: { action: string; reason: string }) => [e.action, e.reason])).toEqual([
      ['suspend', 'Unexpected transfers to a new payee'],
      ['restore', 'Payee confirmed with the bank'],
    ]);
    const fresh = await submitAs(await exchange());
    expect(fresh.statusCode).toBe(200);
    expect(fresh.json()).toMatchObject({ action: { status: 'executed' }, decision: { decision: 'allow' } });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows a refused containment in words in the dialog, and changes nothing', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/agents/${staging.id}`);
    await page.getByRole('heading', { name: 'Staging summariser', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Turn gateway access off' }).click();
    const dialog = page.getByRole('dialog', { name: 'Turn gateway access off for Staging summariser' });
    await dialog.getByLabel('Type Staging summariser to confirm').fill('Staging summariser');
    // Two characters pass the page's "required" but not the API's three: its envelope is shown, with the correlation ID.
    await dialog.getByLabel('Reason (required)').fill('no');
    await dialog.getByRole('button', { name: 'Turn gateway access off' }).click();
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('Some fields are not valid.');
    expect(await alert.textContent()).toContain('reason');
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'an error in the containment dialog');
    expect((await admin.client.get(api(`/agents/${staging.id}`))).json()).toMatchObject({ gateway_access: true });

    await dialog.getByLabel('Reason (required)').fill('Staging is frozen for the audit');
    await dialog.getByRole('button', { name: 'Turn gateway access off' }).click();
    await page.getByRole('status').filter({ hasText: 'Gateway access is off.' }).waitFor();
    await page.getByRole('button', { name: 'Turn gateway access on' }).waitFor();
    expect((await admin.client.get(api(`/agents/${staging.id}`))).json()).toMatchObject({ gateway_access: false, status: 'active' });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('narrows the list with filters kept in the address', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/agents');
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
    await expect.poll(async () => (await agentNames(page)).sort()).toEqual(['Dormant crawler', 'Ledger reconciler', 'Staging summariser']);
    const ledgerRow = page.getByRole('row').filter({ hasText: 'Ledger reconciler' });
    expect(await ledgerRow.textContent()).toContain('Fiona Finance');
    expect(await ledgerRow.textContent()).toContain('production');

    await page.getByLabel('Environment').selectOption('staging');
    await expect.poll(() => agentNames(page)).toEqual(['Staging summariser']);
    expect(new URL(page.url()).searchParams.get('environment')).toBe('staging');
    await expectAccessible(page, 'the agents list filtered by environment');

    await page.getByLabel('Environment').selectOption('production');
    await expect.poll(() => agentNames(page)).toEqual(['Ledger reconciler']);
    // A filter with no match says so.
    await page.getByLabel('Status').selectOption('suspended');
    await page.getByText('No agent matches these filters.').waitFor();
    await expectAccessible(page, 'the agents list with no match');

    // The address carries the filters: opened afresh, the page shows the same list.
    await page.goto('/agents?status=suspended');
    await expect.poll(() => agentNames(page)).toEqual(['Dormant crawler']);
    expect(await page.getByLabel('Status').inputValue()).toBe('suspended');
    expect(await page.getByLabel('Environment').inputValue()).toBe('');

    await page.getByRole('button', { name: 'Clear filters' }).click();
    await page.getByLabel('Search').fill('ledger');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await expect.poll(() => agentNames(page)).toEqual(['Ledger reconciler']);
    expect(new URL(page.url()).searchParams.get('q')).toBe('ledger');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows a person without agent:control no containment button, and says which sections their roles do not grant', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, viewer.email, `/agents/${ledger.id}`);
    await page.getByRole('heading', { name: 'Ledger reconciler', level: 1 }).waitFor();
    await page.getByRole('region', { name: 'Containment history' }).getByText('Payee confirmed with the bank').waitFor();
    for (const name of ['Suspend', 'Restore', 'Revoke', 'Revoke sessions', 'Turn gateway access off', 'Turn gateway access on']) {
      expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    }
    // The viewer's roles grant no identity:read nor audit:read: those sections say so, the rest of the page works.
    expect(await page.getByRole('region', { name: 'Identities' }).textContent()).toContain('identity:read');
    expect(await page.getByRole('region', { name: 'Versions' }).textContent()).toContain('audit:read');
    await page.getByRole('region', { name: 'Recent decisions' }).getByText('crm.lookup_customer').first().waitFor();
    await expectAccessible(page, 'an agent’s page for a viewer');
    // The API refuses the viewer too: hiding the buttons is a courtesy, not the control.
    const refused = await viewer.client.post(api(`/agents/${ledger.id}/suspend`), { reason: 'trying anyway', confirm: true });
    expect(refused.statusCode).toBe(403);
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('revokes an agent permanently, says so before, and offers nothing after', async () => {
    const retired = await register({ name: 'Retired bot', environment: 'development' });
    const its = (await admin.client.post(api(`/agents/${retired.id}/identities`))).json();
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/agents/${retired.id}`);
    await page.getByRole('region', { name: 'Identities' }).getByText(its.client_id).waitFor();
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke Retired bot permanently' });
    expect(await dialog.textContent()).toContain('This is permanent and cannot be undone');
    await dialog.getByLabel('Reason (required)').fill('Decommissioned with the old billing system');
    await dialog.getByLabel('Type Retired bot to confirm').fill('Retired bot');
    await dialog.getByRole('button', { name: 'Revoke', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'The agent is revoked permanently.' }).waitFor();
    await page.getByText('Status revoked', { exact: true }).waitFor();
    await page.getByText('nothing can change it any more').waitFor();
    // The identities section follows: the agent's identity is revoked with it.
    await page.getByRole('region', { name: 'Identities' }).getByRole('row').filter({ hasText: its.client_id }).getByText('revoked').waitFor();
    for (const name of ['Suspend', 'Restore', 'Revoke', 'Revoke sessions', 'Turn gateway access off', 'Turn gateway access on']) {
      expect(await page.getByRole('button', { name, exact: true }).count(), name).toBe(0);
    }
    await expectAccessible(page, 'a revoked agent’s page');
    expect((await admin.client.get(api(`/agents/${retired.id}`))).json()).toMatchObject({ status: 'revoked', gateway_access: false });
    expect((await admin.client.get(api(`/identities?agent_id=${retired.id}`))).json().items).toEqual([expect.objectContaining({ id: its.id, status: 'revoked' })]);
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('pages the list with "Load more"', async () => {
    // An organisation of its own, so the other tests' lists stay as they are.
    const fleet = await onboardAdmin(t.app, 'Fleet');
    // The free plan caps the number of agents below one page.
    await setPlan(t, fleet.tenant.id, 'enterprise');
    const names = Array.from({ length: 53 }, (_, i) => `Fleet agent ${String(i + 1).padStart(2, '0')}`);
    for (const name of names) expect((await fleet.client.post(api('/agents'), { name })).statusCode).toBe(201);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, fleet.email, '/agents');
    await expect.poll(async () => (await agentNames(page)).length).toBe(50);
    await page.getByRole('button', { name: 'Load more' }).click();
    await expect.poll(async () => (await agentNames(page)).sort()).toEqual(names);
    expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it("shows another organisation's agent as not found", async () => {
    const other = await onboardAdmin(t.app, 'Other Org');
    const theirs = (await other.client.post(api('/agents'), { name: 'Their secret agent' })).json();
    expect((await admin.client.get(api(`/agents/${theirs.id}`))).statusCode).toBe(404);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/agents/${theirs.id}`);
    await page.getByRole('heading', { name: 'Agent not found', level: 1 }).waitFor();
    expect(await page.getByText('Their secret agent').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Suspend', exact: true }).count()).toBe(0);
    await expectAccessible(page, 'the agent not-found page');
    // An address that is no agent ID at all says the same.
    await page.goto('/agents/not-an-id');
    await page.getByRole('heading', { name: 'Agent not found', level: 1 }).waitFor();
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
