/**
 * `make screenshots`: the console's main pages as a newcomer sees them after a few minutes of use, saved into
 * docs/console/ for the README and docs/console.md. Starts `tollgate api` as built (dist/cli.js) on an in-memory
 * embedded database with the demo organisation, fills it through the public API (agents, identities, bindings,
 * decisions, a held approval, a mock discovery run with its findings), then drives Debian's Chromium.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { chromium, type Page } from 'playwright-core';

const ROOT = path.resolve(import.meta.dirname, '..');
const OUT = path.join(ROOT, 'docs/console');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const EMAIL = 'admin@demo.example';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/** A caller with a cookie jar and the CSRF header, as a browser would send them. */
class Session {
  private readonly cookies = new Map<string, string>();
  constructor(private readonly base: string) {}

  async call<T = any>(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const h: Record<string, string> = { ...headers };
    if (this.cookies.size > 0) h.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (method !== 'GET' && this.cookies.has('tollgate_csrf')) h['x-csrf-token'] = this.cookies.get('tollgate_csrf')!;
    if (body !== undefined) h['content-type'] = 'application/json';
    const res = await fetch(`${this.base}/api/v1${url}`, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const [name, ...value] = pair!.split('=');
      this.cookies.set(name!.trim(), value.join('='));
    }
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }
}

async function agentToken(base: string, identity: { client_id: string; client_secret: string }): Promise<string> {
  const res = await fetch(`${base}/api/v1/identities/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
  });
  return ((await res.json()) as { access_token: string }).access_token;
}

let keys = 0;
async function submit(base: string, token: string, body: Record<string, unknown>): Promise<any> {
  const res = await fetch(`${base}/api/v1/actions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'idempotency-key': `screenshot-${Date.now()}-${++keys}` },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`POST /actions: ${res.status} ${await res.text()}`);
  return res.json();
}

/** The demo organisation after a little use. */
async function fill(base: string): Promise<{ agentId: string; approvalId: string; actionId: string }> {
  const admin = new Session(base);
  await admin.call('POST', '/auth/dev-login', { email: EMAIL });
  await admin.call('POST', '/users', { email: 'grace@demo.example', display_name: 'Grace Hopper', roles: ['approver'] });
  const tools = Object.fromEntries(((await admin.call('GET', '/tools')).items as Array<{ id: string; tool_key: string }>).map((t) => [t.tool_key, t.id]));
  const agents: Record<string, { id: string; token: string }> = {};
  for (const [name, environment, classification] of [
    ['Payments agent', 'production', 'confidential'],
    ['Support copilot', 'production', 'internal'],
    ['Data pipeline agent', 'staging', 'restricted'],
  ] as const) {
    const agent = await admin.call('POST', '/agents', {
      name,
      purpose: `${name}: demo`,
      environment,
      data_classification: classification,
      owners: [{ name: 'Demo Administrator', email: EMAIL }],
    });
    const identity = await admin.call('POST', `/agents/${agent.id}/identities`);
    agents[name] = { id: agent.id, token: await agentToken(base, identity) };
  }
  const bind = (agent: string, tool: string, constraints: Record<string, unknown> = {}) =>
    admin.call('POST', `/agents/${agents[agent]!.id}/permissions`, { target_kind: 'tool', target_id: tools[tool], actions: ['invoke'], constraints });
  await bind('Payments agent', 'payments.create_payment', { max_amount: 500 });
  await bind('Payments agent', 'crm.lookup_customer');
  await bind('Support copilot', 'crm.lookup_customer');
  await bind('Data pipeline agent', 'storage.delete_object');

  const pay = agents['Payments agent']!.token;
  const support = agents['Support copilot']!.token;
  for (let i = 0; i < 6; i++) await submit(base, support, { tool: 'crm.lookup_customer', target: `crm://customers/${40 + i}`, parameters: { customer_id: String(40 + i) } });
  await submit(base, support, { tool: 'email.send_message', target: 'mailto://customer@example.com', parameters: { subject: 'Refund' } });
  await submit(base, pay, { tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 900, currency: 'EUR', payee: 'acme' } });
  await submit(base, pay, { tool: 'crm.lookup_customer', target: 'crm://customers/7', parameters: { customer_id: '7', note: 'AKIAQWERTYUIOPASDFGH' } });
  const held = await submit(base, pay, {
    tool: 'payments.create_payment',
    target: 'payee://suppliers/globex',
    parameters: { amount: 240, currency: 'EUR', payee: 'globex', invoice: 'INV-2026-118' },
    justification: 'Supplier invoice INV-2026-118, due on Friday',
  });
  await submit(base, pay, { tool: 'payments.create_payment', target: 'payee://suppliers/initech', parameters: { amount: 75, currency: 'EUR', payee: 'initech' } });

  const integration = await admin.call('POST', '/integrations', { kind: 'mcp', name: 'Mock MCP estate' });
  await admin.call('POST', `/connectors/${integration.connector.id}/run`, {});
  for (let i = 0; i < 60; i++) {
    const runs = (await admin.call('GET', `/connectors/${integration.connector.id}/runs`)).items as Array<{ status: string }>;
    if (runs.every((r) => r.status !== 'running')) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await admin.call('POST', '/graph/rebuild', {}).catch(() => undefined);
  for (const a of Object.values(agents)) await admin.call('POST', `/risks/agents/${a.id}/recalculate`, {}).catch(() => undefined);
  return { agentId: agents['Payments agent']!.id, approvalId: held.approval.id, actionId: held.action.id };
}

async function shoot(page: Page, url: string, name: string, ready: (p: Page) => Promise<unknown>): Promise<void> {
  await page.goto(url);
  await ready(page);
  // Let charts and the graph's layout settle before the picture.
  await page.waitForLoadState('networkidle');
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(OUT, `${name}.png`) });
  console.log(`docs/console/${name}.png`);
}

async function main(): Promise<void> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const api: ChildProcess = spawn(process.execPath, ['dist/cli.js', 'api'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', DATA_DIR: 'memory://', SEED_DEMO: 'true', PORT: String(port), LOG_LEVEL: 'warn', JOB_POLL_INTERVAL_SECONDS: '0.5' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    for (let i = 0; ; i++) {
      const ok = await fetch(`${base}/readyz`).then((r) => r.ok, () => false);
      if (ok) break;
      if (i > 120) throw new Error('tollgate api did not become ready');
      await new Promise((r) => setTimeout(r, 250));
    }
    const { agentId, approvalId, actionId } = await fill(base);
    mkdirSync(OUT, { recursive: true });
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const context = await browser.newContext({ baseURL: base, viewport: { width: 1366, height: 860 } });
    const page = await context.newPage();
    await page.goto('/sign-in');
    await page.screenshot({ path: path.join(OUT, 'sign-in.png') });
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    const h1 = (p: Page) => p.getByRole('heading', { level: 1 }).first().waitFor();
    await shoot(page, '/', 'dashboard', h1);
    await shoot(page, '/approvals', 'approvals', (p) => p.getByRole('row').filter({ hasText: 'payments.create_payment' }).first().waitFor());
    await shoot(page, `/approvals/${approvalId}`, 'approval', (p) => p.getByRole('region', { name: 'The request' }).waitFor());
    await shoot(page, '/agents', 'agents', (p) => p.getByRole('row').filter({ hasText: 'Payments agent' }).first().waitFor());
    await shoot(page, `/agents/${agentId}`, 'agent', h1);
    await shoot(page, '/actions', 'actions', h1);
    await shoot(page, `/actions/${actionId}`, 'action', h1);
    await shoot(page, '/evidence', 'evidence', async (p) => {
      await h1(p);
      const verify = p.getByRole('button', { name: /verify chain/i });
      if (await verify.count()) await verify.first().click();
    });
    await shoot(page, '/policies', 'policies', h1);
    await shoot(page, '/inventory', 'inventory', h1);
    await shoot(page, '/findings', 'findings', h1);
    await shoot(page, `/graph?agent=${agentId}`, 'graph', async (p) => {
      await h1(p);
      // The picture sits below the search forms: bring it into the frame.
      await p.getByRole('heading', { name: 'Picture' }).scrollIntoViewIfNeeded();
      await p.mouse.wheel(0, 420);
    });
    await shoot(page, '/risk', 'risk', h1);
    await shoot(page, '/governance', 'governance', h1);
    await shoot(page, '/reports', 'reports', h1);
    await shoot(page, '/integrations', 'integrations', h1);
    await browser.close();
  } finally {
    api.kill('SIGTERM');
  }
}

await main();
