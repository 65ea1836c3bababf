import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { openFinding } from '../../api/modules/findings/index.js';
import { MOCK_MCP_SERVERS, POISONED_TOOL_KEY } from '../../api/modules/integrations/adapters/mock/mcp.data.js';
import { GatewayClient } from '../../client/index.js';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan, type Client } from '../support/harness.js';

/** As long as the browser context's own waits: the page may take a moment on a busy machine. */
const PAGE_WAIT = { timeout: 10_000 };

type Finding = { id: string; title: string; category: string; severity: string; status: string; tool_id: string | null; mcp_server_id: string | null; note: string | null; assigned_to: string | null; version: number };
type Tool = { id: string; tool_key: string; blocked: boolean; privilege_class: string; approval_class: string; privilege_source: string; mcp_server_id: string | null };
type Server = { id: string; name: string; trust_state: string };

/**
 * The inventory and findings pages in Chromium, on the real app with its in-process worker: a mock MCP
 * discovery run (started through the API, as a person would from the integrations page) lands servers,
 * tools and findings; security staff change a server's trust state, block and reclassify tools, act on
 * credential references and triage a finding in the console; the API shows each change, and a blocked
 * tool's call by an agent is denied.
 */
describe('console: inventory and findings', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let auditor: Awaited<ReturnType<typeof addMember>>;
  let developer: Awaited<ReturnType<typeof addMember>>;
  let gateway: GatewayClient;
  let credentialId: string;

  const get = async <T>(client: Client, path: string): Promise<T> => {
    const res = await client.get(api(path));
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as T;
  };
  const tools = async () => (await get<{ items: Tool[] }>(admin.client, '/tools')).items;
  const findings = async (query = '') => (await get<{ items: Finding[] }>(admin.client, `/findings?limit=200${query}`)).items;

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ worker: true, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', JOB_POLL_INTERVAL_SECONDS: '0.5' } }), launchBrowser()]);
    admin = await onboardAdmin(t.app, 'Inventory Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    [auditor, developer] = [await addMember(t.app, admin.client, ['auditor']), await addMember(t.app, admin.client, ['agent_developer'])];

    // Discovery lands the MCP servers, their tools and the findings about them.
    const integration = (await admin.client.post(api('/integrations'), { kind: 'mcp', name: 'Mock MCP estate' })).json();
    const run = await admin.client.post(api(`/connectors/${integration.connector.id}/run`), {});
    expect(run.statusCode, run.body).toBe(200);
    const runs = `/connectors/${integration.connector.id}/runs`;
    const deadline = Date.now() + 30_000;
    let landed: { status: string; error_message: string | null } | undefined;
    // Hooks cannot use expect.poll: read the run until the worker has finished it.
    while (Date.now() < deadline) {
      landed = (await get<{ items: Array<{ id: string; status: string; error_message: string | null }> }>(admin.client, runs)).items.find((r) => r.id === run.json().id);
      if (landed && landed.status !== 'running') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(landed?.status, landed?.error_message ?? 'run still running').toBe('succeeded');

    const credential = await admin.client.post(api('/resources/credentials'), { name: 'CRM API key', provider: 'vault', secret_path: 'kv/crm#api_key', credential_type: 'api_key', rotation_interval_days: 90 });
    expect(credential.statusCode, credential.body).toBe(201);
    credentialId = credential.json().id;
    const model = await admin.client.post(api('/models'), { provider: 'vendor-a', model_name: 'reasoner-large', model_version: '2026-09', hosting: 'saas', data_policy: 'zero_retention' });
    expect(model.statusCode, model.body).toBe(201);

    // An agent allowed to look customers up, to show that blocking the tool stops its calls.
    const agent = (await admin.client.post(api('/agents'), { name: 'Support agent' })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const lookup = (await tools()).find((x) => x.tool_key === 'crm.lookup_customer')!;
    const bound = await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
    expect(bound.statusCode, bound.body).toBe(201);
    gateway = new GatewayClient({ baseUrl: t.url, credentials: { clientId: identity.client_id, clientSecret: identity.client_secret } });
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  const row = (page: Page, text: string) => page.getByRole('row').filter({ hasText: text });
  const tab = (page: Page, name: string) => page.getByRole('navigation', { name: 'Inventory' }).getByRole('link', { name, exact: true });

  it('changes an MCP server’s trust state with a reason: refused in words when the reason is too short, then shown in the list and by the API', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/inventory');
    await page.waitForURL(`${t.url}/inventory/mcp-servers`);
    const payments = row(page, 'Payments Gateway');
    await payments.waitFor();
    expect(await payments.textContent()).toContain('unknown');
    expect(await page.getByRole('row').count()).toBe(MOCK_MCP_SERVERS.length + 1);
    await expectAccessible(page, 'the MCP servers tab');

    await payments.getByRole('button', { name: 'Change trust state' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change the trust state of Payments Gateway' });
    await dialog.getByLabel('New trust state').selectOption('quarantined');
    const confirm = dialog.getByRole('button', { name: 'Change trust state' });
    expect(await confirm.isDisabled()).toBe(true);
    // The API wants five characters at least: its refusal names the field, in the dialog.
    await dialog.getByLabel('Reason (required)').fill('odd');
    await confirm.click();
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('Some fields are not valid');
    expect(await alert.textContent()).toContain('reason');
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'the trust state dialog with an error');

    await dialog.getByLabel('Reason (required)').fill('Publisher signature does not match the registry');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'Payments Gateway is now quarantined.' }).waitFor();
    await expect.poll(() => payments.textContent(), PAGE_WAIT).toContain('quarantined');

    const servers = (await get<{ items: Server[] }>(admin.client, '/mcp-servers')).items;
    const server = servers.find((s) => s.name === 'Payments Gateway')!;
    expect(server.trust_state).toBe('quarantined');
    const audit = (await get<{ items: Array<{ details: Record<string, unknown> }> }>(admin.client, `/audit?action=mcp_server.trust_changed&target_id=${server.id}`)).items;
    expect(audit).toHaveLength(1);
    expect(audit[0]!.details).toMatchObject({ reason: 'Publisher signature does not match the registry', trust_state: { from: 'unknown', to: 'quarantined' } });

    // The trust state filter keeps only the quarantined server.
    await page.getByRole('combobox', { name: 'Trust state', exact: true }).selectOption('quarantined');
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(2);
    expect(page.url()).toContain('trust_state=quarantined');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('blocks a tool with a reason (the agent’s next call is denied TOOL_BLOCKED), reclassifies another, and filters tools by server', async () => {
    const before = await gateway.submit({ tool: 'crm.lookup_customer', target: 'crm://customers/c-1', parameters: { customer_id: 'c-1' } });
    expect(before.decision).toBe('allow');

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/inventory/tools');
    await page.getByLabel('Search key or name').fill('crm.lookup');
    const lookup = row(page, 'crm.lookup_customer');
    await lookup.waitFor();
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(2);
    await expectAccessible(page, 'the tools tab');

    await lookup.getByRole('button', { name: 'Block' }).click();
    const dialog = page.getByRole('dialog', { name: 'Block crm.lookup_customer' });
    await dialog.getByLabel('Reason (required)').fill('Customer data export under investigation');
    await expectAccessible(page, 'the block dialog');
    await dialog.getByRole('button', { name: 'Block tool' }).click();
    await page.getByRole('status').filter({ hasText: 'crm.lookup_customer is blocked for every agent.' }).waitFor();
    await expect.poll(() => lookup.textContent(), PAGE_WAIT).toContain('blocked');
    await lookup.getByRole('button', { name: 'Unblock' }).waitFor();

    expect((await tools()).find((x) => x.tool_key === 'crm.lookup_customer')!.blocked).toBe(true);
    const after = await gateway.submit({ tool: 'crm.lookup_customer', target: 'crm://customers/c-1', parameters: { customer_id: 'c-1' } });
    expect(after.decision).toBe('deny');
    expect(after.reason_codes).toContain('TOOL_BLOCKED');
    expect(after.executed).toBe(false);

    // Reclassify the poisoned tool: staff's class, kept by later discovery runs.
    await page.getByLabel('Search key or name').fill(POISONED_TOOL_KEY);
    const poisoned = row(page, POISONED_TOOL_KEY);
    await poisoned.getByRole('button', { name: 'Reclassify' }).click();
    const reclassify = page.getByRole('dialog', { name: `Reclassify ${POISONED_TOOL_KEY}` });
    await reclassify.getByLabel('Privilege class').selectOption('admin');
    await reclassify.getByLabel('Approval class').selectOption('dual');
    await expectAccessible(page, 'the reclassify dialog');
    await reclassify.getByRole('button', { name: 'Save classification' }).click();
    await page.getByRole('status').filter({ hasText: `${POISONED_TOOL_KEY} is now admin, approval dual.` }).waitFor();
    expect((await tools()).find((x) => x.tool_key === POISONED_TOOL_KEY)).toMatchObject({ privilege_class: 'admin', approval_class: 'dual', privilege_source: 'staff' });

    // The server filter is the API's: the rows are the tools the API lists for that server.
    await page.getByLabel('Search key or name').fill('');
    await page.getByRole('combobox', { name: 'MCP server' }).selectOption({ label: 'File Vault' });
    const vault = (await get<{ items: Server[] }>(admin.client, '/mcp-servers')).items.find((s) => s.name === 'File Vault')!;
    const vaultTools = (await get<{ items: Tool[] }>(admin.client, `/tools?mcp_server_id=${vault.id}`)).items;
    expect(vaultTools.length).toBe(MOCK_MCP_SERVERS.find((s) => s.name === 'File Vault')!.tools.length);
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(vaultTools.length + 1);
    for (const tool of vaultTools) await row(page, tool.tool_key).waitFor();
    expect(page.url()).toContain(`mcp_server_id=${vault.id}`);
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('records a credential’s rotation and revokes it (the list shows its store and path), and lists resources and models', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/inventory/credentials');
    const crm = row(page, 'CRM API key');
    await crm.waitFor();
    expect(await crm.textContent()).toContain('kv/crm#api_key');
    expect(await crm.textContent()).toContain('vault');
    await expectAccessible(page, 'the credentials tab');

    await crm.getByRole('button', { name: 'Record rotation' }).click();
    const rotate = page.getByRole('dialog', { name: 'Record the rotation of CRM API key' });
    await rotate.getByLabel('Reason (required)').fill('Quarterly rotation done in Vault');
    await rotate.getByRole('button', { name: 'Record rotation' }).click();
    await page.getByRole('status').filter({ hasText: 'The rotation of CRM API key is recorded.' }).waitFor();
    const rotated = (await get<{ items: Array<{ id: string; status: string; last_rotated_at: string | null }> }>(admin.client, '/resources/credentials')).items.find((c) => c.id === credentialId)!;
    expect(rotated.last_rotated_at).not.toBeNull();
    await expect.poll(() => crm.locator('time').count(), PAGE_WAIT).toBe(1);

    await crm.getByRole('button', { name: 'Revoke' }).click();
    const revoke = page.getByRole('dialog', { name: 'Revoke CRM API key' });
    await revoke.getByLabel('Reason (required)').fill('Key leaked in a support ticket');
    await expectAccessible(page, 'the revoke dialog');
    await revoke.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('status').filter({ hasText: 'CRM API key is revoked.' }).waitFor();
    await expect.poll(() => crm.textContent(), PAGE_WAIT).toContain('revoked');
    expect(await crm.getByRole('button').count()).toBe(0);
    const revoked = (await get<{ items: Array<{ id: string; status: string }> }>(admin.client, '/resources/credentials')).items.find((c) => c.id === credentialId)!;
    expect(revoked.status).toBe('revoked');

    // Resources (discovery's) with their classification, and the model registered above.
    await tab(page, 'Resources').click();
    await page.waitForURL(`${t.url}/inventory/resources`);
    const resources = (await get<{ items: Array<{ name: string; classification: string | null }> }>(admin.client, '/resources')).items;
    expect(resources.length).toBeGreaterThan(0);
    for (const r of resources) {
      const line = row(page, r.name).first();
      await line.waitFor();
      if (r.classification) expect(await line.textContent()).toContain(r.classification);
    }
    await expectAccessible(page, 'the resources tab');
    await tab(page, 'Models').click();
    const reasoner = row(page, 'reasoner-large');
    await reasoner.waitFor();
    for (const shown of ['vendor-a', '2026-09', 'saas', 'zero retention', 'not approved']) expect(await reasoner.textContent()).toContain(shown);
    await expectAccessible(page, 'the models tab');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('lists findings with the API’s filters and triages one (status, assignee, note) with If-Match; a stale version is refused in words', async () => {
    const poisonedTool = (await tools()).find((x) => x.tool_key === POISONED_TOOL_KEY)!;
    const all = await findings();
    const finding = all.find((f) => f.category === 'tool_poisoning' && f.tool_id === poisonedTool.id)!;
    expect(finding).toBeDefined();

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/findings');
    await page.getByRole('link', { name: finding.title }).waitFor();
    expect(await page.getByRole('row').count()).toBe(all.length + 1);
    await expectAccessible(page, 'the findings list');

    // Severity and text filters go to the API; the rows are what it answers for the same query.
    await page.getByLabel('Severity').selectOption(finding.severity);
    const sameSeverity = await findings(`&severity=${finding.severity}`);
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(sameSeverity.length + 1);
    await page.getByLabel('Category').fill('tool_poisoning');
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    const filtered = await findings(`&severity=${finding.severity}&category=tool_poisoning`);
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(filtered.length + 1);
    expect(page.url()).toContain('category=tool_poisoning');

    await page.getByRole('link', { name: finding.title }).click();
    await page.getByRole('heading', { name: finding.title }).waitFor();
    const about = page.getByRole('region', { name: 'What it is about' });
    await about.getByRole('link', { name: POISONED_TOOL_KEY }).waitFor();
    // The evidence is the detector's own record, shown whole.
    const evidence = (await get<{ evidence: Record<string, unknown> }>(admin.client, `/findings/${finding.id}`)).evidence;
    expect(Object.keys(evidence).length).toBeGreaterThan(0);
    expect(JSON.parse((await page.getByRole('region', { name: 'Evidence' }).getByLabel('Evidence').textContent())!)).toEqual(evidence);
    await expectAccessible(page, 'a finding');

    const triage = page.getByRole('region', { name: 'Triage' });
    await triage.getByLabel('Status').selectOption('in_progress');
    await triage.getByLabel('Assigned to').fill('secops@example.com');
    await triage.getByLabel('Note').fill('Asked the server owner to remove the hidden instruction.');
    await triage.getByRole('button', { name: 'Save triage' }).click();
    await triage.getByRole('status').filter({ hasText: 'Saved: the finding is in progress.' }).waitFor();
    const saved = await get<Finding>(admin.client, `/findings/${finding.id}`);
    expect(saved).toMatchObject({ status: 'in_progress', assigned_to: 'secops@example.com', note: 'Asked the server owner to remove the hidden instruction.', version: finding.version + 1 });
    await page.getByRole('region', { name: 'History' }).getByText('finding.updated').waitFor();

    // Someone else changes it meanwhile: the console's save carries the version it showed, and is refused.
    const behind = await admin.client.patch(api(`/findings/${finding.id}`), { note: 'Owner answered: fix in the next release.' });
    expect(behind.statusCode, behind.body).toBe(200);
    await triage.getByLabel('Status').selectOption('resolved');
    await triage.getByRole('button', { name: 'Save triage' }).click();
    const alert = triage.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('Someone changed this since you opened it');
    expect(await triage.getByText('Saved:').count()).toBe(0);
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'a refused triage');
    expect((await get<Finding>(admin.client, `/findings/${finding.id}`)).status).toBe('in_progress');

    await triage.getByRole('button', { name: 'Load the latest version' }).click();
    await expect.poll(() => triage.getByLabel('Note').inputValue(), PAGE_WAIT).toBe('Owner answered: fix in the next release.');
    await triage.getByLabel('Status').selectOption('resolved');
    await triage.getByRole('button', { name: 'Save triage' }).click();
    await triage.getByRole('status').filter({ hasText: 'Saved: the finding is resolved.' }).waitFor();
    expect(await get<Finding>(admin.client, `/findings/${finding.id}`)).toMatchObject({ status: 'resolved', note: 'Owner answered: fix in the next release.', version: finding.version + 3 });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows a person with read-only roles no change buttons (and a missing finding in words); an agent developer may reclassify but not block', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, auditor.email, '/inventory/mcp-servers');
    await row(page, 'File Vault').waitFor();
    expect(await page.getByRole('button', { name: 'Change trust state' }).count()).toBe(0);
    expect(await page.getByRole('columnheader', { name: 'Actions' }).count()).toBe(0);
    await tab(page, 'Tools').click();
    await row(page, 'payments.create_payment').waitFor();
    expect(await page.getByRole('main').getByRole('button').count()).toBe(0);
    await tab(page, 'Credentials').click();
    await row(page, 'CRM API key').waitFor();
    expect(await page.getByRole('main').getByRole('button').count()).toBe(0);
    await expectAccessible(page, 'the credentials tab, read only');

    const finding = (await findings())[0]!;
    await page.goto(`/findings/${finding.id}`);
    await page.getByRole('heading', { name: finding.title }).waitFor();
    await page.getByRole('region', { name: 'History' }).waitFor();
    expect(await page.getByRole('region', { name: 'Triage' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Save triage' }).count()).toBe(0);
    await expectAccessible(page, 'a finding, read only');

    // A finding that is not there (or another organisation's) is said in words, with the correlation ID.
    await page.goto('/findings/00000000-0000-4000-8000-000000000000');
    const missing = page.getByRole('alert');
    await missing.waitFor();
    expect(await missing.textContent()).toContain('It does not exist, or it is not in this organisation.');
    expect(await missing.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    expect(problems.errors).toEqual([]);
    await context.close();

    const dev = await openPage(browser, t.url);
    await signIn(dev.page, developer.email, '/inventory/tools');
    const payment = row(dev.page, 'payments.create_payment');
    await payment.getByRole('button', { name: 'Reclassify' }).waitFor();
    expect(await payment.getByRole('button', { name: /Block/ }).count()).toBe(0);
    expect(dev.problems.errors).toEqual([]);
    await dev.context.close();
  });

  it('shows empty states for an organisation with nothing discovered, then pages its findings fifty at a time', async () => {
    const fresh = await onboardAdmin(t.app, 'Empty Org');
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, fresh.email, '/inventory/mcp-servers');
    await page.getByText('No MCP server is registered.').waitFor();
    await expectAccessible(page, 'the empty MCP servers tab');
    await tab(page, 'Credentials').click();
    await page.getByText('No credential reference is registered.').waitFor();
    await tab(page, 'Models').click();
    await page.getByText('No model is registered.').waitFor();
    await tab(page, 'Resources').click();
    await page.getByText('No API or data resource is registered.').waitFor();
    // Every organisation has the sample tools; an API filter that keeps none shows its own empty state.
    await tab(page, 'Tools').click();
    await row(page, 'crm.lookup_customer').waitFor();
    await page.getByRole('combobox', { name: 'Privilege class' }).selectOption('admin');
    await page.getByText('No tool matches these filters.').waitFor();
    await expectAccessible(page, 'the tools tab, filtered to nothing');

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Findings' }).click();
    await page.getByText('No findings. Discovery runs open them').waitFor();
    await expectAccessible(page, 'the empty findings list');
    await page.getByLabel('Status').selectOption('resolved');
    await page.getByText('No finding matches these filters.').waitFor();

    // Paging: a detector (here the test, as discovery's reconciliation would) opens 55; the list shows 50 and loads the rest.
    // Each opened at its own time (a run's clock, in milliseconds), as reconciliation passes it.
    const start = Date.now() - 60_000;
    await inScope(t.database.db, { orgId: fresh.tenant.id }, async (tx) => {
      for (let i = 1; i <= 55; i++) {
        await openFinding(tx, fresh.tenant.id, { category: 'owner_attestation', severity: 'low', title: `Unattested agent ${i}`, description: 'No owner attested it.', evidence: { agent: i }, dedupe_key: `attest:${i}`, now: new Date(start + i * 1000) });
      }
    });
    // A fresh load: the list the page read before the findings existed is cached for ten seconds.
    await page.goto('/findings?status=resolved');
    await page.getByText('No finding matches these filters.').waitFor();
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(51);
    expect(page.url()).toBe(`${t.url}/findings`);
    await page.getByRole('button', { name: 'Load more' }).click();
    await expect.poll(() => page.getByRole('row').count(), PAGE_WAIT).toBe(56);
    expect(await page.getByRole('button', { name: 'Load more' }).count()).toBe(0);
    // Newest first across both pages.
    expect(await page.getByRole('row').nth(1).textContent()).toContain('Unattested agent 55');
    expect(await page.getByRole('row').nth(55).textContent()).toContain('Unattested agent 1');
    expect(problems.errors).toEqual([]);
    await context.close();
  });
});
