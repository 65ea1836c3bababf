import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { MAX_REPORT_BYTES, reportIn, reportKindsOut, reportOut, reportParams } from './reports.schemas.js';
import { createReport, downloadReport, listReportsPage, reportKinds } from './reports.service.js';

const tags = ['Reports'];

const file = (what: string) => ({ schema: z.string().describe(what) });

/** Reports (docs/reports.md): the kinds, asking for one, the list, and the download of a ready one. */
export async function reportsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/reports/kinds',
    {
      ...caller('report:read'),
      schema: {
        summary: 'The kinds of report, what each holds, its formats and its parameters (JSON Schema)',
        tags,
        response: { 200: reportKindsOut },
      },
    },
    async () => reportKinds(),
  );

  r.get(
    '/reports',
    {
      ...caller('report:read'),
      schema: {
        summary: "The organisation's reports, newest first, without their files",
        tags,
        querystring: pageQuery(),
        response: { 200: pageOf(reportOut) },
      },
    },
    async (req) => listReportsPage(db, cursors, actorOf(req).orgId, req.query),
  );

  r.post(
    '/reports',
    {
      ...caller('report:create'),
      schema: {
        summary: 'Ask for a report: queued at once, built by the worker; the creator is notified when it is ready or failed',
        description:
          '`parameters` is checked against the kind\'s schema (GET /reports/kinds lists them; a key the kind does not take ' +
          'answers 422) and stored with its defaults filled in. The answer is the report, `queued`; follow it with GET ' +
          `/reports until it is \`ready\`, then download it. A report larger than ${MAX_REPORT_BYTES / 1024 / 1024} MB fails.`,
        tags,
        body: reportIn,
        response: { 201: reportOut },
      },
    },
    async (req, reply) => reply.status(201).send(await createReport(db, clock, req, actorOf(req).orgId, req.body)),
  );

  r.get(
    '/reports/:report_id/download',
    {
      ...caller('report:read'),
      schema: {
        summary: 'Download a ready report: its file, with its media type and file name',
        description:
          'PDF (`application/pdf`), CSV (`text/csv`, UTF-8 with a byte-order mark) or the evidence bundle ' +
          '(`application/gzip`, a tar archive), as an attachment named `<kind>-<organisation slug>-<yyyymmdd-hhmm>.<ext>`. ' +
          'A report still queued or running answers 409 `conflict` with `details.reason` `report_not_ready`; a failed one, ' +
          '409 with `report_failed` and its error. Downloads are audited.',
        tags,
        params: reportParams,
        response: {
          200: {
            description: 'The file',
            content: {
              'application/pdf': file('a PDF document'),
              'text/csv': file('CSV: a header row, then one row per item'),
              'application/gzip': file('a gzipped tar archive of evidence records'),
            },
          },
        },
      },
    },
    async (req, reply) => {
      const f = await downloadReport(db, req, actorOf(req).orgId, req.params.report_id);
      // fastify sends a Buffer as it is, past the serialiser; the schema above describes the body for the document.
      return reply
        .type(f.contentType)
        .header('content-disposition', `attachment; filename="${f.fileName}"`)
        .send(f.bytes as unknown as string);
    },
  );
}
