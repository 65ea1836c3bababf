import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportsJobHandler } from '../../api/modules/reports/index.js';
import { generateReport } from '../../api/modules/reports/reports.service.js';
import type { DeadLetterContext } from '../../api/platform/jobs.js';
import { addMember, api, expectValidation, onboardAdmin, startTestApp, TestClock, type Client, type TestApp } from '../support/harness.js';

/**
 * The reports operations on real PostgreSQL with the in-process worker: the catalogue of kinds, asking for a
 * report (parameters checked per kind, defaults stored), the worker making it ready, the list, the download and
 * its refusals (not ready, failed, another organisation's, no permission), the notification of its creator, the
 * audit trail, and the job's guarantees (completes once, the dead letter fails it, stored parameters rechecked).
 * The files themselves (PDF pages, CSV rows, the evidence bundle) are checked in reports-files.test.ts.
 */

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Report = {
  id: string;
  kind: string;
  parameters: Record<string, unknown>;
  format: string;
  status: string;
  content_type: string | null;
  file_name: string | null;
  size: number | null;
  error: string | null;
  created_by: string | null;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
};

const NOW = '2026-11-23T09:00:00.000Z';

describe('reports', () => {
  let t: TestApp;
  const clock = new TestClock(new Date(NOW));
  let admin: Admin;
  let other: Admin;
  let auditor: Awaited<ReturnType<typeof addMember>>;
  let approver: Awaited<ReturnType<typeof addMember>>;

  /** A statement as the database owner (past row-level security), for what no operation writes. */
  const owner = async <T = any>(text: string, values: unknown[] = []): Promise<T[]> => {
    const c = new pg.Client({ connectionString: t.ownerUrl });
    await c.connect();
    try {
      return (await c.query(text, values)).rows as T[];
    } finally {
      await c.end();
    }
  };

  async function create(client: Client, body: Record<string, unknown>): Promise<Report> {
    const res = await client.post(api('/reports'), body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }

  async function finished(client: Client, id: string): Promise<Report> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = ((await client.get(api('/reports?limit=200'))).json().items as Report[]).find((x) => x.id === id);
      if (r && (r.status === 'ready' || r.status === 'failed')) return r;
      if (Date.now() > deadline) throw new Error(`report ${id} still ${r?.status} after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  }

  /** A report row planted as the owner, in a state the worker will not touch (no job behind it). */
  const plant = async (orgId: string, userId: string, row: { status: string; kind?: string; parameters?: object; error?: string }) => {
    const id = randomUUID();
    const done = row.status === 'failed' || row.status === 'ready';
    await owner(
      `insert into reports (id, org_id, kind, parameters, format, status, error, created_by, created_by_type, correlation_id, created_at, started_at, completed_at)
       values ($1, $2, $3, $4, 'pdf', $5, $6, $7, 'person', 'planted', $8, $9, $10)`,
      [id, orgId, row.kind ?? 'executive_summary', JSON.stringify(row.parameters ?? { format: 'pdf', days: 30 }), row.status, row.error ?? null, userId, NOW, row.status === 'queued' ? null : NOW, done ? NOW : null],
    );
    return id;
  };

  const deps = () => ({ db: t.app.deps.db, clock, evidence: t.app.deps.evidence, log: t.app.log });

  beforeAll(async () => {
    t = await startTestApp({ clock, worker: true, env: { JOB_POLL_INTERVAL_SECONDS: '0.5', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app, 'Reports Org');
    other = await onboardAdmin(t.app, 'Other Reports Org');
    auditor = await addMember(t.app, admin.client, ['auditor']);
    approver = await addMember(t.app, admin.client, ['approver']);
    const agent = await admin.client.post(api('/agents'), { name: 'Report subject', environment: 'development' });
    expect(agent.statusCode, agent.body).toBe(201);
  });
  afterAll(async () => t?.close());

  describe('GET /reports/kinds', () => {
    it('lists the five kinds of the spec with their formats, contents and parameters as JSON Schema', async () => {
      const res = await admin.client.get(api('/reports/kinds'));
      expect(res.statusCode).toBe(200);
      const items = res.json().items as Array<{ kind: string; title: string; formats: string[]; contents: string[]; parameters: any }>;
      expect(items.map((k) => k.kind)).toEqual(['executive_summary', 'agent_inventory', 'risk_register', 'governance_readiness', 'evidence_bundle']);
      const byKind = Object.fromEntries(items.map((k) => [k.kind, k]));
      expect(byKind.executive_summary!.formats).toEqual(['pdf']);
      expect(byKind.agent_inventory!.formats).toEqual(['pdf', 'csv']);
      expect(byKind.risk_register!.formats).toEqual(['pdf', 'csv']);
      expect(byKind.governance_readiness!.formats).toEqual(['pdf', 'csv']);
      expect(byKind.evidence_bundle!.formats).toEqual(['tar.gz']);
      for (const k of items) {
        expect(k.title.length).toBeGreaterThan(3);
        expect(k.contents.length).toBeGreaterThan(0);
        expect(k.parameters).toMatchObject({ type: 'object', additionalProperties: false });
      }
      expect(byKind.executive_summary!.parameters.properties.days).toMatchObject({ type: 'integer', minimum: 1, maximum: 365, default: 30 });
      expect(byKind.agent_inventory!.parameters.properties.environment.enum).toEqual(['production', 'staging', 'development']);
      expect(byKind.risk_register!.parameters.properties.min_band.enum).toEqual(['low', 'medium', 'high', 'critical']);
      expect(byKind.governance_readiness!.parameters.properties.framework.enum).toEqual(expect.arrayContaining(['eu-ai-act', 'iso-42001', 'nist-ai-rmf']));
      expect(Object.keys(byKind.evidence_bundle!.parameters.properties).sort()).toEqual(['format', 'since', 'until']);
    });

    it('needs report:read', async () => {
      const res = await approver.client.get(api('/reports/kinds'));
      expect(res.statusCode).toBe(403);
      expect(res.json().error.details.required_permission).toBe('report:read');
    });
  });

  describe('POST /reports', () => {
    it('answers 201 with the report queued and its parameters stored with their defaults', async () => {
      const r = await create(admin.client, { kind: 'executive_summary' });
      expect(r).toMatchObject({
        kind: 'executive_summary',
        parameters: { format: 'pdf', days: 30 },
        format: 'pdf',
        status: 'queued',
        content_type: null,
        file_name: null,
        size: null,
        error: null,
        created_by: admin.userId,
        created_at: NOW,
        started_at: null,
        completed_at: null,
      });
      expect((await create(admin.client, { kind: 'agent_inventory', parameters: { format: 'csv', environment: 'staging' } })).parameters).toEqual({
        format: 'csv',
        environment: 'staging',
        include_revoked: true,
      });
      expect((await create(admin.client, { kind: 'risk_register', parameters: {} })).parameters).toEqual({ format: 'pdf', days: 30, min_band: 'low' });
      expect((await create(admin.client, { kind: 'governance_readiness', parameters: { framework: 'eu-ai-act' } })).parameters).toEqual({
        format: 'pdf',
        framework: 'eu-ai-act',
        days: 90,
      });
    });

    it("fills in the evidence bundle's window: until now, since 30 days before", async () => {
      const r = await create(admin.client, { kind: 'evidence_bundle' });
      expect(r.format).toBe('tar.gz');
      expect(r.parameters).toEqual({ format: 'tar.gz', since: '2026-10-24T09:00:00.000Z', until: NOW });
      const given = await create(admin.client, { kind: 'evidence_bundle', parameters: { since: '2026-11-01T00:00:00Z' } });
      expect(given.parameters).toEqual({ format: 'tar.gz', since: '2026-11-01T00:00:00.000Z', until: NOW });
    });

    it.each([
      ['no kind', {}, 'kind'],
      ['an unknown kind', { kind: 'weekly_digest' }, 'kind'],
      ['parameters that are not an object', { kind: 'risk_register', parameters: [] }, 'parameters'],
      ['days 0', { kind: 'executive_summary', parameters: { days: 0 } }, 'parameters.days'],
      ['days 366', { kind: 'risk_register', parameters: { days: 366 } }, 'parameters.days'],
      ['days not an integer', { kind: 'executive_summary', parameters: { days: 1.5 } }, 'parameters.days'],
      ['CSV of a kind that has none', { kind: 'executive_summary', parameters: { format: 'csv' } }, 'parameters.format'],
      ['a format no kind has', { kind: 'agent_inventory', parameters: { format: 'xlsx' } }, 'parameters.format'],
      ['an unknown environment', { kind: 'agent_inventory', parameters: { environment: 'prod' } }, 'parameters.environment'],
      ['an unknown band', { kind: 'risk_register', parameters: { min_band: 'severe' } }, 'parameters.min_band'],
      ['an unknown framework', { kind: 'governance_readiness', parameters: { framework: 'sox' } }, 'parameters.framework'],
      ['a key the kind does not take', { kind: 'executive_summary', parameters: { days: 7, environment: 'production' } }, 'parameters'],
      ["another kind's key", { kind: 'agent_inventory', parameters: { min_band: 'high' } }, 'parameters'],
      ['since that is not a date-time', { kind: 'evidence_bundle', parameters: { since: 'yesterday' } }, 'parameters.since'],
      ['until before since', { kind: 'evidence_bundle', parameters: { since: '2026-11-10T00:00:00Z', until: '2026-11-01T00:00:00Z' } }, 'parameters.until'],
      ['until equal to since', { kind: 'evidence_bundle', parameters: { since: '2026-11-10T00:00:00Z', until: '2026-11-10T00:00:00Z' } }, 'parameters.until'],
      ['a window over 366 days', { kind: 'evidence_bundle', parameters: { since: '2025-01-01T00:00:00Z', until: '2026-11-01T00:00:00Z' } }, 'parameters.until'],
      ['since over 366 days before now', { kind: 'evidence_bundle', parameters: { since: '2025-10-01T00:00:00Z' } }, 'parameters.since'],
      ['until in the future', { kind: 'evidence_bundle', parameters: { until: '2026-11-24T00:00:00Z' } }, 'parameters.until'],
      ['since after now', { kind: 'evidence_bundle', parameters: { since: '2026-11-30T00:00:00Z' } }, 'parameters.since'],
    ])('answers 422 for %s, naming the field', async (_what, body, field) => {
      const res = await admin.client.post(api('/reports'), body);
      expectValidation(res, field);
    });

    it('says which key is not taken', async () => {
      const res = await admin.client.post(api('/reports'), { kind: 'executive_summary', parameters: { colour: 'blue' } });
      expectValidation(res, 'parameters');
      expect(JSON.stringify(res.json().error.details)).toContain('colour');
    });

    it('needs report:create: an approver is refused, an auditor may', async () => {
      const refused = await approver.client.post(api('/reports'), { kind: 'executive_summary' });
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error.details.required_permission).toBe('report:create');
      await create(auditor.client, { kind: 'agent_inventory' });
    });

    it('a service account with report:create may ask with its token; it is recorded as such and nobody is notified', async () => {
      const sa = (await admin.client.post(api('/service-accounts'), { name: 'report-robot', roles: ['auditor'] })).json();
      const token = (
        await t.app.inject({
          method: 'POST',
          url: api('/service-accounts/token'),
          payload: { grant_type: 'client_credentials', client_id: sa.client_id, client_secret: sa.client_secret },
        })
      ).json().access_token as string;
      const res = await t.app.inject({
        method: 'POST',
        url: api('/reports'),
        headers: { authorization: `Bearer ${token}` },
        payload: { kind: 'agent_inventory', parameters: { format: 'csv' } },
      });
      expect(res.statusCode, res.body).toBe(201);
      const r = await finished(admin.client, res.json().id);
      expect(r).toMatchObject({ status: 'ready', created_by: sa.id });
      const [row] = await owner(`select created_by_type from reports where id = $1`, [r.id]);
      expect(row.created_by_type).toBe('service_account');
      const notified = await owner(`select count(*)::int as n from notifications where body like $1`, [`%${r.id}%`]);
      expect(notified[0].n).toBe(0);
      const download = await t.app.inject({ method: 'GET', url: api(`/reports/${r.id}/download`), headers: { authorization: `Bearer ${token}` } });
      expect(download.statusCode).toBe(200);
      const created = (await admin.client.get(api(`/audit?action=report.created&target_id=${r.id}`))).json().items;
      expect(created[0].actor).toEqual({ type: 'service_account', id: sa.id });
    });

    it('is audited as the person who asked', async () => {
      const r = await create(admin.client, { kind: 'risk_register', parameters: { min_band: 'high' } });
      const entries = (await admin.client.get(api(`/audit?action=report.created&target_id=${r.id}`))).json().items;
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({ actor: { type: 'person', id: admin.userId }, target_type: 'report', target_id: r.id, correlation_id: expect.any(String) });
      expect(entries[0].details).toMatchObject({ kind: 'risk_register', format: 'pdf', parameters: { min_band: 'high', days: 30, format: 'pdf' } });
    });
  });

  describe('generation and download', () => {
    it('the worker makes a report ready; the download has its media type and file name, and is audited', async () => {
      const queued = await create(auditor.client, { kind: 'agent_inventory', parameters: { format: 'csv' } });
      const r = await finished(auditor.client, queued.id);
      expect(r).toMatchObject({ status: 'ready', content_type: 'text/csv; charset=utf-8', error: null, started_at: NOW, completed_at: NOW });
      expect(r.file_name).toBe(`agent_inventory-${admin.tenant.slug}-20261123-0900.csv`);
      const res = await auditor.client.get(api(`/reports/${r.id}/download`));
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.headers['content-disposition']).toBe(`attachment; filename="${r.file_name}"`);
      expect(res.rawPayload.length).toBe(r.size);
      expect(res.body).toContain('Report subject');
      const audited = (await admin.client.get(api(`/audit?target_id=${r.id}`))).json().items.map((e: { action: string; actor: { type: string } }) => `${e.action}:${e.actor.type}`);
      expect(audited.sort()).toEqual(['report.created:person', 'report.downloaded:person', 'report.generated:system']);
    });

    it('a PDF report downloads as application/pdf', async () => {
      const r = await finished(admin.client, (await create(admin.client, { kind: 'risk_register' })).id);
      expect(r.status).toBe('ready');
      const res = await admin.client.get(api(`/reports/${r.id}/download`));
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/pdf');
      expect(res.headers['content-disposition']).toBe(`attachment; filename="risk_register-${admin.tenant.slug}-20261123-0900.pdf"`);
      expect(res.rawPayload.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    });

    it('notifies the person who asked when the report is ready, and nobody else', async () => {
      const r = await finished(auditor.client, (await create(auditor.client, { kind: 'executive_summary', parameters: { days: 7 } })).id);
      expect(r.status).toBe('ready');
      const notes = (await auditor.client.get(api('/notifications'))).json().items as Array<{ kind: string; title: string; body: string }>;
      const note = notes.find((n) => n.kind === 'report.ready' && n.body.includes(r.id));
      expect(note).toBeDefined();
      expect(note!.title).toBe('Report ready: Executive summary');
      expect(note!.body).toContain(r.file_name!);
      const adminNotes = (await admin.client.get(api('/notifications?limit=200'))).json().items as Array<{ body: string }>;
      expect(adminNotes.some((n) => n.body.includes(r.id))).toBe(false);
    });

    it('answers 409 report_not_ready while queued or running', async () => {
      for (const status of ['queued', 'running']) {
        const id = await plant(admin.tenant.id, admin.userId, { status });
        const res = await admin.client.get(api(`/reports/${id}/download`));
        expect(res.statusCode).toBe(409);
        expect(res.json().error.code).toBe('conflict');
        expect(res.json().error.details).toEqual({ reason: 'report_not_ready', report_id: id, status });
      }
    });

    it('answers 409 report_failed with the error for a failed report', async () => {
      const id = await plant(admin.tenant.id, admin.userId, { status: 'failed', error: 'The report came to 51.0 MB, over the limit of 50.0 MB.' });
      const res = await admin.client.get(api(`/reports/${id}/download`));
      expect(res.statusCode).toBe(409);
      expect(res.json().error.details).toEqual({ reason: 'report_failed', report_id: id, status: 'failed', error: 'The report came to 51.0 MB, over the limit of 50.0 MB.' });
      expect(res.json().error.message).toContain('51.0 MB');
    });

    it("answers 404 for another organisation's report and for an unknown id", async () => {
      const r = await finished(admin.client, (await create(admin.client, { kind: 'agent_inventory', parameters: { format: 'csv' } })).id);
      expect((await other.client.get(api(`/reports/${r.id}/download`))).statusCode).toBe(404);
      expect((await admin.client.get(api(`/reports/${randomUUID()}/download`))).statusCode).toBe(404);
      expectValidation(await admin.client.get(api('/reports/not-a-uuid/download')), 'path.report_id');
    });

    it('needs report:read to download', async () => {
      const r = await finished(admin.client, (await create(admin.client, { kind: 'agent_inventory', parameters: { format: 'csv' } })).id);
      const res = await approver.client.get(api(`/reports/${r.id}/download`));
      expect(res.statusCode).toBe(403);
      expect(res.json().error.details.required_permission).toBe('report:read');
    });
  });

  describe('GET /reports', () => {
    it("lists the organisation's reports newest first, paged, without their files", async () => {
      const fresh = await onboardAdmin(t.app, 'Listing Org');
      const made: string[] = [];
      for (let i = 0; i < 3; i++) {
        made.push((await create(fresh.client, { kind: 'agent_inventory', parameters: { format: 'csv' } })).id);
        clock.advance(1);
      }
      const first = (await fresh.client.get(api('/reports?limit=2'))).json();
      expect(first.items.map((r: Report) => r.id)).toEqual([made[2], made[1]]);
      expect(first.next_cursor).toEqual(expect.any(String));
      const second = (await fresh.client.get(api(`/reports?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`))).json();
      expect(second.items.map((r: Report) => r.id)).toEqual([made[0]]);
      expect(second.next_cursor).toBeNull();
      for (const r of [...first.items, ...second.items]) expect(r).not.toHaveProperty('content');
      // Another organisation sees none of them.
      const theirs = (await other.client.get(api('/reports?limit=200'))).json().items.map((r: Report) => r.id);
      for (const id of made) expect(theirs).not.toContain(id);
      expect((await fresh.client.get(api('/reports?cursor=forged.cursor'))).json().error.code).toBe('invalid_cursor');
      expectValidation(await fresh.client.get(api('/reports?limit=0')), 'query.limit');
    });

    it('needs report:read', async () => {
      expect((await approver.client.get(api('/reports'))).statusCode).toBe(403);
    });
  });

  describe('the job', () => {
    it('completes a report once: running it again changes nothing', async () => {
      const r = await finished(admin.client, (await create(admin.client, { kind: 'agent_inventory', parameters: { format: 'csv' } })).id);
      clock.advance(60);
      await generateReport(deps(), admin.tenant.id, r.id);
      const after = ((await admin.client.get(api('/reports?limit=200'))).json().items as Report[]).find((x) => x.id === r.id)!;
      expect(after).toEqual(r);
      const generated = (await admin.client.get(api(`/audit?action=report.generated&target_id=${r.id}`))).json().items;
      expect(generated).toHaveLength(1);
    });

    it('takes up a report whose earlier attempt died while running', async () => {
      const id = await plant(admin.tenant.id, admin.userId, { status: 'running', kind: 'agent_inventory', parameters: { format: 'csv', include_revoked: true } });
      await generateReport(deps(), admin.tenant.id, id);
      const [row] = await owner(`select status, attempts, started_at, size from reports where id = $1`, [id]);
      expect(row).toMatchObject({ status: 'ready', attempts: 1 });
      expect(row.started_at.toISOString()).toBe(NOW);
      expect(row.size).toBeGreaterThan(0);
    });

    it('fails a report whose stored parameters no longer pass their schema, saying why, and tells its creator', async () => {
      const id = await plant(admin.tenant.id, auditor.userId, { status: 'queued', parameters: { format: 'pdf', days: 9000 } });
      await generateReport(deps(), admin.tenant.id, id);
      const [row] = await owner(`select status, error, content from reports where id = $1`, [id]);
      expect(row.status).toBe('failed');
      expect(row.content).toBeNull();
      expect(row.error).toMatch(/^Its parameters are no longer valid: days: /);
      const notes = (await auditor.client.get(api('/notifications'))).json().items as Array<{ kind: string; title: string; body: string }>;
      const note = notes.find((n) => n.title === 'Report failed: Executive summary');
      expect(note).toMatchObject({ kind: 'report.ready' });
      expect(note!.body).toContain('Its parameters are no longer valid');
      const failed = (await admin.client.get(api(`/audit?action=report.failed&target_id=${id}`))).json().items;
      expect(failed).toHaveLength(1);
      expect(failed[0]).toMatchObject({ actor: { type: 'system', id: null }, outcome: 'failure' });
    });

    it('fails a report whose file would pass the size limit, with its size in the message, and stores no file', async () => {
      const id = await plant(admin.tenant.id, admin.userId, { status: 'queued', kind: 'agent_inventory', parameters: { format: 'pdf', include_revoked: true } });
      await generateReport({ ...deps(), maxBytes: 1024 }, admin.tenant.id, id);
      const [row] = await owner(`select status, error, content, size from reports where id = $1`, [id]);
      expect(row).toMatchObject({ status: 'failed', content: null, size: null });
      expect(row.error).toMatch(/^The report came to \d+ KB, over the limit of 1 KB; ask for less/);
      const res = await admin.client.get(api(`/reports/${id}/download`));
      expect(res.statusCode).toBe(409);
      expect(res.json().error.details).toMatchObject({ reason: 'report_failed', error: row.error });
    });

    it('the dead letter marks a report still running failed, once', async () => {
      const id = await plant(admin.tenant.id, admin.userId, { status: 'running' });
      const ctx = { deps: t.app.deps, jobId: randomUUID(), retryCount: 2, signal: new AbortController().signal, log: t.app.log, error: 'job failed by timeout in active state' } satisfies DeadLetterContext;
      await reportsJobHandler.deadLetter!({ org_id: admin.tenant.id, report_id: id }, ctx);
      await reportsJobHandler.deadLetter!({ org_id: admin.tenant.id, report_id: id }, ctx);
      const res = await admin.client.get(api(`/reports/${id}/download`));
      expect(res.statusCode).toBe(409);
      expect(res.json().error.details.error).toMatch(/retries are spent/);
      expect((await admin.client.get(api(`/audit?action=report.failed&target_id=${id}`))).json().items).toHaveLength(1);
      // A ready report is left alone.
      const ready = await finished(admin.client, (await create(admin.client, { kind: 'agent_inventory', parameters: { format: 'csv' } })).id);
      await reportsJobHandler.deadLetter!({ org_id: admin.tenant.id, report_id: ready.id }, ctx);
      expect((await admin.client.get(api(`/reports/${ready.id}/download`))).statusCode).toBe(200);
    });

    it('a job naming another organisation finds nothing and writes nothing', async () => {
      const id = await plant(admin.tenant.id, admin.userId, { status: 'queued', kind: 'agent_inventory', parameters: { format: 'csv', include_revoked: true } });
      await generateReport(deps(), other.tenant.id, id);
      const [row] = await owner(`select status from reports where id = $1`, [id]);
      expect(row.status).toBe('queued');
    });
  });
});
