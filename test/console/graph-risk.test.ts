import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAccessible, launchBrowser, openPage, signIn, startConsoleApp, type ConsoleApp } from '../support/browser.js';
import { addMember, api, onboardAdmin, setPlan, type Client } from '../support/harness.js';

/**
 * The graph and risk pages in Chromium, on a registry built through the API: an agent's subgraph drawn by
 * cytoscape.js with its nodes listed beside it, a node's details, the blast radius and a path checked against the
 * API's own answers, and the risk page's what-if checked against the API's what-if. Every page runs under the
 * API's Content-Security-Policy: no script error and no refusal may be reported.
 */
describe('console: graph and risk', () => {
  let t: ConsoleApp;
  let browser: Browser;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let viewer: Awaited<ReturnType<typeof addMember>>;
  const id: Record<'server' | 'patients' | 'sharedCred' | 'update' | 'read' | 'care' | 'ops', string> = {} as never;

  async function ok(client: Client, method: 'GET' | 'POST' | 'PATCH', url: string, body?: Record<string, unknown>) {
    const res = await client.request(method, api(url), body);
    expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
    return res.json();
  }

  beforeAll(async () => {
    [t, browser] = await Promise.all([startConsoleApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } }), launchBrowser()]);
    admin = await onboardAdmin(t.app, 'Graph Console Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    viewer = await addMember(t.app, admin.client, ['viewer']);
    const c = admin.client;
    id.server = (await ok(c, 'POST', '/mcp-servers', { name: 'Records server', endpoint: 'https://mcp.example.com/records' })).id;
    id.patients = (await ok(c, 'POST', '/resources/data', { name: 'Patient records', system: 'ehr', classification: 'regulated', contains_personal_data: true })).id;
    id.sharedCred = (await ok(c, 'POST', '/resources/credentials', { name: 'shared-db', provider: 'vault', secret_path: 'kv/db/shared', shared: true, rotation_interval_days: 30 })).id;
    id.update = (await ok(c, 'POST', '/tools', {
      tool_key: 'records.update', name: 'Update records', mcp_server_id: id.server, data_resource_id: id.patients, privilege_class: 'write', credential_ref_id: id.sharedCred,
    })).id;
    id.read = (await ok(c, 'POST', '/tools', { tool_key: 'records.read', name: 'Read records', mcp_server_id: id.server, data_resource_id: id.patients, privilege_class: 'read' })).id;
    id.care = (await ok(c, 'POST', '/agents', {
      name: 'Care bot', purpose: 'Answers patients', environment: 'production', internet_exposure: 'public', human_approval_coverage: 'none', data_classification: 'confidential',
      owners: [{ name: 'Alice', email: 'alice@example.com', owner_type: 'accountable' }],
    })).id;
    await ok(c, 'POST', `/agents/${id.care}/permissions`, { target_kind: 'tool', target_id: id.update, actions: ['invoke'] });
    id.ops = (await ok(c, 'POST', '/agents', { name: 'Ops bot', human_approval_coverage: 'strong' })).id;
    await ok(c, 'POST', `/agents/${id.ops}/permissions`, { target_kind: 'tool', target_id: id.read, actions: ['invoke'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /** The labels in the first column of a table's rows, in order. */
  const firstColumn = (table: Locator) => table.locator('tbody tr td:first-child').allTextContents();
  /** Every row's cells' text. */
  async function cells(table: Locator): Promise<string[][]> {
    const rows = table.locator('tbody tr');
    const out: string[][] = [];
    for (let i = 0, n = await rows.count(); i < n; i++) out.push(await rows.nth(i).locator('td').allTextContents());
    return out;
  }
  const labelsOf = (nodes: Array<{ label: string }>) => nodes.map((n) => n.label);
  const nodeTable = (page: Page) => page.getByRole('region', { name: /^Nodes shown/ }).getByRole('table');

  it('draws an agent’s subgraph with its nodes listed beside it; a node picked from the list shows its details', async () => {
    const subgraph = await ok(admin.client, 'GET', `/graph/agents/${id.care}`);
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/graph?agent=${id.care}`);
    await page.getByRole('heading', { name: 'Subgraph of the agent Care bot' }).waitFor();
    // The picture: cytoscape's canvases inside a labelled image, with its text alternative beside it.
    const picture = page.getByRole('img', { name: /^Subgraph of the agent Care bot: \d+ nodes and \d+ edges/ });
    await picture.waitFor();
    await expect.poll(() => picture.locator('canvas').count()).toBeGreaterThan(0);
    expect((await firstColumn(nodeTable(page))).sort()).toEqual(labelsOf(subgraph.nodes).sort());
    expect(labelsOf(subgraph.nodes)).toEqual(expect.arrayContaining(['Care bot', 'Update records', 'Records server', 'Patient records', 'shared-db']));
    const edgeRows = page.getByRole('region', { name: /^Edges shown/ }).getByRole('row');
    expect(await edgeRows.count()).toBe(subgraph.edges.length + 1);
    // The agent is the one selected at first.
    const side = page.getByRole('complementary', { name: 'Selected node' });
    await side.getByRole('heading', { name: 'Care bot' }).waitFor();
    await expectAccessible(page, 'an agent’s subgraph');

    await nodeTable(page).getByRole('button', { name: 'Update records' }).click();
    await side.getByRole('heading', { name: 'Update records' }).waitFor();
    expect(await nodeTable(page).getByRole('button', { name: 'Update records' }).getAttribute('aria-pressed')).toBe('true');
    const detail = await ok(admin.client, 'GET', `/graph/nodes/${subgraph.nodes.find((n: { label: string }) => n.label === 'Update records').id}`);
    const text = await side.textContent();
    expect(text).toContain('Tool');
    expect(text).toContain(id.update);
    expect(text).toContain(detail.node.source_record.table);
    await side.getByText('Attributes').click();
    expect(await side.getByLabel('Attributes of Update records').textContent()).toContain('"privilege_class": "write"');
    await expectAccessible(page, 'a selected node');

    // A click on a node in the picture selects it too. Where cytoscape drew it is read from the instance it keeps
    // on its container (the test's only look inside the library).
    const patients = subgraph.nodes.find((n: { label: string }) => n.label === 'Patient records').id as string;
    const at = await picture.evaluate((el, nodeId) => {
      const cy = (el as unknown as { _cyreg: { cy: { getElementById(id: string): { renderedPosition(): { x: number; y: number } } } } })._cyreg.cy;
      return cy.getElementById(nodeId).renderedPosition();
    }, patients);
    const box = (await picture.boundingBox())!;
    await page.mouse.click(box.x + at.x, box.y + at.y);
    await side.getByRole('heading', { name: 'Patient records' }).waitFor();
    expect(await nodeTable(page).getByRole('button', { name: 'Patient records' }).getAttribute('aria-pressed')).toBe('true');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('highlights the blast radius the API answers, and lists the nodes it affects', async () => {
    const subgraph = await ok(admin.client, 'GET', `/graph/agents/${id.care}`);
    const serverNode = subgraph.nodes.find((n: { kind: string }) => n.kind === 'mcp_server');
    const blast = await ok(admin.client, 'GET', `/graph/nodes/${serverNode.id}/blast-radius`);
    // The server's compromise reaches beyond the agent's subgraph (the other agent's tool, and that agent).
    expect(labelsOf(blast.affected)).toEqual(expect.arrayContaining(['Update records', 'Read records', 'Care bot', 'Ops bot']));

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, `/graph?agent=${id.care}`);
    await nodeTable(page).getByRole('button', { name: 'Records server' }).click();
    const side = page.getByRole('complementary', { name: 'Selected node' });
    await side.getByRole('heading', { name: 'Records server' }).waitFor();
    await side.getByRole('button', { name: 'Blast radius' }).click();
    await page.getByRole('heading', { name: 'Blast radius of Records server', level: 3 }).waitFor();

    const listed = page.getByRole('region', { name: 'Blast radius of Records server' }).getByRole('table');
    expect(await firstColumn(listed)).toEqual(labelsOf(blast.affected));
    // In the picture's own list, exactly the affected nodes (and the start) are marked highlighted, and each says how.
    const rows = await cells(nodeTable(page));
    const marked = rows.filter((r) => r[3] !== 'no');
    expect(marked.map((r) => r[0]).sort()).toEqual([...labelsOf(blast.affected), 'Records server'].sort());
    for (const a of blast.affected) expect(marked.find((r) => r[0] === a.label)![3]).toContain(a.impact === 'control' ? 'controlled' : 'reachable');
    // And in the picture itself: the nodes cytoscape draws highlighted are the start and the affected ones.
    const drawn = await page.getByRole('img', { name: /^Blast radius of Records server/ }).evaluate((el) => {
      type Node = { id(): string; hasClass(c: string): boolean };
      const cy = (el as unknown as { _cyreg: { cy: { nodes(): { toArray(): Node[] } } } })._cyreg.cy;
      return cy.nodes().toArray().filter((n) => n.hasClass('highlighted')).map((n) => n.id());
    });
    expect(drawn.sort()).toEqual([serverNode.id, ...blast.affected.map((a: { id: string }) => a.id)].sort());
    expect(await page.getByRole('region', { name: 'Blast radius of Records server' }).textContent()).toContain(`Agents an attacker could steer${blast.controlled_agents}`);
    await expectAccessible(page, 'a blast radius');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('finds a node with the search bar, draws its neighbourhood, and lists a path between two nodes in order', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, viewer.email, '/graph');
    // The viewer may read the graph but not rebuild it.
    await page.getByRole('heading', { name: 'Graph', level: 1 }).waitFor();
    expect(await page.getByRole('button', { name: 'Rebuild graph' }).count()).toBe(0);
    await page.getByLabel('Name or key contains').fill('records');
    await page.getByRole('group', { name: /^Kinds/ }).getByLabel('MCP server').check();
    await page.getByRole('button', { name: 'Search' }).click();
    const found = page.getByRole('table', { name: 'Nodes found' });
    await found.waitFor();
    expect(await firstColumn(found)).toEqual(['Records server']);
    await expectAccessible(page, 'the graph search');
    await found.getByRole('button', { name: 'Draw the neighbourhood of Records server' }).click();
    await page.getByRole('heading', { name: 'Neighbourhood of Records server' }).waitFor();
    await page.getByLabel('Depth', { exact: true }).selectOption('2');
    await expect.poll(() => firstColumn(nodeTable(page))).toContain('Ops bot');

    await nodeTable(page).getByRole('button', { name: 'Ops bot' }).click();
    const side = page.getByRole('complementary', { name: 'Selected node' });
    await side.getByRole('heading', { name: 'Ops bot' }).waitFor();
    await side.getByLabel('Path to…').selectOption({ label: 'Patient records (Data resource)' });
    await side.getByRole('button', { name: 'Find path' }).click();
    const steps = page.getByRole('list', { name: 'Nodes of the path, in order' });
    await steps.waitFor();

    const subgraph = await ok(admin.client, 'GET', `/graph/agents/${id.ops}`);
    const ops = subgraph.agent.id;
    const patients = subgraph.nodes.find((n: { label: string }) => n.label === 'Patient records').id;
    const path = await ok(admin.client, 'GET', `/graph/path?source=${ops}&target=${patients}`);
    expect(path.found).toBe(true);
    expect(await steps.locator('li strong').allTextContents()).toEqual(labelsOf(path.nodes));
    expect(path.nodes[0].label).toBe('Ops bot');
    expect(path.nodes.at(-1).label).toBe('Patient records');
    // The path's nodes are the highlighted ones, each with its step.
    const rows = await cells(nodeTable(page));
    path.nodes.forEach((n: { label: string }, i: number) => expect(rows.find((r) => r[0] === n.label)![3]).toBe(`on the path, step ${i + 1} of ${path.nodes.length}`));
    await expectAccessible(page, 'a path');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('draws a high-risk path and rebuilds the graph for a person who may', async () => {
    const high = await ok(admin.client, 'GET', '/graph/high-risk-paths');
    const pattern = high.patterns.find((p: { count: number }) => p.count > 0);
    expect(pattern, 'the fixture matches a high-risk pattern').toBeDefined();
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/graph');
    const section = page.getByRole('region', { name: 'High-risk paths' });
    await section.getByRole('button', { name: `Draw: ${pattern.matches[0].summary}` }).click();
    const steps = page.getByRole('list', { name: 'Nodes of the path, in order' });
    await steps.waitFor();
    expect(await steps.locator('li strong').allTextContents()).toEqual(labelsOf(pattern.matches[0].nodes));
    await page.getByRole('button', { name: 'Rebuild graph' }).click();
    await page.getByRole('status').filter({ hasText: /^Rebuilt: \d+ nodes/ }).waitFor();
    const status = await page.getByRole('status').filter({ hasText: /^Rebuilt/ }).textContent();
    // Nothing drifted: the projection was current, so the rebuild changed no row.
    expect(status).toContain('0 node and 0 edge changes');
    await expectAccessible(page, 'a high-risk path');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('answers the graph at a point in time: an agent registered later is not in it', async () => {
    // Every read projects the registry first, so the graph read here is dated before the agent below.
    await ok(admin.client, 'GET', '/graph?q=late');
    const before = new Date().toISOString();
    await ok(admin.client, 'POST', '/agents', { name: 'Late bot' });
    expect((await ok(admin.client, 'GET', '/graph?q=late%20bot')).nodes.map((n: { label: string }) => n.label)).toEqual(['Late bot']);
    expect((await ok(admin.client, 'GET', `/graph?q=late%20bot&at=${encodeURIComponent(before)}`)).nodes).toEqual([]);

    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, viewer.email, `/graph?at=${encodeURIComponent(before)}`);
    await page.getByText('Every read on this page answers the graph as it was at').waitFor();
    // The field shows that moment to the second, in local time. The browser drops ":00" seconds
    // from a datetime-local value (HTML's normalised form), so a whole minute reads without them.
    const shown = await page.getByLabel('Point in time').inputValue();
    expect(shown).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?$/);
    expect(new Date(shown).getTime()).toBe(Math.floor(Date.parse(before) / 1000) * 1000);
    await page.getByLabel('Name or key contains').fill('late bot');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No node matches.').waitFor();
    await page.getByRole('button', { name: 'Back to now' }).click();
    const found = page.getByRole('table', { name: 'Nodes found' });
    await found.waitFor();
    expect(await firstColumn(found)).toEqual(['Late bot']);
    await expectAccessible(page, 'the graph now');
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('shows an agent’s score and factors, recalculates it, and answers a what-if as the API does, saving nothing', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/risk');
    await page.getByRole('table', { name: 'Agents and their risk bands' }).getByRole('link', { name: 'Care bot' }).click();
    await page.getByRole('heading', { name: 'Risk: Care bot' }).waitFor();
    const score = page.getByRole('region', { name: 'Score' });
    await score.getByRole('table', { name: 'Each factor’s contribution' }).waitFor();
    const before = await ok(admin.client, 'GET', `/risks/agents/${id.care}`);
    expect(await score.locator('.risk-number').textContent()).toBe(String(before.score));
    expect(await firstColumn(score.getByRole('table'))).toEqual(before.factors.map((f: { description: string; key: string }) => f.description + f.key));

    await page.getByRole('button', { name: 'Recalculate' }).click();
    await page.getByRole('status').filter({ hasText: /^Recalculated: \d+/ }).waitFor();
    const stored = await ok(admin.client, 'GET', `/risks/agents/${id.care}`);
    expect(stored.stale).toBe(false);
    expect(await page.getByRole('status').filter({ hasText: /^Recalculated/ }).textContent()).toBe(`Recalculated: ${stored.score} (${stored.band}).`);
    // Its history now has today's score, drawn and in the table.
    const history = page.getByRole('region', { name: 'History' });
    await history.getByRole('img', { name: /^Risk score per day/ }).waitFor();
    expect(await history.getByRole('img').getAttribute('aria-labelledby')).toBeTruthy();
    await history.getByText('The same as a table').click();
    const days = await ok(admin.client, 'GET', `/risks/agents/${id.care}/history`);
    expect(await history.getByRole('table').locator('tbody tr td:nth-child(2)').allTextContents()).toEqual(days.items.map((i: { score: number }) => String(i.score)));

    const form = page.getByRole('form', { name: 'Proposed changes' });
    await form.getByLabel('Internet exposure').selectOption('none');
    await form.getByLabel('Environment').selectOption({ label: 'not production' });
    await form.getByLabel('Data classification (most sensitive reached)').selectOption('public');
    await form.getByLabel('Every MCP server it uses is approved').check();
    await form.getByRole('button', { name: 'Show the score' }).click();
    const result = page.getByRole('region', { name: 'What-if result' });
    await result.waitFor();
    const answer = await ok(admin.client, 'POST', `/risks/agents/${id.care}/what-if`, { internet_exposure: 'none', production: false, max_data_classification: 'public', approve_mcp_servers: true });
    expect(answer.proposed.score).toBeLessThan(answer.current.score);
    expect(await result.getByTestId('whatif-current').textContent()).toBe(`${answer.current.score} ${answer.current.band}`);
    expect(await result.getByTestId('whatif-proposed').textContent()).toBe(`${answer.proposed.score} ${answer.proposed.band}`);
    expect(await result.getByTestId('whatif-difference').textContent()).toBe(`−${-answer.difference}`);
    // The factor deltas side by side: every factor that changed, with the API's figures, first.
    const changed = answer.factors.filter((f: { difference: number }) => f.difference !== 0);
    expect(changed.map((f: { key: string }) => f.key)).toEqual(expect.arrayContaining(['internet_exposure', 'production_environment', 'data_classification']));
    const rows = await cells(result.getByRole('table'));
    expect(rows.slice(0, changed.length).map((r) => r.slice(1, 4))).toEqual(
      changed.map((f: { current: number; proposed: number; difference: number }) => [String(f.current), String(f.proposed), f.difference > 0 ? `+${f.difference}` : `−${-f.difference}`]),
    );
    await expectAccessible(page, 'a what-if');
    // Nothing saved: the stored score is the one recalculated above.
    const after = await ok(admin.client, 'GET', `/risks/agents/${id.care}`);
    expect({ score: after.score, computed_at: after.computed_at }).toEqual({ score: stored.score, computed_at: stored.computed_at });
    expect(problems.errors).toEqual([]);
    await context.close();
  });

  it('switches a ruleset factor off with a reason; a viewer sees the ruleset without the switch', async () => {
    const { page, problems, context } = await openPage(browser, t.url);
    await signIn(page, admin.email, '/risk/ruleset');
    const ruleset = await ok(admin.client, 'GET', '/risks/ruleset');
    const factor = ruleset.factors.find((f: { key: string }) => f.key === 'owner_attestation');
    await page.getByRole('button', { name: `Disable ${factor.description}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Disable the factor owner_attestation' });
    await dialog.getByLabel('Reason (5 characters or more) (required)').fill('Attestation tracked in the GRC tool');
    await expectAccessible(page, 'the ruleset dialog');
    await dialog.getByRole('button', { name: 'Disable' }).click();
    await page.getByRole('status').filter({ hasText: 'is disabled' }).waitFor();
    const after = (await ok(admin.client, 'GET', '/risks/ruleset')).factors.find((f: { key: string }) => f.key === 'owner_attestation');
    expect(after).toMatchObject({ enabled: false, override: { enabled: false, reason: 'Attestation tracked in the GRC tool', changed_by: admin.userId } });
    await page.getByRole('button', { name: `Enable ${factor.description}` }).waitFor();
    expect(problems.errors).toEqual([]);
    await context.close();

    const seen = await openPage(browser, t.url);
    await signIn(seen.page, viewer.email, '/risk/ruleset');
    await seen.page.getByRole('table', { name: 'Risk factors' }).waitFor();
    expect(await seen.page.getByRole('button', { name: /^(Enable|Disable) / }).count()).toBe(0);
    await seen.page.goto(`/risk/agents/${id.ops}`);
    await seen.page.getByRole('heading', { name: 'Risk: Ops bot' }).waitFor();
    await seen.page.getByRole('region', { name: 'Score' }).waitFor();
    expect(await seen.page.getByRole('button', { name: 'Recalculate' }).count()).toBe(0);
    await expectAccessible(seen.page, 'an agent’s risk, read only');
    expect(seen.problems.errors).toEqual([]);
    await seen.context.close();
  });
});
