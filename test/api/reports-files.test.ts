import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlId } from '../../api/modules/governance/index.js';
import { verifyBundle } from '../../api/modules/evidence/index.js';
import { parseCsv } from '../../api/modules/reports/csv.js';
import { INVENTORY_COLUMNS } from '../../api/modules/reports/documents/agent-inventory.js';
import { READINESS_COLUMNS } from '../../api/modules/reports/documents/governance-readiness.js';
import { REGISTER_COLUMNS } from '../../api/modules/reports/documents/risk-register.js';
import { api, onboardAdmin, setPlan, startTestApp, TestClock, type Client, type TestApp } from '../support/harness.js';

/**
 * The files reports come as, built by the in-process worker from a real fixture (agents in three environments
 * with owners and granted tools, gateway decisions allowed and denied, a finding, risk scores from the risk job,
 * a governance exception and remediation task, evidence): every PDF kind rendered to PNG with pdftoppm (Debian's
 * poppler-utils; `make pdftools`) and every page checked not blank, its text extracted with pdftotext and checked
 * for the title, the organisation, agents and "Page n of m" on every page; the CSV kinds parsed; the evidence
 * bundle verified.
 */

const NOW = '2026-11-23T09:00:00.000Z';
const ORG = 'Fixture Reports Organisation';
/** A name a spreadsheet would run as a formula. */
const FORMULA_AGENT = '=HYPERLINK("http://attacker.example","open me")';

type Report = { id: string; status: string; file_name: string | null; error: string | null; content_type: string | null };

/** What pdftoppm and pdftotext make of a PDF. */
interface RenderedPdf {
  pages: number;
  /** The text of each page, in order (pdftotext separates pages with form feeds). */
  text: string[];
  /** Per page, the share of dark pixels in the page's body (between the running header and the footer). */
  ink: number[];
  pngs: number;
}

function renderPdf(bytes: Buffer): RenderedPdf {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-report-'));
  try {
    const file = path.join(dir, 'report.pdf');
    writeFileSync(file, bytes);
    execFileSync('pdftoppm', ['-png', '-r', '50', file, path.join(dir, 'page')]);
    const pngs = readdirSync(dir).filter((f) => f.startsWith('page') && f.endsWith('.png'));
    for (const png of pngs) expect(readFileSync(path.join(dir, png)).subarray(1, 4).toString('latin1')).toBe('PNG');
    // The same pages in grey (PGM: a short header, then one byte per pixel) to count the ink.
    execFileSync('pdftoppm', ['-gray', '-r', '50', file, path.join(dir, 'grey')]);
    const greys = readdirSync(dir)
      .filter((f) => f.startsWith('grey') && f.endsWith('.pgm'))
      .sort();
    const ink = greys.map((g) => {
      const data = readFileSync(path.join(dir, g));
      const header = /^P5\s+(\d+)\s+(\d+)\s+(\d+)\s/.exec(data.subarray(0, 40).toString('latin1'));
      expect(header).not.toBeNull();
      const [w, h] = [Number(header![1]), Number(header![2])];
      const pixels = data.subarray(header![0].length);
      expect(pixels.length).toBe(w * h);
      const [top, bottom] = [Math.floor(h * 0.09), Math.floor(h * 0.9)];
      let dark = 0;
      for (let i = top * w; i < bottom * w; i++) if (pixels[i]! < 200) dark++;
      return dark / ((bottom - top) * w);
    });
    const text = execFileSync('pdftotext', [file, '-']).toString('utf8').split('\f').slice(0, greys.length);
    return { pages: greys.length, text, ink, pngs: pngs.length };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every page's text with its line breaks and runs of spaces as one space: table cells wrap. */
const words = (pdf: RenderedPdf) => pdf.text.join('\n').replace(/\s+/g, ' ');

/** Every page drawn (not blank), numbered "Page n of m", with the organisation and generation time in the footer. */
function expectReadable(pdf: RenderedPdf, title: string): void {
  expect(pdf.pages).toBeGreaterThanOrEqual(2);
  expect(pdf.pngs).toBe(pdf.pages);
  // A page with nothing but its running header and footer has no ink at all between them.
  pdf.ink.forEach((share, i) => expect(share, `page ${i + 1} is blank`).toBeGreaterThan(0.001));
  pdf.text.forEach((page, i) => {
    expect(page, `page ${i + 1}`).toContain(`Page ${i + 1} of ${pdf.pages}`);
    expect(page, `page ${i + 1}`).toContain(ORG);
    expect(page, `page ${i + 1}`).toContain('generated 2026-11-23 09:01 UTC');
    if (i > 0) expect(page, `running header of page ${i + 1}`).toContain(title);
  });
  expect(pdf.text[0]).toContain(title);
  expect(pdf.text[0]).toContain('Contents');
}

describe('report files', () => {
  let t: TestApp;
  const clock = new TestClock(new Date(NOW));
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  const agents: Record<string, string> = {};
  let keyN = 0;

  const owner = async <T = any>(text: string, values: unknown[] = []): Promise<T[]> => {
    const c = new pg.Client({ connectionString: t.ownerUrl });
    await c.connect();
    try {
      return (await c.query(text, values)).rows as T[];
    } finally {
      await c.end();
    }
  };

  /** Asks for a report, waits for the worker, downloads it. */
  async function report(client: Client, kind: string, parameters: Record<string, unknown> = {}) {
    const created = await client.post(api('/reports'), { kind, parameters });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    const deadline = Date.now() + 60_000;
    let r: Report | undefined;
    for (;;) {
      r = ((await client.get(api('/reports?limit=200'))).json().items as Report[]).find((x) => x.id === id);
      if (r && (r.status === 'ready' || r.status === 'failed')) break;
      if (Date.now() > deadline) throw new Error(`${kind} still ${r?.status} after 60 s`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(r.status, r.error ?? '').toBe('ready');
    const res = await client.get(api(`/reports/${id}/download`));
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-disposition']).toBe(`attachment; filename="${r.file_name}"`);
    return { report: r, bytes: res.rawPayload, type: res.headers['content-type'] as string };
  }

  beforeAll(async () => {
    t = await startTestApp({ clock, worker: true, env: { JOB_POLL_INTERVAL_SECONDS: '0.5', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    admin = await onboardAdmin(t.app, ORG);
    await setPlan(t, admin.tenant.id, 'enterprise');
    const c = admin.client;
    const owners = [
      { name: 'Olga Owner', email: 'olga@example.com', owner_type: 'accountable' },
      { name: 'Theo Technical', email: 'theo@example.com', owner_type: 'technical' },
    ];
    for (const [name, environment, extra] of [
      ['Ledger Reconciler', 'production', { purpose: 'Reconciles the ledger every night', data_classification: 'confidential', owners }],
      ['Support Triage Bot', 'staging', {}],
      [FORMULA_AGENT, 'development', {}],
      ['Legacy Mailer', 'development', {}],
    ] as const) {
      const res = await c.post(api('/agents'), { name, environment, ...extra });
      expect(res.statusCode, res.body).toBe(201);
      agents[name] = res.json().id;
    }
    expect((await c.post(api(`/agents/${agents['Legacy Mailer']}/revoke`), { reason: 'decommissioned', confirm: true })).statusCode).toBe(200);

    const tools = Object.fromEntries((await c.get(api('/tools'))).json().items.map((x: { tool_key: string; id: string }) => [x.tool_key, x.id]));
    const ledger = agents['Ledger Reconciler']!;
    for (const [toolKey, constraints] of [
      ['crm.lookup_customer', {}],
      ['payments.create_payment', { max_amount: 500, currency: 'EUR' }],
    ] as const) {
      const res = await c.post(api(`/agents/${ledger}/permissions`), { target_kind: 'tool', target_id: tools[toolKey], actions: ['invoke'], constraints });
      expect(res.statusCode, res.body).toBe(201);
    }

    // Decisions through the gateway: allowed, and denied (over the constraint, and a tool not granted).
    const identity = (await c.post(api(`/agents/${ledger}/identities`))).json();
    const token = (
      await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      })
    ).json().access_token as string;
    const submit = async (body: Record<string, unknown>) => {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': `reports-${++keyN}-${randomUUID()}` },
        payload: body,
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().decision.decision as string;
    };
    const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/7', parameters: { customer_id: '7' } };
    expect(await submit(lookup)).toBe('allow');
    expect(await submit(lookup)).toBe('allow');
    expect(await submit({ tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount: 900, currency: 'EUR' } })).toBe('deny');
    expect(await submit({ ...lookup, tool: 'crm.export_all' })).toBe('deny');

    // A finding, as discovery would open it.
    await owner(
      `insert into findings (id, org_id, category, severity, status, title, agent_id, dedupe_key)
       values ($1::uuid, $2, 'tool_poisoning', 'critical', 'open', 'Tool description hides instructions for the model', $3, $1::text)`,
      [randomUUID(), admin.tenant.id, ledger],
    );
    // Governance: an exception in force for the whole organisation, and an open remediation task.
    await owner(
      `insert into governance_exceptions (id, org_id, control_id, title, justification, owner_email, expires_at, status,
         requested_by, requested_by_type, created_at, decided_by, decided_at)
       values ($1, $2, $3, 'Oversight by weekly sampling', 'Human oversight is sampled weekly until the console ships.', 'olga@example.com',
         '2027-01-31T00:00:00Z', 'approved', $4, 'person', $5, $4, $5)`,
      [randomUUID(), admin.tenant.id, controlId('eu-ai-act', 'Art.14'), admin.userId, NOW],
    );
    await owner(
      `insert into governance_remediation_tasks (id, org_id, title, control_id, agent_id, assignee_email, due_at, priority, status, created_at, updated_at)
       values ($1, $2, 'Write the risk management plan for the ledger', $3, $4, 'theo@example.com', '2026-12-15T00:00:00Z', 'high', 'open', $5, $5)`,
      [randomUUID(), admin.tenant.id, controlId('eu-ai-act', 'Art.9'), ledger, NOW],
    );

    // The risk job scores the agents by itself (its triggers fired on every change above).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [row] = await owner(`select count(*)::int as n from risk_scores where org_id = $1`, [admin.tenant.id]);
      if (row.n >= 4) break;
      if (Date.now() > deadline) throw new Error('the agents were not scored within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // Generated a minute later: the evidence of the fixture lies before the bundle's end.
    clock.advance(60);
  }, 120_000);
  afterAll(async () => t?.close());

  it('executive_summary: a readable PDF with the numbers, charts and readiness', async () => {
    const { report: r, bytes, type } = await report(admin.client, 'executive_summary', { days: 14 });
    expect(type).toBe('application/pdf');
    expect(r.file_name).toBe(`executive_summary-${admin.tenant.slug}-20261123-0901.pdf`);
    const pdf = renderPdf(bytes);
    expectReadable(pdf, 'Executive summary');
    const all = words(pdf);
    expect(pdf.text[0]).toContain('14 days, 2026-11-10 to 2026-11-23 (UTC)');
    for (const heading of ['At a glance', 'Decisions over time', 'Top deny reasons', 'Agents by risk band', 'Average risk score per day', 'Highest-risk agents', 'Open findings', 'Governance readiness']) {
      expect(all).toContain(heading);
    }
    expect(all).toContain('Ledger Reconciler');
    expect(all).toContain('PERMISSION_CONSTRAINT_EXCEEDED');
    expect(all).toContain('Allowed (2)');
    expect(all).toContain('Denied (2)');
    expect(all).toContain('EU AI Act');
  });

  it('agent_inventory: every agent with owners, risk and granted tools; the formula name shown as text', async () => {
    const { bytes, type } = await report(admin.client, 'agent_inventory');
    expect(type).toBe('application/pdf');
    const pdf = renderPdf(bytes);
    expectReadable(pdf, 'Agent inventory');
    const all = words(pdf);
    for (const name of ['Ledger Reconciler', 'Support Triage Bot', 'Legacy Mailer', 'HYPERLINK']) expect(all).toContain(name);
    expect(all).toContain('Olga Owner (accountable)');
    expect(all).toContain('crm.lookup_customer');
    expect(all).toContain('payments.create_payment');
    expect(all).toContain('revoked');
  });

  it('agent_inventory filtered to production and without revoked agents lists only those', async () => {
    const pdf = renderPdf((await report(admin.client, 'agent_inventory', { environment: 'production' })).bytes);
    expectReadable(pdf, 'Agent inventory');
    const all = words(pdf);
    expect(all).toContain('Ledger Reconciler');
    expect(all).not.toContain('Support Triage Bot');
    const csv = parseCsv((await report(admin.client, 'agent_inventory', { format: 'csv', include_revoked: false })).bytes.toString('utf8'));
    expect(csv.slice(1).map((r) => r[1]).sort()).toEqual(['Ledger Reconciler', 'Support Triage Bot', `'${FORMULA_AGENT}`].sort());
  });

  it('agent_inventory as CSV: one row per agent, tools and owners joined, the formula guarded', async () => {
    const { report: r, bytes, type } = await report(admin.client, 'agent_inventory', { format: 'csv' });
    expect(type).toBe('text/csv; charset=utf-8');
    expect(r.file_name).toBe(`agent_inventory-${admin.tenant.slug}-20261123-0901.csv`);
    const text = bytes.toString('utf8');
    expect(text.startsWith('\uFEFF')).toBe(true);
    expect(text.endsWith('\r\n')).toBe(true);
    const [header, ...rows] = parseCsv(text);
    expect(header).toEqual([...INVENTORY_COLUMNS]);
    expect(rows).toHaveLength(4);
    const col = (name: string) => header!.indexOf(name);
    const byName = Object.fromEntries(rows.map((row) => [row[col('name')], row]));
    const ledger = byName['Ledger Reconciler']!;
    expect(ledger[col('agent_id')]).toBe(agents['Ledger Reconciler']);
    expect(ledger[col('environment')]).toBe('production');
    expect(ledger[col('tools_granted')]).toBe('crm.lookup_customer; payments.create_payment');
    expect(ledger[col('tools_granted_count')]).toBe('2');
    expect(ledger[col('owners')]).toBe('Olga Owner <olga@example.com> (accountable); Theo Technical <theo@example.com> (technical)');
    expect(['low', 'medium', 'high', 'critical']).toContain(ledger[col('risk_band')]);
    expect(byName['Legacy Mailer']![col('status')]).toBe('revoked');
    // The name a spreadsheet would run is text, and nothing else starts like a formula.
    expect(byName[`'${FORMULA_AGENT}`]).toBeDefined();
    for (const row of rows) for (const cell of row) expect(cell).not.toMatch(/^[=+\-@\t\r]/);
  });

  it('risk_register: a readable PDF with the register and the open findings; as CSV, ranked by score', async () => {
    const pdf = renderPdf((await report(admin.client, 'risk_register')).bytes);
    expectReadable(pdf, 'Risk register');
    const all = words(pdf);
    expect(all).toContain('Register');
    expect(all).toContain('Ledger Reconciler');
    expect(all).toContain('Tool description hides instructions for the model');
    expect(all).toContain('1 finding open or in progress.');

    const { bytes, type } = await report(admin.client, 'risk_register', { format: 'csv' });
    expect(type).toBe('text/csv; charset=utf-8');
    const [header, ...rows] = parseCsv(bytes.toString('utf8'));
    expect(header).toEqual([...REGISTER_COLUMNS]);
    expect(rows).toHaveLength(4);
    expect(rows.map((r) => r[0])).toEqual(['1', '2', '3', '4']);
    const scores = rows.map((r) => Number(r[header!.indexOf('score')]));
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    const ledger = rows.find((r) => r[header!.indexOf('agent')] === 'Ledger Reconciler')!;
    expect(Number(ledger[header!.indexOf('open_findings')])).toBe(1);
    expect(ledger[header!.indexOf('top_factors')]).toMatch(/^[a-z_]+ \+\d+: /);
  });

  it('governance_readiness: a readable PDF per framework with the exception and the task; as CSV, one row per control', async () => {
    const pdf = renderPdf((await report(admin.client, 'governance_readiness')).bytes);
    expectReadable(pdf, 'Governance readiness');
    const all = words(pdf);
    for (const text of ['Coverage per framework', 'EU AI Act', 'NIST', 'ISO', 'Exceptions', 'Oversight by weekly sampling', 'eu-ai-act Art.14', 'Open remediation', 'Write the risk management plan for the ledger', 'theo@example.com']) {
      expect(all).toContain(text);
    }

    const everything = parseCsv((await report(admin.client, 'governance_readiness', { format: 'csv' })).bytes.toString('utf8'));
    expect(everything[0]).toEqual([...READINESS_COLUMNS]);
    const frameworks = new Set(everything.slice(1).map((r) => r[0]));
    expect([...frameworks].sort()).toEqual(['eu-ai-act', 'iso-42001', 'nist-ai-rmf']);
    const [header, ...rows] = parseCsv((await report(admin.client, 'governance_readiness', { format: 'csv', framework: 'eu-ai-act' })).bytes.toString('utf8'));
    expect(new Set(rows.map((r) => r[0]))).toEqual(new Set(['eu-ai-act']));
    const art = (ref: string) => rows.find((r) => r[header!.indexOf('control_ref')] === ref)!;
    // The open task makes Art.9 not met; Art.14 is met by evidence or excepted by the exception.
    expect(art('Art.9')[header!.indexOf('status')]).toBe('not_met');
    expect(art('Art.9')[header!.indexOf('why')]).toContain('Write the risk management plan for the ledger');
    expect(['met', 'excepted']).toContain(art('Art.14')[header!.indexOf('status')]);
  });

  it('evidence_bundle: a gzipped tar archive of the window that verifies', async () => {
    const { report: r, bytes, type } = await report(admin.client, 'evidence_bundle');
    expect(type).toBe('application/gzip');
    expect(r.file_name).toBe(`evidence_bundle-${admin.tenant.slug}-20261123-0901.tar.gz`);
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const verdict = await verifyBundle(bytes);
    expect(verdict.broken).toBeNull();
    expect(verdict.valid).toBe(true);
    expect(verdict.records).toBeGreaterThan(0);
    expect(verdict.manifest!.window).toEqual({ since: '2026-10-24T09:01:00.000Z', until: '2026-11-23T09:01:00.000Z' });
  });
});
