import { readFile } from 'node:fs/promises';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan } from '../support/harness.js';

/**
 * The governance and reports pages in Chromium, on the real app with its in-process worker: a report asked
 * for on the page is built by the worker, turns ready on the page by itself and downloads through the page;
 * readiness shows the API's figures; an exception is refused to its requester in words and approved by a
 * colleague; an agent is classified in the register and a task it opened is moved; an empty organisation shows
 * its empty states.
 */

interface Coverage {
  key: string;
  name: string;
  version: string;
  controls_total: number;
  controls_met: number;
  controls_excepted: number;
  controls_not_met: number;
  coverage_percent: number;
  readiness: string;
  controls: Array<{ id: string; ref: string; title: string; status: string; why: string }>;
}

interface ReportRecord {
  id: string;
  kind: string;
  parameters: Record<string, unknown>;
  format: string;
  status: string;
  content_type: string | null;
  file_name: string | null;
  size: number | null;
}

/** The cells of a table row, as their text. */
const cells = async (row: Locator) => (await row.getByRole('cell').allTextContents()).map((s) => s.trim());

/** A ceiling for a busy machine (a browser, the worker building PDFs, other suites), not a speed check. */
const SLOW = 120_000;

describe('console: governance and reports', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let alice: Awaited<ReturnType<typeof addMember>>;
  let bob: Awaited<ReturnType<typeof addMember>>;
  let auditor: Awaited<ReturnType<typeof addMember>>;
  let agentId: string;

  beforeAll(async () => {
    [t, browser] = await Promise.all([
      startConsoleApp({ worker: true, env: { JOB_POLL_INTERVAL_SECONDS: '0.5', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }),
      launchBrowser(),
    ]);
    admin = await onboardAdmin(t.app, 'Governed Ltd');
    await setPlan(t, admin.tenant.id, 'enterprise');
    alice = await addMember(t.app, admin.client, ['security_admin']);
    bob = await addMember(t.app, admin.client, ['security_admin']);
    auditor = await addMember(t.app, admin.client, ['auditor']);
    // Something for readiness to count: one decision from the console meets record-keeping (eu-ai-act:Art.12).
    agentId = (await admin.client.post(api('/agents'), { name: 'Refund agent', purpose: 'Refunds small orders' })).json().id;
    const tools = (await admin.client.get(api('/tools?limit=200'))).json().items as Array<{ id: string; tool_key: string }>;
    const lookup = tools.find((x) => x.tool_key === 'crm.lookup_customer')!;
    const bound = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
    expect(bound.statusCode, bound.body).toBe(201);
    const decided = await admin.client.post(
      api('/actions/console'),
      { agent_id: agentId, tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } },
      { 'idempotency-key': 'console-governance-1' },
    );
    expect(decided.statusCode, decided.body).toBe(200);
  }, SLOW);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  const reportsTable = (page: Page) => page.getByRole('table', { name: 'Reports, newest first' });

  async function records(): Promise<ReportRecord[]> {
    return (await admin.client.get(api('/reports?limit=200'))).json().items;
  }

  it('creates a report from the page, shows it ready without a reload, and downloads the file the API lists', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, auditor.email, '/reports');
    await page.getByRole('heading', { name: 'Reports', level: 1 }).waitFor();
    // The kinds, with what each holds and its formats.
    const inventoryKind = page.getByRole('article', { name: 'Agent inventory' });
    expect(await inventoryKind.textContent()).toContain('CSV');
    await inventoryKind.getByText('What it holds').click();
    expect(await inventoryKind.textContent()).toContain('include_revoked');
    await page.getByText('No report yet').waitFor();
    await expectAccessible(page, 'the reports page, empty');

    // An agent inventory as CSV: the form is the kind's parameters.
    await page.getByLabel('Kind', { exact: true }).selectOption({ label: 'Agent inventory' });
    await page.getByLabel('Format', { exact: true }).selectOption('csv');
    await page.getByLabel('Environment', { exact: true }).selectOption('development');
    expect(await page.getByLabel('Include revoked').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Create report' }).click();
    await page.getByRole('status').filter({ hasText: 'Agent inventory is queued' }).waitFor();
    const csvRow = reportsTable(page).getByRole('row').filter({ hasText: 'Agent inventory' });
    // The list asks again while the report is built: the link shows without a reload.
    const csvLink = csvRow.getByRole('link', { name: /^Download/ });
    await csvLink.waitFor({ timeout: 30_000 });
    await expectAccessible(page, 'the reports page with a ready report');

    const [csvDownload] = await Promise.all([page.waitForEvent('download'), csvLink.click()]);
    const csvFile = await readFile((await csvDownload.path())!);
    const csvRecord = (await records()).find((r) => r.kind === 'agent_inventory')!;
    expect(csvRecord).toMatchObject({ status: 'ready', format: 'csv', content_type: 'text/csv; charset=utf-8', parameters: { format: 'csv', environment: 'development', include_revoked: true } });
    expect(csvDownload.suggestedFilename()).toBe(csvRecord.file_name);
    expect(csvFile.length).toBe(csvRecord.size);
    expect(await csvRow.textContent()).toContain(csvRecord.file_name!);
    // UTF-8 with a byte-order mark, CRLF records: a header row, and the one development agent.
    const text = csvFile.toString('utf8');
    expect(text.startsWith('\uFEFF')).toBe(true);
    const lines = text.slice(1).split('\r\n').filter(Boolean);
    const header = lines[0]!.split(',');
    expect(header).toContain('agent_id');
    const agentRows = lines.slice(1).filter((l) => l.includes(agentId));
    expect(agentRows).toHaveLength(1);
    expect(agentRows[0]).toContain('Refund agent');

    // A readiness report of one framework as PDF: an enum without a default and a number, sent as chosen.
    await page.getByLabel('Kind', { exact: true }).selectOption({ label: 'Governance readiness' });
    await page.getByLabel('Framework', { exact: true }).selectOption('eu-ai-act');
    await page.getByLabel('Days', { exact: true }).fill('30');
    await page.getByRole('button', { name: 'Create report' }).click();
    const pdfRow = reportsTable(page).getByRole('row').filter({ hasText: 'Governance readiness' });
    const pdfLink = pdfRow.getByRole('link', { name: /^Download/ });
    await pdfLink.waitFor({ timeout: 30_000 });
    const [pdfDownload] = await Promise.all([page.waitForEvent('download'), pdfLink.click()]);
    const pdfFile = await readFile((await pdfDownload.path())!);
    const pdfRecord = (await records()).find((r) => r.kind === 'governance_readiness')!;
    expect(pdfRecord).toMatchObject({ status: 'ready', format: 'pdf', content_type: 'application/pdf', parameters: { format: 'pdf', framework: 'eu-ai-act', days: 30 } });
    expect(pdfDownload.suggestedFilename()).toBe(pdfRecord.file_name);
    expect(pdfFile.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(pdfFile.length).toBe(pdfRecord.size);

    // A window that ends before it starts: the API refuses it, and the page says so in words, naming the field.
    await page.getByLabel('Kind', { exact: true }).selectOption({ label: 'Evidence bundle' });
    await page.getByLabel('Since', { exact: true }).fill('2026-11-10T00:00');
    await page.getByLabel('Until', { exact: true }).fill('2026-11-01T00:00');
    await page.getByRole('button', { name: 'Create report' }).click();
    const refused = page.getByRole('alert').filter({ hasText: 'The report was not created' });
    await refused.waitFor();
    expect(await refused.textContent()).toContain('Some fields are not valid.');
    expect(await refused.textContent()).toContain('parameters.until');
    expect(await refused.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(page, 'a refused report');
    expect((await records()).length).toBe(2);
    expect(problems.errors).toEqual([]);
    await context.close();
  }, SLOW);

  it('shows each framework with the coverage and readiness of GET /governance/frameworks, and maps an event type to a control', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/governance');
    const table = page.getByRole('table', { name: 'Coverage and readiness of each framework' });
    await table.waitFor();
    for (const days of [90, 30]) {
      if (days !== 90) {
        await page.getByLabel('Evidence window').selectOption(String(days));
        await page.waitForURL((u) => u.pathname === '/governance' && u.searchParams.get('days') === String(days));
      }
      const expected = (await admin.client.get(api(`/governance/frameworks?days=${days}`))).json().items as Coverage[];
      expect(expected.map((f) => f.key).sort()).toEqual(['eu-ai-act', 'iso-42001', 'nist-ai-rmf']);
      await expect.poll(async () => (await table.getByRole('row').count()) - 1).toBe(expected.length);
      for (const f of expected) {
        const row = table.getByRole('row').filter({ has: page.getByRole('link', { name: f.name, exact: true }) });
        await expect
          .poll(() => cells(row))
          .toEqual([f.name, f.version, `${f.coverage_percent}%`, f.readiness.replaceAll('_', ' '), `${f.controls_met}`, `${f.controls_excepted}`, `${f.controls_not_met}`, `${f.controls_total}`]);
        // Each control with its status and why, as the API says.
        const controls = page.getByRole('table', { name: `Controls of ${f.name}` });
        expect(await controls.getByRole('row').count()).toBe(f.controls.length + 1);
        for (const c of f.controls.filter((x) => x.status === 'met')) {
          const crow = controls.getByRole('row').filter({ has: page.getByRole('link', { name: c.ref, exact: true }) });
          expect(await cells(crow)).toEqual([c.ref, c.title, 'met', c.why]);
        }
      }
      // The console decision above meets record-keeping: there is something met to show.
      expect(expected.find((f) => f.key === 'eu-ai-act')!.controls.find((c) => c.ref === 'Art.12')!.status).toBe('met');
    }
    await expectAccessible(page, 'governance readiness');

    // One control, with its mappings; a mapping of the organisation's own added from the page.
    const frameworks = (await admin.client.get(api('/governance/frameworks'))).json().items as Coverage[];
    const nist = frameworks.find((f) => f.key === 'nist-ai-rmf')!;
    const govern3 = nist.controls.find((c) => c.ref === 'GOVERN-3')!;
    await page.getByRole('table', { name: `Controls of ${nist.name}` }).getByRole('link', { name: 'GOVERN-3', exact: true }).click();
    await page.getByRole('heading', { name: `nist-ai-rmf:GOVERN-3: ${govern3.title}` }).waitFor();
    const before = (await admin.client.get(api(`/controls/${govern3.id}`))).json();
    expect(before.status).toBe('not_met');
    await page.getByRole('region', { name: 'Status' }).getByText('not met', { exact: true }).waitFor();
    const mappings = page.getByRole('region', { name: 'Evidence mapped to it' });
    // The catalogue cannot evidence GOVERN-3: nothing is mapped until the organisation maps something.
    expect(before.mappings).toEqual([]);
    await mappings.getByText('Nothing is mapped to this control').waitFor();
    await expectAccessible(page, 'a control');

    const form = page.getByRole('region', { name: 'Map an evidence event type' });
    await form.getByLabel('Evidence event type').fill('decision');
    await form.getByLabel('Condition (JSON, optional)').fill('{"source": console}');
    await form.getByLabel('Rationale').fill('Console reviews are done by a mixed panel.');
    await form.getByRole('button', { name: 'Add mapping' }).click();
    await form.getByRole('alert').filter({ hasText: 'must be a JSON object' }).waitFor();
    await form.getByLabel('Condition (JSON, optional)').fill('{"source": "console"}');
    await form.getByRole('button', { name: 'Add mapping' }).click();
    await form.getByRole('status').filter({ hasText: 'Mapped decision to this control.' }).waitFor();
    const orgRow = mappings.getByRole('row').filter({ hasText: 'your organisation' });
    await orgRow.waitFor();
    expect(await orgRow.textContent()).toContain('{"source":"console"}');
    const after = (await admin.client.get(api(`/controls/${govern3.id}`))).json();
    expect(after.mappings.filter((m: { source: string }) => m.source === 'organisation')).toMatchObject([
      { evidence_event_type: 'decision', condition: { source: 'console' }, rationale: 'Console reviews are done by a mixed panel.', catalogued: true },
    ]);
    // The console decision carries source console: the control is met now, on the page too.
    expect(after.status).toBe('met');
    await page.getByRole('region', { name: 'Status' }).getByText('met', { exact: true }).waitFor();

    // The same mapping twice: 409 in words.
    await form.getByLabel('Evidence event type').fill('decision');
    await form.getByLabel('Condition (JSON, optional)').fill('{"source":"console"}');
    await form.getByLabel('Rationale').fill('The same mapping again.');
    await form.getByRole('button', { name: 'Add mapping' }).click();
    const conflict = form.getByRole('alert').filter({ hasText: 'The mapping was not added' });
    await conflict.waitFor();
    expect(await conflict.textContent()).toContain('conflicts with what is already there');
    await expectAccessible(page, 'a refused mapping');
    expect(problems.errors).toEqual([]);
    await context.close();
  }, SLOW);

  it('refuses the requester’s own approval of an exception in words; a colleague approves it', async () => {
    const frameworks = (await admin.client.get(api('/governance/frameworks'))).json().items as Coverage[];
    const govern5 = frameworks.find((f) => f.key === 'nist-ai-rmf')!.controls.find((c) => c.ref === 'GOVERN-5')!;
    const title = 'No stakeholder panel yet';

    const a = await openPage(browser, t.url);
    await signIn(a.page, alice.email, '/governance/exceptions');
    await a.page.getByText('No exception has been asked for').waitFor();
    await expectAccessible(a.page, 'exceptions, empty');
    await a.page.getByRole('button', { name: 'Ask for an exception' }).click();
    const form = a.page.getByRole('region', { name: 'Ask for an exception' });
    await form.getByLabel('Control', { exact: true }).selectOption(govern5.id);
    await form.getByLabel('Title', { exact: true }).fill(title);
    await form.getByLabel('Justification').fill('The panel is being set up this quarter.');
    expect(await form.getByLabel('Owner’s email').inputValue()).toBe(alice.email);
    await expectAccessible(a.page, 'the exception form');
    await form.getByRole('button', { name: 'Ask for the exception' }).click();
    const row = a.page.getByRole('table', { name: 'Exceptions' }).getByRole('row').filter({ hasText: title });
    await row.waitFor();
    expect(await row.textContent()).toContain('nist-ai-rmf:GOVERN-5');
    expect(await row.textContent()).toContain('pending');
    const asked = (await admin.client.get(api('/exceptions'))).json().items as Array<{ id: string; title: string; status: string; requested_by: string; control_id: string; decided_by: string | null; decision_note: string | null }>;
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ title, status: 'pending', requested_by: alice.userId, control_id: govern5.id });

    // Alice tries to approve her own request: the API refuses, and the dialog says why in words.
    await row.getByRole('button', { name: `Approve ${title}` }).click();
    const dialog = a.page.getByRole('dialog', { name: 'Approve this exception' });
    expect(await dialog.textContent()).toContain('another person must decide it');
    await dialog.getByLabel('Note (required)').fill('Fine by me.');
    await dialog.getByRole('button', { name: 'Approve' }).click();
    const alert = dialog.getByRole('alert');
    await alert.waitFor();
    expect(await alert.textContent()).toContain('Separation of duties: you cannot decide a request you made yourself');
    expect(await alert.textContent()).toContain('self_approval_prohibited');
    expect(await alert.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(a.page, 'a refused self-approval');
    expect((await admin.client.get(api('/exceptions'))).json().items[0]).toMatchObject({ status: 'pending', decided_by: null });
    expect(a.problems.errors).toEqual([]);
    await a.context.close();

    // Bob, a colleague, approves it.
    const b = await openPage(browser, t.url);
    await signIn(b.page, bob.email, '/governance/exceptions?status=pending');
    const bobRow = b.page.getByRole('table', { name: 'Exceptions' }).getByRole('row').filter({ hasText: title });
    await bobRow.getByRole('button', { name: `Approve ${title}` }).click();
    const bobDialog = b.page.getByRole('dialog', { name: 'Approve this exception' });
    expect(await bobDialog.textContent()).not.toContain('another person must decide it');
    await bobDialog.getByLabel('Note (required)').fill('Accepted until the panel exists.');
    await bobDialog.getByRole('button', { name: 'Approve' }).click();
    await b.page.getByRole('status').filter({ hasText: `The exception “${title}” is approved.` }).waitFor();
    await b.page.getByRole('button', { name: 'Approved', exact: true }).click();
    await b.page.getByRole('table', { name: 'Exceptions' }).getByRole('row').filter({ hasText: title }).getByText('approved', { exact: true }).waitFor();
    await expectAccessible(b.page, 'an approved exception');
    expect((await admin.client.get(api('/exceptions'))).json().items[0]).toMatchObject({ status: 'approved', decided_by: bob.userId, decision_note: 'Accepted until the panel exists.' });
    // Approved for the whole organisation: the control is excepted in readiness.
    const covered = (await admin.client.get(api(`/controls/${govern5.id}`))).json();
    expect(covered.status).toBe('excepted');
    expect(b.problems.errors).toEqual([]);
    await b.context.close();
  }, SLOW);

  it('classifies an agent in the register, and moves a remediation task the classification opened', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, alice.email, '/governance/systems');
    const register = page.getByRole('table', { name: 'The AI-system register' });
    const row = register.getByRole('row').filter({ hasText: 'Refund agent' });
    await row.waitFor();
    expect(await row.textContent()).toContain('unclassified');
    await expectAccessible(page, 'the AI-system register');

    await row.getByRole('button', { name: 'Classify Refund agent' }).click();
    const dialog = page.getByRole('dialog', { name: 'Classify Refund agent' });
    await dialog.getByLabel('Class', { exact: true }).selectOption('high');
    // Too short a rationale: the API's field error, in the dialog.
    await dialog.getByLabel('Rationale (required)').fill('Refunds');
    await dialog.getByRole('button', { name: 'Classify' }).click();
    const invalid = dialog.getByRole('alert');
    await invalid.waitFor();
    expect(await invalid.textContent()).toContain('rationale');
    await expectAccessible(page, 'the classification dialog with an error');
    await dialog.getByLabel('Rationale (required)').fill('Decides refunds without a person in the loop.');
    await dialog.getByRole('button', { name: 'Classify' }).click();
    const done = page.getByRole('status').filter({ hasText: 'Refund agent is classified high.' });
    await done.waitFor();

    const system = ((await admin.client.get(api('/governance/systems'))).json().items as Array<{ agent_id: string; classification: string; rationale: string; gaps: Array<{ title: string }> }>).find((s) => s.agent_id === agentId)!;
    expect(system).toMatchObject({ classification: 'high', rationale: 'Decides refunds without a person in the loop.' });
    const tasks = (await admin.client.get(api(`/governance/remediation?agent_id=${agentId}`))).json().items as Array<{ id: string; title: string; status: string; gap: string }>;
    expect(tasks.length).toBeGreaterThan(0);
    expect(await done.textContent()).toContain(`${tasks.length} remediation task${tasks.length === 1 ? '' : 's'} opened`);
    await expect.poll(() => row.textContent()).toContain('high');
    for (const g of system.gaps) expect(await row.textContent()).toContain(g.title);

    // The tasks it opened, on the remediation tab; one is started.
    await page.getByRole('navigation', { name: 'Governance' }).getByRole('link', { name: 'Remediation' }).click();
    const tasksTable = page.getByRole('table', { name: 'Remediation tasks' });
    await tasksTable.waitFor();
    expect(await tasksTable.getByRole('row').count()).toBe(tasks.length + 1);
    await expectAccessible(page, 'remediation tasks');
    const task = tasks[0]!;
    await tasksTable.getByRole('button', { name: `Start: ${task.title}` }).click();
    await page.getByRole('status').filter({ hasText: 'is in progress' }).waitFor();
    const moved = ((await admin.client.get(api(`/governance/remediation?agent_id=${agentId}`))).json().items as Array<{ id: string; status: string }>).find((x) => x.id === task.id)!;
    expect(moved.status).toBe('in_progress');
    // Cancelling is behind a confirmation; the task is then closed for good.
    await tasksTable.getByRole('button', { name: `Cancel task: ${task.title}` }).click();
    const cancel = page.getByRole('dialog', { name: 'Cancel this task' });
    await expectAccessible(page, 'the cancel dialog');
    await cancel.getByRole('button', { name: 'Cancel task' }).click();
    await page.getByRole('status').filter({ hasText: 'is cancelled' }).waitFor();
    const closed = ((await admin.client.get(api(`/governance/remediation?agent_id=${agentId}`))).json().items as Array<{ id: string; status: string }>).find((x) => x.id === task.id)!;
    expect(closed.status).toBe('cancelled');

    // A task of one's own, on a control: opened from the page, as the API then lists it.
    const frameworks = (await admin.client.get(api('/governance/frameworks'))).json().items as Coverage[];
    const art26 = frameworks.find((f) => f.key === 'eu-ai-act')!.controls.find((c) => c.ref === 'Art.26')!;
    expect(art26.status).toBe('met');
    await page.getByRole('button', { name: 'Open a task' }).click();
    const form = page.getByRole('region', { name: 'Open a remediation task' });
    await form.getByLabel('Title', { exact: true }).fill('Write the deployer instructions');
    await form.getByLabel('Control (optional)').selectOption(art26.id);
    await form.getByLabel('Priority').selectOption('critical');
    await form.getByLabel('Assignee’s email (optional)').fill(bob.email);
    await form.getByLabel('Due on (optional)').fill('2027-01-15');
    await expectAccessible(page, 'the task form');
    await form.getByRole('button', { name: 'Open the task' }).click();
    await tasksTable.getByRole('row').filter({ hasText: 'Write the deployer instructions' }).getByText('critical').waitFor();
    const own = ((await admin.client.get(api('/governance/remediation?status=open'))).json().items as Array<Record<string, unknown>>).find((x) => x.title === 'Write the deployer instructions');
    expect(own).toMatchObject({ source: 'manual', priority: 'critical', control_id: art26.id, assignee_email: bob.email, due_at: '2027-01-15T23:59:59.000Z', agent_id: null });
    // An open task says its control is not met, whatever the evidence.
    expect((await admin.client.get(api(`/controls/${art26.id}`))).json().status).toBe('not_met');
    expect(problems.errors).toEqual([]);
    await context.close();
  }, SLOW);

  it('shows no write control to an auditor', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, auditor.email, '/governance/exceptions');
    await page.getByRole('table', { name: 'Exceptions' }).waitFor();
    expect(await page.getByRole('button', { name: 'Ask for an exception' }).count()).toBe(0);
    expect(await page.getByRole('columnheader', { name: 'Decide' }).count()).toBe(0);
    await page.getByRole('navigation', { name: 'Governance' }).getByRole('link', { name: 'AI-system register' }).click();
    await page.getByRole('table', { name: 'The AI-system register' }).waitFor();
    expect(await page.getByRole('button', { name: /^Classify/ }).count()).toBe(0);
    expect(problems.errors).toEqual([]);
    await context.close();
  }, SLOW);

  it('shows the empty states of a new organisation', async () => {
    const other = await onboardAdmin(t.app, 'Empty Co');
    await setPlan(t, other.tenant.id, 'enterprise');
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, other.email, '/reports');
    await page.getByText('No report yet. Create one above; it is built in the background.').waitFor();
    await expectAccessible(page, 'reports, empty');
    const tabs = page.getByRole('navigation', { name: 'Governance' });
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Governance' }).click();
    await page.getByRole('table', { name: 'Coverage and readiness of each framework' }).waitFor();
    // Nothing is evidenced in a new organisation: every framework is not ready.
    const frameworks = (await other.client.get(api('/governance/frameworks'))).json().items as Coverage[];
    expect(frameworks.every((f) => f.readiness === 'not_ready' && f.controls_met === 0)).toBe(true);
    expect(await page.getByRole('table', { name: 'Coverage and readiness of each framework' }).getByText('not ready').count()).toBe(3);
    for (const [tab, empty] of [
      ['AI-system register', 'No agent is registered yet'],
      ['Exceptions', 'No exception has been asked for'],
      ['Remediation', 'No remediation task: nothing is being put right.'],
    ] as const) {
      await tabs.getByRole('link', { name: tab }).click();
      await page.getByText(empty).waitFor();
      await expectAccessible(page, `${tab}, empty`);
    }
    await page.getByRole('button', { name: 'Cancelled', exact: true }).click();
    await page.getByText('No cancelled task.').waitFor();
    expect(problems.errors).toEqual([]);
    await context.close();
  }, SLOW);
});
