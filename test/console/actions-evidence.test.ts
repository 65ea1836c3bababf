import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../client/index.js';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, asOwner, onboardAdmin, setPlan } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;

/**
 * The actions and evidence pages in Chromium, on decisions an agent really asked the gateway for:
 * the list with its filters in the address, an action with its trace and its evidence, cancelling
 * a held action, and "Verify chain" before and after the chain is tampered with in the database.
 */
describe('console: actions and evidence', () => {
  let t: ConsoleApp;
  let browser: Browser;

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }), launchBrowser()]);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** An organisation whose agent may look customers up and pay up to 500 EUR (held for approval), and nothing else. */
  async function orgWithAgent(name: string) {
    const admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    const agent = (await admin.client.post(api('/agents'), { name })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const bind = async (key: string, constraints: Record<string, unknown> = {}) => {
      const res = await admin.client.post(api(`/agents/${agent.id}/permissions`), {
        target_kind: 'tool',
        target_id: tools.find((x) => x.tool_key === key)!.id,
        actions: ['invoke'],
        constraints,
      });
      expect(res.statusCode).toBe(201);
    };
    await bind('crm.lookup_customer');
    await bind('payments.create_payment', { max_amount: 500 });
    const gateway = new GatewayClient({ baseUrl: t.url, credentials: { clientId: identity.client_id, clientSecret: identity.client_secret } });
    return { admin, agentId: agent.id as string, gateway };
  }

  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const unbound = { tool: 'email.send_message', target: 'mailto://someone@example.com', parameters: { subject: 'hello' }, justification: 'Weekly digest' };
  const payment = { tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 120, currency: 'EUR', payee: 'acme' }, justification: 'Invoice 2026-7' };

  const allEvidence = async (admin: Admin) => {
    const items: Array<{ id: string; seq: number; event_type: string; action_request_id: string | null }> = [];
    for (let cursor: string | null = null; ; ) {
      const page: { items: typeof items; next_cursor: string | null } = (await admin.client.get(api(`/evidence?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`))).json();
      items.push(...page.items);
      if (!page.next_cursor) return items;
      cursor = page.next_cursor;
    }
  };

  const verifyResult = (page: Page) => page.getByTestId('verify-result');

  it('verifies the chain with its record count, then names the first broken record once a record is edited in the database', async () => {
    const { admin, gateway } = await orgWithAgent('Chain agent');
    const outcomes = [await gateway.submit(lookup), await gateway.submit(unbound), await gateway.submit(lookup)];
    expect(outcomes.map((o) => o.decision)).toEqual(['allow', 'deny', 'allow']);
    const records = await allEvidence(admin);
    expect(records.filter((r) => r.event_type === 'decision')).toHaveLength(3);
    const verified = (await admin.client.get(api('/evidence/verify'))).json();
    expect(verified).toEqual({ valid: true, records_checked: records.length, head_seq: records.length, first_broken: null });

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/evidence');
    await page.getByRole('heading', { name: 'Evidence', level: 1 }).waitFor();
    // The chain, newest first: the head's record leads the table.
    const table = page.getByRole('table', { name: 'Evidence records, newest first' });
    await table.waitFor();
    expect(await table.getByRole('row').nth(1).getByRole('link').first().textContent()).toBe(`#${records.length}`);
    await page.getByRole('region', { name: 'Signing keys' }).getByText('signs new records').waitFor();
    await page.getByRole('region', { name: 'Latest checkpoint' }).getByText(/No checkpoint has been signed yet|Head record/).waitFor();
    await expectAccessible(page, 'the evidence chain');

    // A malformed filter is refused by the API, and the page says which field and why.
    const filters = page.getByRole('search', { name: 'Filter evidence' });
    await filters.getByLabel('Action ID').fill('not-an-id');
    await filters.getByRole('button', { name: 'Apply' }).click();
    const refused = page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('Some fields are not valid.');
    expect(await refused.textContent()).toContain('query.action_request_id');
    await expectAccessible(page, 'a refused filter');
    await filters.getByRole('button', { name: 'Clear filters' }).click();
    await filters.getByLabel('Event type').fill('execution');
    await filters.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.url()).toBe(`${t.url}/evidence?event_type=execution`);
    await expect.poll(() => table.getByRole('row').count()).toBe(records.filter((r) => r.event_type === 'execution').length + 1);
    await filters.getByRole('button', { name: 'Clear filters' }).click();
    await expect.poll(() => table.getByRole('row').count()).toBe(records.length + 1);

    await page.getByRole('button', { name: 'Verify chain' }).click();
    const result = verifyResult(page);
    await result.getByText('Verified', { exact: true }).waitFor();
    expect(await result.textContent()).toContain(`All ${records.length} records check out`);
    const head = records[0]!;
    expect(await result.getByRole('link', { name: `record #${records.length}` }).getAttribute('href')).toBe(`/evidence/${head.id}`);
    await expectAccessible(page, 'a verified chain');

    // The second decision's record, edited as the database owner would: the runtime role cannot.
    const tampered = records.filter((r) => r.event_type === 'decision').reverse()[1]!;
    await asOwner(t, (c) => c.query(`update evidence_records set payload = jsonb_set(payload, '{decision}', '"allow"') where id = $1`, [tampered.id]));
    const broken = (await admin.client.get(api('/evidence/verify'))).json();
    expect(broken).toMatchObject({ valid: false, records_checked: tampered.seq - 1, first_broken: { id: tampered.id, seq: tampered.seq, reason: 'hash_mismatch' } });

    await page.getByRole('button', { name: 'Verify chain' }).click();
    await result.getByText('Broken', { exact: true }).waitFor();
    const text = await result.textContent();
    expect(text).toContain(`First broken record: record #${tampered.seq}`);
    expect(text).toContain('its content was changed after it was written');
    expect(text).toContain(`${tampered.seq - 1} records before it verified`);
    await expectAccessible(page, 'a broken chain');
    await result.getByRole('link', { name: `record #${tampered.seq}` }).click();
    await page.getByRole('heading', { name: `Evidence record #${tampered.seq}` }).waitFor();
    expect(page.url()).toBe(`${t.url}/evidence/${tampered.id}`);
    const one = (await admin.client.get(api(`/evidence/${tampered.id}`))).json();
    const integrity = page.getByRole('region', { name: 'Integrity' });
    expect(await integrity.textContent()).toContain(one.hash);
    expect(await integrity.textContent()).toContain(one.prev_hash);
    expect(await integrity.textContent()).toContain(one.signature);
    expect(await page.getByLabel('Payload as JSON').textContent()).toContain('"decision": "allow"');
    await expectAccessible(page, 'an evidence record');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('filters the actions by decision in the address, and shows an action with its trace, reason codes and evidence records', async () => {
    const { admin, gateway, agentId } = await orgWithAgent('Support agent');
    await gateway.submit(lookup);
    const denied = await gateway.submit(unbound);
    await gateway.submit(lookup);
    const held = await gateway.submit(payment);
    expect([denied.decision, held.decision]).toEqual(['deny', 'require_approval']);

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/actions');
    const table = page.getByRole('table', { name: 'Actions, newest first' });
    await table.waitFor();
    await expect.poll(() => table.getByRole('row').count()).toBe(5);
    await expect.poll(() => table.textContent()).toContain('Support agent');
    await expectAccessible(page, 'the actions list');

    const filters = page.getByRole('search', { name: 'Filter actions' });
    await filters.getByLabel('Decision').selectOption('deny');
    await expect.poll(() => page.url()).toBe(`${t.url}/actions?decision=deny`);
    await expect.poll(() => table.getByRole('row').count()).toBe(2);
    const row = table.getByRole('row').nth(1);
    expect(await row.textContent()).toContain('email.send_message');
    expect(await row.textContent()).toContain('PERMISSION_NOT_GRANTED');

    // The filter is in the address: a reload (or a shared link) shows the same list; a tool filter narrows it.
    await page.reload();
    await expect.poll(() => table.getByRole('row').count()).toBe(2);
    expect(await filters.getByLabel('Decision').inputValue()).toBe('deny');
    await filters.getByLabel('Decision').selectOption('');
    await filters.getByLabel('Tool').fill('crm.lookup_customer');
    await filters.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.url()).toBe(`${t.url}/actions?tool=crm.lookup_customer`);
    await expect.poll(() => table.getByRole('row').count()).toBe(3);
    await filters.getByLabel('Decision').selectOption('deny');
    await page.getByText('No action matches these filters.').waitFor();
    await expectAccessible(page, 'a filtered list with no match');
    await filters.getByRole('button', { name: 'Clear filters' }).click();
    await filters.getByLabel('Agent').selectOption({ label: 'Support agent' });
    await expect.poll(() => page.url()).toBe(`${t.url}/actions?agent_id=${agentId}`);
    await expect.poll(() => table.getByRole('row').count()).toBe(5);
    await filters.getByLabel('Decision').selectOption('deny');
    await expect.poll(() => page.url()).toBe(`${t.url}/actions?agent_id=${agentId}&decision=deny`);
    await expect.poll(() => table.getByRole('row').count()).toBe(2);

    await table.getByRole('row').nth(1).getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Action: email.send_message' }).waitFor();
    expect(page.url()).toBe(`${t.url}/actions/${denied.action_id}`);
    const action = (await admin.client.get(api(`/actions/${denied.action_id}`))).json();
    expect(action).toMatchObject({ decision: 'deny', state: 'denied', agent_id: agentId });

    const request = page.getByRole('region', { name: 'The request' });
    expect(await request.textContent()).toContain('Weekly digest');
    expect(await request.textContent()).toContain(action.correlation_id);
    expect(await request.getByLabel('Parameters').textContent()).toContain('"subject": "hello"');
    const decision = page.getByRole('region', { name: 'Decision', exact: true });
    for (const code of action.reason_codes as string[]) expect(await decision.textContent()).toContain(code);
    expect(await decision.textContent()).toContain('nothing ran');

    // The trace in the engine's order, each step with its outcome and reason.
    const steps = page.getByRole('list', { name: 'Decision trace' }).getByRole('listitem');
    const trace = action.trace as Array<{ step: string; outcome: string; reason?: string }>;
    expect(trace.length).toBeGreaterThan(1);
    expect(await steps.count()).toBe(trace.length);
    for (const [i, s] of trace.entries()) {
      const item = await steps.nth(i).textContent();
      expect(item).toContain(s.step.replaceAll('_', ' '));
      expect(item).toContain(s.outcome.replaceAll('_', ' '));
      if (s.reason) expect(item).toContain(s.reason);
    }
    const denyingStep = trace.findIndex((s) => s.outcome === 'deny');
    expect(trace[denyingStep]!.reason).toBe('PERMISSION_NOT_GRANTED');
    expect(await steps.nth(denyingStep).textContent()).toContain('PERMISSION_NOT_GRANTED');

    // Its evidence records, each linking to the record's page.
    const mine = (await admin.client.get(api(`/evidence?action_request_id=${denied.action_id}`))).json().items as Array<{ id: string; seq: number; event_type: string }>;
    expect(mine.map((r) => r.event_type)).toContain('decision');
    const evidence = page.getByRole('table', { name: 'Evidence records of this action' });
    await evidence.waitFor();
    expect(await evidence.getByRole('row').count()).toBe(mine.length + 1);
    expect(await evidence.getByRole('link', { name: `#${mine[0]!.seq}` }).getAttribute('href')).toBe(`/evidence/${mine[0]!.id}`);
    await expectAccessible(page, 'an action');

    await evidence.getByRole('link', { name: `#${mine[0]!.seq}` }).click();
    await page.getByRole('heading', { name: `Evidence record #${mine[0]!.seq}` }).waitFor();
    expect(await page.getByRole('link', { name: denied.action_id }).getAttribute('href')).toBe(`/actions/${denied.action_id}`);

    // The Decisions tab lists the same decision.
    await page.goto('/actions?view=decisions&decision=deny');
    const decisions = page.getByRole('table', { name: 'Decisions, newest first' });
    await expect.poll(() => decisions.getByRole('row').count()).toBe(2);
    expect(await decisions.textContent()).toContain('PERMISSION_NOT_GRANTED');
    await page.getByRole('button', { name: 'Executions', exact: true }).click();
    const executions = page.getByRole('table', { name: 'Executions, most recent first' });
    await expect.poll(() => executions.getByRole('row').count()).toBe(3);
    await expectAccessible(page, 'the executions');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('cancels an action held for approval, with a reason, and links its approval request', async () => {
    const { admin, gateway } = await orgWithAgent('Payments agent');
    const held = await gateway.submit(payment);
    expect(held.needs_approval).toBe(true);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/actions/${held.action_id}`);
    await page.getByRole('heading', { name: 'Action: payments.create_payment' }).waitFor();
    const approval = page.getByRole('region', { name: 'Approval' }).getByRole('link', { name: 'Open the approval request' });
    expect(await approval.getAttribute('href')).toBe(`/approvals/${held.approval_id}`);

    await page.getByRole('button', { name: 'Cancel action' }).click();
    const dialog = page.getByRole('dialog', { name: 'Cancel this action' });
    const confirm = dialog.getByRole('button', { name: 'Cancel action' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel('Reason (required)').fill('Supplier disputed the invoice');
    await expectAccessible(page, 'the cancel dialog');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'The action is cancelled' }).waitFor();
    expect(await page.getByRole('button', { name: 'Cancel action' }).count()).toBe(0);
    expect((await admin.client.get(api(`/actions/${held.action_id}`))).json().state).toBe('cancelled');
    expect((await admin.client.get(api(`/approvals/${held.approval_id}`))).json().status).toBe('cancelled');
    // The cancellation is in the action's evidence, with the reason given.
    const evidence = page.getByRole('table', { name: 'Evidence records of this action' });
    await evidence.getByText('approval cancelled').waitFor();
    const cancelled = (await admin.client.get(api(`/evidence?action_request_id=${held.action_id}&event_type=approval_cancelled`))).json().items;
    expect(cancelled[0].payload).toMatchObject({ approval_id: held.approval_id, reason: 'Supplier disputed the invoice' });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('says in words that an organisation has no action yet', async () => {
    const admin = await onboardAdmin(t.app);
    expect((await admin.client.get(api('/actions'))).json().items).toEqual([]);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/actions');
    await page.getByText('No action yet: the tool calls agents propose to the gateway show here.').waitFor();
    await expectAccessible(page, 'the empty actions list');
    await page.getByRole('button', { name: 'Decisions', exact: true }).click();
    await page.getByText('No decision yet.').waitFor();
    expect(page.url()).toBe(`${t.url}/actions?view=decisions`);
    // An action of another organisation (or none) is not found, said in words with the correlation ID.
    await page.goto('/actions/00000000-0000-4000-8000-000000000000');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('It does not exist, or it is not in this organisation.');
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'an action that is not found');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('hides the evidence from a person without evidence:read, and says so at /evidence', async () => {
    const { admin, gateway } = await orgWithAgent('Reader agent');
    const done = await gateway.submit(lookup);
    const held = await gateway.submit(payment);
    const viewer = await addMember(t.app, admin.client, ['viewer']);
    const refused = await viewer.client.get(api('/evidence'));
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('forbidden');

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, viewer.email, '/actions');
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.getByRole('link', { name: 'Actions' }).waitFor();
    expect(await nav.getByRole('link', { name: 'Evidence' }).count()).toBe(0);

    await page.getByRole('table', { name: 'Actions, newest first' }).getByRole('row').filter({ hasText: 'crm.lookup_customer' }).getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Action: crm.lookup_customer' }).waitFor();
    expect(page.url()).toBe(`${t.url}/actions/${done.action_id}`);
    expect(await page.getByRole('region', { name: 'Evidence', exact: true }).textContent()).toContain('needs the permission evidence:read');
    expect(await page.getByRole('button', { name: 'Cancel action' }).count()).toBe(0);

    // Without evidence:read the approval of a held action is found among the approvals (approval:read).
    await page.goto(`/actions/${held.action_id}`);
    const approval = page.getByRole('region', { name: 'Approval' }).getByRole('link', { name: 'Open the approval request' });
    expect(await approval.getAttribute('href')).toBe(`/approvals/${held.approval_id}`);

    await page.goto('/evidence');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const text = await alert.textContent();
    expect(text).toContain('You cannot see the evidence chain');
    expect(text).toContain('Your roles do not grant this.');
    expect(text).toContain('evidence:read');
    expect(await page.getByRole('button', { name: 'Verify chain' }).count()).toBe(0);
    await expectAccessible(page, 'the evidence page without permission');
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
