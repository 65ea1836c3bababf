import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../api/db/database.js';
import { parseCsv } from '../../api/modules/reports/csv.js';
import { api, onboardAdmin, startEmbeddedApp } from '../support/harness.js';

/**
 * Reports on the embedded database (PGlite), as `make run` runs them: the migration's table and queue, the API's
 * in-process worker building the report, and the file stored as bytea and downloaded byte for byte.
 */
describe('reports on the embedded database', () => {
  let app: FastifyInstance;
  let database: Database;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    ({ app, database } = await startEmbeddedApp());
    admin = await onboardAdmin(app, 'Embedded Reports Org');
    expect((await admin.client.post(api('/agents'), { name: 'Embedded reporter' })).statusCode).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  async function ready(id: string) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = (await admin.client.get(api('/reports'))).json().items.find((x: { id: string }) => x.id === id);
      if (r?.status === 'ready' || r?.status === 'failed') return r;
      if (Date.now() > deadline) throw new Error(`report still ${r?.status} after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('builds a PDF and a CSV report and downloads them whole', async () => {
    const pdf = await ready((await admin.client.post(api('/reports'), { kind: 'executive_summary' })).json().id);
    expect(pdf.status, pdf.error).toBe('ready');
    const pdfRes = await admin.client.get(api(`/reports/${pdf.id}/download`));
    expect(pdfRes.statusCode).toBe(200);
    expect(pdfRes.headers['content-type']).toBe('application/pdf');
    expect(pdfRes.rawPayload.length).toBe(pdf.size);
    expect(pdfRes.rawPayload.subarray(0, 5).toString('latin1')).toBe('%PDF-');
    expect(pdfRes.rawPayload.subarray(-6).toString('latin1')).toMatch(/%%EOF/);

    const csv = await ready((await admin.client.post(api('/reports'), { kind: 'agent_inventory', parameters: { format: 'csv' } })).json().id);
    expect(csv.status, csv.error).toBe('ready');
    const rows = parseCsv((await admin.client.get(api(`/reports/${csv.id}/download`))).body);
    expect(rows[1]![1]).toBe('Embedded reporter');
  });
});
