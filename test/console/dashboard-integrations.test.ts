import { randomUUID } from 'node:crypto';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan } from '../support/harness.js';

type Dashboard = {
  days: number;
  agents: { total: number; by_status: Record<string, number> };
  decisions: { total: { allow: number; deny: number; require_approval: number }; per_day: Array<{ day: string; allow: number; deny: number; require_approval: number }> };
  top_deny_reasons: Array<{ reason_code: string; count: number }>;
  pending_approvals: { count: number };
};
type Run = { id: string; status: string; counters: Record<string, number>; error_message: string | null };

/** The value of a label/value pair (a <dt> and its <dd>) within `scope`. */
function fact(scope: Locator | Page, label: string): Locator {
  return scope.getByText(label, { exact: true }).locator('xpath=following-sibling::dd[1]');
}

/** The cells of a table's rows, as text: header cells of the row first, as a person reads them. */
async function tableRows(table: Locator): Promise<string[][]> {
  const rows = await table.locator('tbody tr').all();
  return Promise.all(rows.map(async (r) => (await r.locator('th, td').allTextContents()).map((c) => c.trim())));
}

/**
 * The dashboard and the integrations pages in Chromium, on the real app with its in-process worker: the
 * dashboard's figures and charts against GET /dashboard after real gateway decisions, the empty state of a
 * new organisation, and a mock discovery configured, run and disabled from the console.
 */
describe('console: dashboard and integrations', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    [t, browser] = await Promise.all([
      startConsoleApp({ worker: true, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', JOB_POLL_INTERVAL_SECONDS: '0.5' } }),
      launchBrowser(),
    ]);
    admin = await onboardAdmin(t.app, 'Dashboard Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** An agent with an identity, bound to `tools`, and a gateway token for it. */
  async function agentWithToken(name: string, tools: string[]): Promise<string> {
    const agent = (await admin.client.post(api('/agents'), { name })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const catalogue = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    for (const key of tools) {
      const bound = await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: catalogue.find((x) => x.tool_key === key)!.id, actions: ['invoke'], constraints: {} });
      expect(bound.statusCode, bound.body).toBe(201);
    }
    const token = await t.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret } });
    expect(token.statusCode, token.body).toBe(200);
    return token.json().access_token as string;
  }

  async function submit(bearer: string, body: Record<string, unknown>): Promise<string> {
    const res = await t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${bearer}`, 'idempotency-key': randomUUID() }, payload: body });
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json().decision.decision as string;
  }

  it('shows the figures and charts of GET /dashboard after real decisions, each chart with its data table', async () => {
    const token = await agentWithToken('Claims agent', ['crm.lookup_customer', 'payments.create_payment']);
    const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
    const outcomes = [
      await submit(token, lookup),
      await submit(token, { ...lookup, parameters: { customer_id: '43' } }),
      await submit(token, { ...lookup, parameters: { customer_id: '44' } }),
      await submit(token, { ...lookup, tool: 'crm.export_all' }),
      await submit(token, { tool: 'email.send_message', target: 'mailto://someone@example.com', parameters: {} }),
      await submit(token, { tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 120, currency: 'EUR', payee: 'acme' } }),
    ];
    expect(outcomes).toEqual(['allow', 'allow', 'allow', 'deny', 'deny', 'require_approval']);
    // Telemetry may land after the answer: the page is opened once the API counts every decision.
    await expect.poll(async () => {
      const totals = (await admin.client.get(api('/telemetry/stats?hours=24'))).json().totals.decisions;
      return totals.allow + totals.deny + totals.require_approval;
    }).toBe(6);
    const d = (await admin.client.get(api('/dashboard?days=30'))).json() as Dashboard;
    expect(d.decisions.total).toEqual({ allow: 3, deny: 2, require_approval: 1 });
    expect(d.pending_approvals.count).toBe(1);
    const stats = (await admin.client.get(api('/telemetry/stats?hours=24'))).json();

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/');
    await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
    const figures = page.getByRole('region', { name: 'In figures' });
    await figures.waitFor();
    const leading = async (label: string) => Number((await fact(figures, label).textContent())!.replaceAll(',', ''));
    // A figure's second <dd> says more about it.
    const detail = (label: string) => figures.getByText(label, { exact: true }).locator('xpath=following-sibling::dd[2]');
    expect(await leading('Agents')).toBe(d.agents.total);
    expect(await detail('Agents').textContent()).toContain(`${d.agents.by_status.active} active`);
    expect(await leading('Allowed')).toBe(d.decisions.total.allow);
    expect(await leading('Denied')).toBe(d.decisions.total.deny);
    expect(await leading('Held for approval')).toBe(d.decisions.total.require_approval);
    expect(await leading('Pending approvals')).toBe(d.pending_approvals.count);
    expect(await detail('Pending approvals').getByRole('link', { name: 'Decide them' }).getAttribute('href')).toBe('/approvals');

    // Decisions per day: the picture is named in a sentence, and its table holds every day of the window.
    const perDay = page.getByRole('figure', { name: 'Decisions per day, last 30 days' });
    expect(await perDay.getByRole('img').getAttribute('aria-label')).toContain('3 allowed, 2 denied, 1 held for approval');
    await perDay.getByText('Data table: Decisions per day, last 30 days').click();
    const dayRows = await tableRows(perDay.getByRole('table'));
    expect(dayRows).toEqual(d.decisions.per_day.map((x) => [x.day, String(x.allow), String(x.deny), String(x.require_approval), String(x.allow + x.deny + x.require_approval)]));

    const reasons = page.getByRole('figure', { name: 'Top deny reasons, last 30 days' });
    expect(d.top_deny_reasons.length).toBeGreaterThan(0);
    expect(await reasons.getByRole('img').getAttribute('aria-label')).toContain(d.top_deny_reasons[0]!.reason_code);
    await reasons.getByText('Data table: Top deny reasons, last 30 days').click();
    expect(await tableRows(reasons.getByRole('table'))).toEqual(d.top_deny_reasons.map((r) => [r.reason_code, String(r.count)]));

    // The hourly section, from telemetry, for a person who may read it.
    const lastDay = page.getByRole('region', { name: 'The last 24 hours' });
    expect(await fact(lastDay, 'Gateway decisions').textContent()).toBe('6');
    const hourly = lastDay.getByRole('figure', { name: 'Gateway decisions per hour, last 24 hours' });
    await hourly.getByText('Data table: Gateway decisions per hour, last 24 hours').click();
    const hourRows = await tableRows(hourly.getByRole('table'));
    expect(hourRows).toHaveLength(stats.series.length);
    const column = (i: number) => hourRows.reduce((a, r) => a + Number(r[i]), 0);
    expect([column(1), column(2), column(3)]).toEqual([stats.totals.decisions.allow, stats.totals.decisions.deny, stats.totals.decisions.require_approval]);

    await expectAccessible(page, 'the dashboard with its data tables open');

    // Another window asks the API again for that many days.
    const week = (await admin.client.get(api('/dashboard?days=7'))).json() as Dashboard;
    await page.getByLabel('Window').selectOption('7');
    const perWeek = page.getByRole('figure', { name: 'Decisions per day, last 7 days' });
    await perWeek.getByText('Data table: Decisions per day, last 7 days').click();
    expect(new URL(page.url()).search).toBe('?days=7');
    expect(await tableRows(perWeek.getByRole('table'))).toEqual(week.decisions.per_day.map((x) => [x.day, String(x.allow), String(x.deny), String(x.require_approval), String(x.allow + x.deny + x.require_approval)]));
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows a new organisation what to do first, and a viewer the dashboard without telemetry nor integrations', async () => {
    const fresh = await onboardAdmin(t.app, 'Brand New Org');
    expect((await fresh.client.get(api('/dashboard'))).json().agents.total).toBe(0);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, fresh.email, '/');
    const start = page.getByRole('region', { name: 'No agents yet' });
    await start.waitFor();
    expect(await start.getByRole('link', { name: 'Register an agent' }).getAttribute('href')).toBe('/agents');
    expect(await start.getByRole('link', { name: 'discover agents from an integration' }).getAttribute('href')).toBe('/integrations');
    expect(await page.getByRole('region', { name: 'In figures' }).count()).toBe(0);
    await expectAccessible(page, 'the dashboard of a new organisation');
    expect(problems.errors).toEqual([]);
    await context.close();

    // A viewer reads agents but not telemetry nor integrations: the hourly section is left out, and the
    // integrations page says which permission is missing.
    const viewer = await addMember(t.app, admin.client, ['viewer']);
    const second = await openPage(browser, t.url);
    await signIn(second.page, viewer.email, '/');
    await second.page.getByRole('figure', { name: 'Decisions per day, last 30 days' }).waitFor();
    expect(await second.page.getByRole('region', { name: 'The last 24 hours' }).count()).toBe(0);
    expect(await second.page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Integrations' }).count()).toBe(0);
    await second.page.goto('/integrations');
    const refused = second.page.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('integration:read');
    await expectAccessible(second.page, 'the integrations page refused to a viewer');
    expect(second.problems.errors).toEqual([]);
    await second.context.close();
  });

  describe('integrations', () => {
    let integrationId: string;
    let connectorId: string;

    it('configures a mock MCP integration from the catalogue, runs it, and shows the run finish with its counts', async () => {
      const { page, problems, context } = await openPage(browser, t.url);
      await signIn(page, admin.email, '/integrations');
      await page.getByRole('heading', { name: 'Integrations', level: 1 }).waitFor();
      await page.getByText('No integration yet.', { exact: false }).waitFor();
      const catalogue = page.getByRole('region', { name: 'Catalogue' });
      await catalogue.getByRole('row').filter({ hasText: 'mock.mcp' }).waitFor();
      expect(await catalogue.getByRole('row').filter({ hasText: 'mock.mcp' }).textContent()).toContain('GA');

      await page.getByRole('button', { name: 'Configure an integration' }).click();
      const form = page.getByRole('region', { name: 'Configure an integration' });
      // A live adapter that authenticates names a credential reference: its form has no field for a secret.
      await form.getByLabel('Adapter').selectOption('directory');
      await form.getByLabel('directory_tenant_id').waitFor();
      await form.getByLabel('Credential reference').waitFor();
      expect(await form.locator('input[type=password]').count()).toBe(0);
      await expectAccessible(page, 'the integration form for a live adapter');

      await form.getByLabel('Adapter').selectOption('mock.mcp');
      await form.getByText('This adapter has no settings.').waitFor();
      expect(await form.getByLabel('directory_tenant_id').count()).toBe(0);
      await form.getByLabel('Name').fill('Mock MCP estate');
      await form.getByRole('button', { name: 'Save integration' }).click();
      await page.getByRole('heading', { name: 'Integration: Mock MCP estate' }).waitFor();
      await page.getByRole('status').filter({ hasText: 'The integration is configured.' }).waitFor();

      const listed = (await admin.client.get(api('/integrations'))).json().items as Array<{ id: string; name: string; kind: string; mode: string; status: string; connector: { id: string; adapter_key: string } }>;
      const created = listed.find((i) => i.name === 'Mock MCP estate')!;
      expect(created).toMatchObject({ kind: 'mcp', mode: 'mock', status: 'active', connector: { adapter_key: 'mock.mcp' } });
      integrationId = created.id;
      connectorId = created.connector.id;
      expect(page.url()).toBe(`${t.url}/integrations/${integrationId}`);
      await page.getByText('The connector has not run yet.').waitFor();

      await page.getByRole('button', { name: 'Run now' }).click();
      const latest = page.getByRole('region', { name: 'Latest run' });
      // The page asks again while the run is running, and shows it finish without a reload.
      await expect.poll(() => fact(latest, 'Status').textContent(), { timeout: 30_000 }).toBe('succeeded');
      const runs = (await admin.client.get(api(`/connectors/${connectorId}/runs`))).json().items as Run[];
      expect(runs).toHaveLength(1);
      const run = runs[0]!;
      expect(run.status, run.error_message ?? '').toBe('succeeded');
      expect(run.counters.mcp_servers_added).toBeGreaterThan(0);
      const labels: Record<string, string> = {
        agents_added: 'Agents added',
        models_added: 'Models added',
        mcp_servers_added: 'MCP servers added',
        tools_added: 'Tools added',
        resources_added: 'Resources added',
        identities_added: 'Identities added',
        tools_changed: 'Tools changed',
        findings_opened: 'Findings opened',
      };
      for (const [key, label] of Object.entries(labels)) expect(await fact(latest, label).textContent(), label).toBe(String(run.counters[key]));
      const row = page.getByRole('region', { name: 'Runs' }).getByRole('row').filter({ hasText: 'succeeded' });
      expect(await row.textContent()).toContain(`mcp servers added: ${run.counters.mcp_servers_added}`);
      expect(await page.getByRole('button', { name: 'Run now' }).isEnabled()).toBe(true);
      await expectAccessible(page, 'an integration with its finished run');

      // The list shows the integration with its latest run.
      await page.getByRole('link', { name: 'Integrations', exact: true }).first().click();
      const item = page.getByRole('region', { name: 'Configured integrations' }).getByRole('row').filter({ hasText: 'Mock MCP estate' });
      await item.waitFor();
      expect(await item.textContent()).toContain('succeeded');
      await expectAccessible(page, 'the integrations list');
      expect(problems.errors).toEqual([]);
      await context.close();
    });

    it('switches the connector off and on, then disables the integration, each with a reason behind a confirmation; the API holds the outcome, with the reason audited', async () => {
      expect(integrationId).toBeDefined();
      const { page, problems, context } = await openPage(browser, t.url);
      await signIn(page, admin.email, `/integrations/${integrationId}`);
      await page.getByRole('heading', { name: 'Integration: Mock MCP estate' }).waitFor();

      // The connector first: switched off with a reason, then on again.
      await page.getByRole('button', { name: 'Disable connector' }).click();
      const off = page.getByRole('dialog', { name: 'Disable this connector' });
      await off.getByLabel('Reason (required)').fill('Source under maintenance');
      await off.getByRole('button', { name: 'Disable' }).click();
      await page.getByRole('status').filter({ hasText: 'The connector is disabled.' }).waitFor();
      expect(await page.getByRole('button', { name: 'Run now' }).isDisabled()).toBe(true);
      const connector = async () => (await admin.client.get(api('/integrations'))).json().items.find((i: { id: string }) => i.id === integrationId).connector;
      expect((await connector()).enabled).toBe(false);
      await page.getByRole('button', { name: 'Enable connector' }).click();
      const on = page.getByRole('dialog', { name: 'Enable this connector' });
      await on.getByLabel('Reason (required)').fill('Maintenance over');
      await on.getByRole('button', { name: 'Enable' }).click();
      await page.getByRole('status').filter({ hasText: 'The connector is enabled.' }).waitFor();
      expect((await connector()).enabled).toBe(true);
      expect(await page.getByRole('button', { name: 'Run now' }).isEnabled()).toBe(true);

      await page.getByRole('button', { name: 'Disable integration' }).click();
      const dialog = page.getByRole('dialog', { name: 'Disable this integration' });
      const confirm = dialog.getByRole('button', { name: 'Disable' });
      expect(await confirm.isDisabled()).toBe(true);
      await dialog.getByLabel('Reason (required)').fill('Vendor contract ended');
      await expectAccessible(page, 'the disable dialog');
      await confirm.click();
      await page.getByRole('status').filter({ hasText: 'The integration is disabled.' }).waitFor();
      expect(await page.getByRole('button', { name: 'Run now' }).isDisabled()).toBe(true);
      expect(await page.getByText('The integration is disabled: activate it to run its connector.').count()).toBe(1);
      await page.getByRole('button', { name: 'Activate integration' }).waitFor();
      await expectAccessible(page, 'a disabled integration');

      const after = (await admin.client.get(api('/integrations'))).json().items.find((i: { id: string }) => i.id === integrationId);
      expect(after.status).toBe('disabled');
      const audit = (await admin.client.get(api(`/audit?target_id=${integrationId}&limit=200`))).json().items as Array<{ action: string; details: unknown }>;
      const changed = audit.find((e) => e.action === 'integration.status_changed');
      expect(JSON.stringify(changed?.details)).toContain('Vendor contract ended');
      // A disabled integration does not run, whoever asks.
      expect((await admin.client.post(api(`/connectors/${connectorId}/run`), {})).statusCode).toBe(409);
      expect(problems.errors).toEqual([]);
      await context.close();
    });
  });
});
