import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan, type Client } from '../support/harness.js';

/**
 * The policies pages in Chromium. Two security administrators (both hold policy:write and policy:publish,
 * docs/roles.md), so the only thing keeping the author from publishing is four eyes: A drafts, A's own
 * publish is refused in words, B publishes. Then a stale page (version_conflict), the rules diff between
 * two versions, and a simulation with draft rules, each checked against the API.
 */
describe('console: policies', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let authorA: Awaited<ReturnType<typeof addMember>>;
  let publisherB: Awaited<ReturnType<typeof addMember>>;
  let agentId: string;

  const rule = (id: string, effect: string, reason_code: string, conditions: unknown[], extra: Record<string, unknown> = {}) => ({ id, effect, reason_code, conditions, ...extra });

  async function createPolicy(client: Client, key: string, rules: unknown[]) {
    const res = await client.post(api('/policies'), { key, name: `Policy ${key}`, rules });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; version: number };
  }

  async function policy(id: string) {
    return (await admin.client.get(api(`/policies/${id}`))).json();
  }

  /** The rules editor's text, replaced as a person would: select all, type anew. */
  async function replaceRules(page: Page, label: string, rules: unknown) {
    await page.getByLabel(label).fill(JSON.stringify(rules, null, 2));
  }

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }), launchBrowser()]);
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    authorA = await addMember(t.app, admin.client, ['security_admin']);
    publisherB = await addMember(t.app, admin.client, ['security_admin']);
    const agent = (await admin.client.post(api('/agents'), { name: 'Payments agent' })).json();
    agentId = agent.id;
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const payment = tools.find((x) => x.tool_key === 'payments.create_payment')!;
    const bound = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: payment.id, actions: ['invoke'], constraints: { max_amount: 500 } });
    expect(bound.statusCode).toBe(201);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('publishes a policy as a second person: the author drafts it, sees four eyes in words and is refused; another person publishes it', async () => {
    const a = await openPage(browser, t.url);
    await signIn(a.page, authorA.email, '/policies');
    await a.page.getByRole('heading', { name: 'Policies' }).waitFor();
    await a.page.getByText('No policy yet').waitFor();
    await expectAccessible(a.page, 'the empty policy list');

    await a.page.getByRole('link', { name: 'New policy' }).click();
    await a.page.getByRole('heading', { name: 'New policy' }).waitFor();
    await a.page.getByLabel('Key').fill('payments-guard');
    await a.page.getByLabel('Name').fill('Payments guard');
    // Not JSON: said next to the editor, nothing sent.
    await a.page.getByLabel('Rules (JSON)').fill('[{"id": "large"');
    await a.page.getByRole('button', { name: 'Create policy' }).click();
    expect(await a.page.getByRole('alert').textContent()).toContain('The rules are not valid JSON');
    // JSON, but a reason code the API refuses: the envelope's details name the rule's field.
    await replaceRules(a.page, 'Rules (JSON)', [rule('large-payments', 'require_approval', 'large', [{ field: 'action.amount', op: 'gt', value: 1000 }])]);
    await a.page.getByRole('button', { name: 'Create policy' }).click();
    const invalid = a.page.getByRole('alert').filter({ hasText: 'Some fields are not valid.' });
    await invalid.waitFor();
    expect(await invalid.textContent()).toContain('rules.0.reason_code');
    expect(await invalid.textContent()).toContain('UPPER_SNAKE_CASE');
    expect(await invalid.getByTestId('correlation-id').textContent()).toMatch(/\S{8,}/);
    await expectAccessible(a.page, 'the new policy form with a validation error');
    expect((await admin.client.get(api('/policies'))).json().items).toEqual([]);

    await replaceRules(a.page, 'Rules (JSON)', [rule('large-payments', 'require_approval', 'LARGE_PAYMENT', [{ field: 'action.amount', op: 'gt', value: 1000 }])]);
    await a.page.getByRole('button', { name: 'Create policy' }).click();
    await a.page.getByRole('heading', { name: 'Policy: Payments guard' }).waitFor();
    const policyId = a.page.url().split('/policies/')[1]!;
    const created = await policy(policyId);
    expect(created).toMatchObject({ key: 'payments-guard', published_version: null, versions: [{ number: 1, state: 'draft', author_id: authorA.userId }] });

    // Before A tries: the page says in words that a second person must publish A's version.
    const versionsA = a.page.getByRole('region', { name: 'Versions', exact: true });
    expect(await versionsA.getByRole('row').filter({ hasText: 'version 1' }).textContent()).toContain('a second person must publish this version');
    await expectAccessible(a.page, 'a policy with a draft version');
    await versionsA.getByRole('button', { name: 'Publish version 1' }).click();
    const dialogA = a.page.getByRole('dialog', { name: 'Publish version 1' });
    expect(await dialogA.textContent()).toContain('Four eyes: you wrote version 1');
    await expectAccessible(a.page, 'the publish dialog with the four-eyes note');
    await dialogA.getByRole('button', { name: 'Publish', exact: true }).click();
    const refused = dialogA.getByRole('alert');
    await refused.waitFor();
    expect(await refused.textContent()).toContain('Four eyes: this needs a second person.');
    expect(await refused.textContent()).toContain('four_eyes_required');
    await expectAccessible(a.page, 'the refused publication');
    expect((await policy(policyId)).published_version).toBeNull();

    // B, in a browser of their own: no four-eyes note (B did not write it), and the publication goes through.
    const b = await openPage(browser, t.url);
    await signIn(b.page, publisherB.email, `/policies/${policyId}`);
    const versionsB = b.page.getByRole('region', { name: 'Versions', exact: true });
    await versionsB.waitFor();
    expect(await versionsB.textContent()).not.toContain('a second person must publish');
    await versionsB.getByRole('button', { name: 'Publish version 1' }).click();
    const dialogB = b.page.getByRole('dialog', { name: 'Publish version 1' });
    expect(await dialogB.textContent()).toContain('you are the second person');
    await dialogB.getByRole('button', { name: 'Publish', exact: true }).click();
    await b.page.getByRole('status').filter({ hasText: 'Version 1 is published' }).waitFor();
    expect(await versionsB.getByRole('row').filter({ hasText: 'version 1' }).textContent()).toContain('published');

    const published = await policy(policyId);
    expect(published).toMatchObject({ published_version: 1, versions: [{ number: 1, state: 'published', author_id: authorA.userId, published_by: publisherB.userId }] });
    // The list shows it published.
    await b.page.getByRole('link', { name: 'Policies', exact: true }).first().click();
    const listRow = b.page.getByRole('row').filter({ hasText: 'payments-guard' });
    await listRow.waitFor();
    expect(await listRow.textContent()).toContain('version 1');
    await expectAccessible(b.page, 'the policy list');

    expect(a.problems.errors).toEqual([]);
    expect(b.problems.errors).toEqual([]);
    await a.context.close();
    await b.context.close();
  });

  it('refuses a publication from a stale page with version_conflict in words; after reloading it goes through', async () => {
    const created = await createPolicy(authorA.client, 'crm-export', [rule('no-export', 'deny', 'NO_EXPORT', [{ field: 'tool.key', op: 'eq', value: 'crm.export' }])]);
    const b = await openPage(browser, t.url);
    await signIn(b.page, publisherB.email, `/policies/${created.id}`);
    const versions = b.page.getByRole('region', { name: 'Versions', exact: true });
    await versions.getByRole('button', { name: 'Publish version 1' }).waitFor();

    // A adds version 2 after B loaded the page.
    const added = await authorA.client.post(
      api(`/policies/${created.id}/versions`),
      { rules: [rule('no-export', 'deny', 'NO_EXPORT', [{ field: 'tool.key', op: 'in', value: ['crm.export', 'crm.bulk_export'] }])], change_note: 'Bulk export too' },
      { 'if-match': String(created.version) },
    );
    expect(added.statusCode, added.body).toBe(201);

    // B's new draft from the stale page is refused too, and nothing is written.
    const draft = b.page.getByRole('region', { name: 'Draft rules' });
    await draft.getByLabel('Change note').fill('B tightens it');
    await draft.getByRole('button', { name: 'New draft version' }).click();
    const draftConflict = draft.getByRole('alert');
    await draftConflict.waitFor();
    expect(await draftConflict.textContent()).toContain('Someone changed this since you opened it.');
    expect((await policy(created.id)).latest_version).toBe(2);

    await versions.getByRole('button', { name: 'Publish version 1' }).click();
    const dialog = b.page.getByRole('dialog', { name: 'Publish version 1' });
    await dialog.getByRole('button', { name: 'Publish', exact: true }).click();
    const conflict = dialog.getByRole('alert');
    await conflict.waitFor();
    expect(await conflict.textContent()).toContain('Someone changed this since you opened it.');
    expect(await conflict.textContent()).toContain('version_conflict');
    await expectAccessible(b.page, 'a version conflict in the publish dialog');
    expect((await policy(created.id)).published_version).toBeNull();

    await dialog.getByRole('button', { name: 'Reload the policy' }).click();
    await versions.getByRole('row').filter({ hasText: 'Bulk export too' }).waitFor();
    await versions.getByRole('button', { name: 'Publish version 2' }).click();
    const again = b.page.getByRole('dialog', { name: 'Publish version 2' });
    await again.getByRole('button', { name: 'Publish', exact: true }).click();
    await b.page.getByRole('status').filter({ hasText: 'Version 2 is published' }).waitFor();
    expect(await policy(created.id)).toMatchObject({ published_version: 2, versions: [{ number: 2, state: 'published', published_by: publisherB.userId }, { number: 1, state: 'draft' }] });
    expect(b.problems.errors).toEqual([]);
    await b.context.close();
  });

  it('diffs the rules of two versions side by side: an added, a removed and a changed rule, with the changed fields named', async () => {
    const keep = rule('block-delete', 'deny', 'NO_DELETE', [{ field: 'tool.privilege_class', op: 'eq', value: 'destructive' }]);
    const created = await createPolicy(authorA.client, 'money', [
      keep,
      rule('large-payments', 'require_approval', 'LARGE_PAYMENT', [
        { field: 'tool.privilege_class', op: 'eq', value: 'financial' },
        { field: 'action.amount', op: 'gt', value: 1000 },
      ]),
      rule('night-writes', 'deny', 'NIGHT_WRITE', [{ field: 'time.hour', op: 'lt', value: 6 }]),
    ]);
    const v2 = await authorA.client.post(
      api(`/policies/${created.id}/versions`),
      {
        change_note: 'Lower the payment threshold; weekend payments',
        rules: [
          rule(
            'large-payments',
            'require_approval',
            'PAYMENT_REVIEW',
            [
              { field: 'action.amount', op: 'gt', value: 500 },
              { field: 'tool.privilege_class', op: 'eq', value: 'financial' },
            ],
            { obligations: { approvals_required: 2 } },
          ),
          keep,
          rule('weekend-payments', 'require_approval', 'WEEKEND_PAYMENT', [{ field: 'time.weekday', op: 'in', value: [0, 6] }]),
        ],
      },
      { 'if-match': String(created.version) },
    );
    expect(v2.statusCode, v2.body).toBe(201);

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, publisherB.email, `/policies/${created.id}`);
    const compare = page.getByRole('region', { name: 'Compare versions' });
    await compare.waitFor();
    expect(await compare.getByLabel('From version', { exact: true }).inputValue()).toBe('1');
    expect(await compare.getByLabel('To version', { exact: true }).inputValue()).toBe('2');
    const table = compare.getByRole('table', { name: 'Rule changes from version 1 to version 2' });
    expect(await compare.getByRole('status').textContent()).toContain('1 added, 1 removed, 1 changed, 1 unchanged');

    const added = table.getByRole('rowgroup').filter({ hasText: 'weekend-payments' });
    expect(await added.textContent()).toContain('added');
    expect(await added.textContent()).toContain('time.weekday in [0,6]');
    const removed = table.getByRole('rowgroup').filter({ hasText: 'night-writes' });
    expect(await removed.textContent()).toContain('removed');
    // The changed rule: one row per changed field, old value beside new; the moved condition is not a change.
    const changed = table.getByRole('rowgroup').filter({ hasText: 'large-payments' });
    expect(await changed.textContent()).toContain('changed');
    const fieldRow = (name: string) => changed.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
    expect(await fieldRow('Reason code').getByRole('cell').allTextContents()).toEqual(expect.arrayContaining(['LARGE_PAYMENT', 'PAYMENT_REVIEW']));
    expect(await fieldRow('Approvals required').getByRole('cell').allTextContents()).toEqual(expect.arrayContaining(['1', '2']));
    const conditions = await fieldRow('Conditions').getByRole('cell').allTextContents();
    expect(conditions.join(' | ')).toContain('removed action.amount gt 1000');
    expect(conditions.join(' | ')).toContain('added action.amount gt 500');
    expect(conditions.join(' | ')).not.toContain('tool.privilege_class');
    expect(await changed.getByRole('row').count()).toBe(3);
    expect(await compare.textContent()).toContain('Unchanged: block-delete');
    await expectAccessible(page, 'the rules diff');

    // The other way round: what was added is now removed.
    await compare.getByLabel('From version', { exact: true }).selectOption('2');
    await compare.getByLabel('To version', { exact: true }).selectOption('1');
    const reverse = compare.getByRole('table', { name: 'Rule changes from version 2 to version 1' });
    expect(await reverse.getByRole('rowgroup').filter({ hasText: 'weekend-payments' }).textContent()).toContain('removed');
    expect(await reverse.getByRole('rowgroup').filter({ hasText: 'night-writes' }).textContent()).toContain('added');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('simulates draft rules against a sample request: the decision, reason codes and trace are the API’s', async () => {
    const created = await createPolicy(authorA.client, 'sim', [rule('noop', 'deny', 'NEVER', [{ field: 'tool.key', op: 'eq', value: 'nothing.at_all' }])]);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, authorA.email, `/policies/${created.id}`);
    const draft = page.getByRole('region', { name: 'Draft rules' });
    await draft.waitFor();
    // The editor starts from the latest version's rules.
    expect(JSON.parse(await draft.getByLabel('Draft rules (JSON)').inputValue())).toEqual([rule('noop', 'deny', 'NEVER', [{ field: 'tool.key', op: 'eq', value: 'nothing.at_all' }])]);

    const sim = page.getByRole('region', { name: 'Simulate' });
    await sim.getByLabel('Agent').selectOption({ label: 'Payments agent' });
    await sim.getByLabel('Tool').fill('payments.create_payment');
    await sim.getByLabel('Target').fill('payee://suppliers/acme');
    await sim.getByLabel('Parameters (JSON object)').fill('{"amount": 150, "currency": "EUR"}');

    // A rule the compiler refuses (a misspelt field): each problem named with its rule.
    await replaceRules(page, 'Draft rules (JSON)', [rule('cap', 'deny', 'DRAFT_CAP', [{ field: 'action.amont', op: 'gt', value: 100 }])]);
    await sim.getByRole('button', { name: 'Simulate', exact: true }).click();
    const invalid = sim.getByRole('alert');
    await invalid.waitFor();
    expect(await invalid.textContent()).toContain('The rules are not valid.');
    expect(await sim.getByRole('list', { name: 'Problems in the rules' }).textContent()).toContain('Rule cap (number 1), condition 1, field action.amont');
    await expectAccessible(page, 'a simulation refused for invalid rules');

    const draftRules = [
      rule('cap', 'deny', 'DRAFT_CAP', [{ field: 'action.amount', op: 'gt', value: 100 }]),
      rule('eur-only', 'require_approval', 'NOT_EUR', [{ field: 'action.currency', op: 'neq', value: 'EUR' }]),
    ];
    await replaceRules(page, 'Draft rules (JSON)', draftRules);
    await sim.getByRole('button', { name: 'Simulate', exact: true }).click();
    const result = sim.getByRole('region', { name: 'Simulation result' });
    await result.waitFor();

    const expected = (
      await authorA.client.post(api('/policies/simulate'), {
        agent_id: agentId,
        tool: 'payments.create_payment',
        target: 'payee://suppliers/acme',
        parameters: { amount: 150, currency: 'EUR' },
        draft_rules: draftRules,
      })
    ).json();
    expect(expected.decision).toBe('deny');
    expect(expected.reason_codes).toContain('DRAFT_CAP');
    const facts = await result.locator('dl').textContent();
    expect(facts).toContain('deny');
    for (const code of expected.reason_codes) expect(facts).toContain(code);
    expect(facts).not.toContain('NOT_EUR');
    expect(facts).toContain('the draft rules');
    const trace = result.getByRole('table');
    expect(await trace.getByRole('row').count()).toBe(expected.trace.length + 1);
    expect(await trace.getByRole('row').filter({ hasText: 'rule cap' }).textContent()).toContain('action.amount gt: holds');
    expect(await trace.getByRole('row').filter({ hasText: 'rule eur-only' }).textContent()).toContain('action.currency neq: does not hold');
    await expectAccessible(page, 'a simulation result');

    // The same request under the published rules (none published here): the draft's reason is gone.
    await sim.getByLabel('The published rules of the active policies').check();
    await sim.getByRole('button', { name: 'Simulate', exact: true }).click();
    await result.getByText('the published rules').waitFor();
    expect(await result.locator('dl').textContent()).not.toContain('DRAFT_CAP');
    // Nothing was saved: the policy still has its one version.
    expect((await policy(created.id)).versions).toHaveLength(1);

    // The simulated rules become the next draft (If-Match: the policy as loaded), authored by A.
    await draft.getByLabel('Change note').fill('Cap payments at 100');
    await draft.getByRole('button', { name: 'New draft version' }).click();
    await draft.getByRole('status').filter({ hasText: 'Saved as version 2, a draft.' }).waitFor();
    expect(await policy(created.id)).toMatchObject({
      latest_version: 2,
      published_version: null,
      versions: [{ number: 2, state: 'draft', rules: draftRules, change_note: 'Cap payments at 100', author_id: authorA.userId }, { number: 1 }],
    });
    expect(await page.getByRole('region', { name: 'Versions', exact: true }).getByRole('row').filter({ hasText: 'Cap payments at 100' }).textContent()).toContain('a second person must publish this version');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('deactivates a critical policy only with a reason, activates it again, and shows no publishing to a person without policy:publish', async () => {
    const res = await authorA.client.post(api('/policies'), { key: 'critical-one', name: 'Critical one', critical: true, rules: [rule('r', 'deny', 'NOPE', [{ field: 'tool.key', op: 'eq', value: 'x.y' }])] });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, publisherB.email, `/policies/${id}`);
    await page.getByRole('heading', { name: 'Policy: Critical one' }).waitFor();
    await page.getByRole('button', { name: 'Deactivate' }).click();
    const dialog = page.getByRole('dialog', { name: 'Deactivate this policy' });
    const confirm = dialog.getByRole('button', { name: 'Deactivate' });
    expect(await confirm.isDisabled()).toBe(true);
    expect(await dialog.textContent()).toContain('This policy is critical');
    await dialog.getByLabel('Reason (required)').fill('Replaced by the payments guard');
    await expectAccessible(page, 'the deactivation dialog');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'The policy is inactive.' }).waitFor();
    expect((await policy(id)).status).toBe('inactive');
    const audit = (await admin.client.get(api(`/audit?action=policy.status_changed&target_id=${id}`))).json().items;
    expect(audit).toMatchObject([{ actor: { id: publisherB.userId }, details: { from: 'active', to: 'inactive', reason: 'Replaced by the payments guard' } }]);

    await page.getByRole('button', { name: 'Activate' }).click();
    await page.getByRole('dialog', { name: 'Activate this policy' }).getByRole('button', { name: 'Activate' }).click();
    await page.getByRole('status').filter({ hasText: 'The policy is active.' }).waitFor();
    expect((await policy(id)).status).toBe('active');
    expect(problems.errors).toEqual([]);
    await context.close();

    // A developer may draft but not publish: no publish or status buttons, and the reason in words.
    const developer = await addMember(t.app, admin.client, ['agent_developer']);
    const d = await openPage(browser, t.url);
    await signIn(d.page, developer.email, `/policies/${id}`);
    const versions = d.page.getByRole('region', { name: 'Versions', exact: true });
    await versions.waitFor();
    expect(await versions.getByRole('button').count()).toBe(0);
    expect(await versions.textContent()).toContain('needs policy:publish');
    expect(await d.page.getByRole('button', { name: /Deactivate|Activate/ }).count()).toBe(0);
    await d.page.getByRole('button', { name: 'New draft version' }).waitFor();
    expect(d.problems.errors).toEqual([]);
    await d.context.close();
  });
});
