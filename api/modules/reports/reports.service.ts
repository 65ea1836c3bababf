import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import { REPORTS_QUEUE } from '../../db/migrations/0015_reports.js';
import type { RequestContext } from '../../platform/context.js';
import { ApiError, isDatabaseUnavailable, notFound } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit, recordAudit } from '../audit/index.js';
import type { EvidenceSigner } from '../evidence/index.js';
import { notify } from '../notifications/index.js';
import { CONTENT_TYPE, ReportError, utcMinute, type GenerateContext, type ReportFile } from './documents/common.js';
import { kindCatalogue, KINDS } from './kinds.js';
import {
  getReport,
  insertReport,
  listReports,
  markFailed,
  markReady,
  markRunning,
  organisationOf,
  reportFile,
  toReport,
  type ReportHead,
} from './reports.repository.js';
import { MAX_REPORT_BYTES, type ReportFormat, type ReportIn, type ReportKind, type ReportOut } from './reports.schemas.js';

/** A kind as the service drives it, whatever its parameters' type: they were checked by its own schema. */
interface AnyKind {
  title: string;
  parameters: z.ZodType<Record<string, unknown>>;
  resolve?(p: Record<string, unknown>, now: Date): Record<string, unknown>;
  generate(ctx: GenerateContext, p: Record<string, unknown>): Promise<ReportFile>;
}
const kindOf = (kind: ReportKind) => KINDS[kind] as unknown as AnyKind;

/** GET /reports/kinds: the catalogue is code, the same for every organisation while the process runs. */
const CATALOGUE = { items: kindCatalogue() };
export const reportKinds = () => CATALOGUE;

/**
 * Asks for a report: its parameters with their defaults (and the evidence window's end) filled in, the row
 * `queued` and its job sent in one transaction, so that a report never exists without its job nor a job without
 * its report. Answers at once; the worker builds it.
 */
export async function createReport(db: Db, clock: Clock, req: RequestContext, orgId: string, body: ReportIn): Promise<ReportOut> {
  const now = clock.now();
  const kind = kindOf(body.kind);
  const parameters = kind.resolve ? kind.resolve(body.parameters, now) : body.parameters;
  const format = parameters.format as ReportFormat;
  return inScope(db, { orgId }, async (tx) => {
    const row = await insertReport(tx, {
      id: randomUUID(),
      org_id: orgId,
      kind: body.kind,
      parameters: JSON.stringify(parameters),
      format,
      created_by: req.principal?.userId ?? null,
      created_by_type: req.principal?.kind === 'service' ? 'service_account' : 'person',
      correlation_id: req.id,
      created_at: now,
    });
    await req.server.deps.jobs.send(REPORTS_QUEUE, { org_id: orgId, report_id: row.id }, { tx });
    await audit(tx, req, orgId, { action: 'report.created', targetType: 'report', targetId: row.id, details: { kind: body.kind, format, parameters } });
    return toReport(row);
  });
}

/** One page of the organisation's reports, newest first, without their files. */
export function listReportsPage(db: Db, cursors: Cursors, orgId: string, query: { limit: number; cursor?: string }) {
  const scope = `reports:${orgId}`;
  const after = cursors.decode(scope, query.cursor);
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listReports(tx, orgId, after, query.limit);
    return cursors.page(scope, rows, query.limit, (r) => ({ t: iso(r.created_at), id: r.id }), toReport);
  });
}

/**
 * A ready report's file, with its media type and name. A report still queued or running, or one that failed,
 * answers 409 conflict saying which (`details.reason`: `report_not_ready` or `report_failed`, with the error).
 * The download is audited: who took which report out of the service.
 */
export async function downloadReport(db: Db, req: RequestContext, orgId: string, reportId: string) {
  return inScope(db, { orgId }, async (tx) => {
    const r = await getReport(tx, orgId, reportId);
    if (!r) throw notFound('No such report.');
    if (r.status === 'failed') {
      throw new ApiError('conflict', `The report failed: ${r.error ?? 'no reason was recorded'}. Create it again.`, {
        reason: 'report_failed',
        report_id: r.id,
        status: r.status,
        error: r.error,
      });
    }
    if (r.status !== 'ready') {
      throw new ApiError('conflict', `The report is not ready yet (it is ${r.status}); try again in a moment.`, {
        reason: 'report_not_ready',
        report_id: r.id,
        status: r.status,
      });
    }
    const bytes = await reportFile(tx, orgId, r.id);
    if (!bytes) throw notFound('No such report.');
    await audit(tx, req, orgId, { action: 'report.downloaded', targetType: 'report', targetId: r.id, details: { kind: r.kind, file_name: r.file_name, size: r.size } });
    return { bytes, contentType: r.content_type!, fileName: r.file_name! };
  });
}

/** What building a report needs from the process it runs in (the worker, or the API in process). */
export interface ReportDeps {
  db: Db;
  clock: Clock;
  evidence: EvidenceSigner;
  log: FastifyBaseLogger;
  /** Aborted when the job's time is up or its process stops without waiting: the attempt writes nothing more. */
  signal?: AbortSignal;
  /** The largest file stored; MAX_REPORT_BYTES unless a test asks for less. */
  maxBytes?: number;
}

/** "20261123-0900": the time part of a report's file name. */
const stamp = (d: Date) => d.toISOString().slice(0, 16).replace(/[-:]/g, '').replace('T', '-');

/** A size for people: "870 bytes", "42 KB", "3.4 MB". */
const fileSize = (n: number) => (n < 1024 ? `${n} bytes` : n < 1024 * 1024 ? `${Math.round(n / 1024)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`);

/**
 * Builds one report. At-least-once: the report is taken up only while queued or running (a retry of a report
 * whose earlier attempt died picks it up again), and the outcome is written in one transaction that holds the
 * row and checks it is still running, so a report completes once. The data is read and the file built outside
 * any transaction that writes. Expected failures (ReportError, a file over the limit) fail the report with their
 * message; a lost database throws, so the job is retried; any other fault fails it with the correlation ID.
 */
export async function generateReport(deps: ReportDeps, orgId: string, reportId: string): Promise<void> {
  const started = await inScope(deps.db, { orgId }, async (tx) => {
    const r = await getReport(tx, orgId, reportId, true);
    if (!r || (r.status !== 'queued' && r.status !== 'running')) return null;
    const running = await markRunning(tx, orgId, reportId, deps.clock.now());
    return { report: running, organisation: await organisationOf(tx, orgId) };
  });
  if (!started) return;
  const { report, organisation } = started;
  const log = deps.log.child({ report_id: reportId, kind: report.kind, correlation_id: report.correlation_id });
  const generatedAt = deps.clock.now();
  let outcome: { failure: string } | { file: Buffer; format: ReportFormat };
  try {
    const kind = kindOf(report.kind as ReportKind);
    const parsed = kind.parameters.safeParse(report.parameters);
    if (!parsed.success) {
      throw new ReportError(`Its parameters are no longer valid: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'parameters'}: ${i.message}`).join('; ')}.`);
    }
    const file = await kind.generate({ db: deps.db, clock: deps.clock, evidence: deps.evidence, log, orgId, organisation, generatedAt }, parsed.data);
    const limit = deps.maxBytes ?? MAX_REPORT_BYTES;
    if (file.bytes.length > limit) {
      throw new ReportError(`The report came to ${fileSize(file.bytes.length)}, over the limit of ${fileSize(limit)}; ask for less (a shorter window, one environment, one framework).`);
    }
    outcome = { file: file.bytes, format: file.format };
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err;
    if (err instanceof ReportError) {
      outcome = { failure: err.message };
    } else {
      log.error({ err }, 'report generation failed');
      outcome = { failure: `The report could not be generated because of a fault on our side. Quote the correlation ID ${report.correlation_id}.` };
    }
  }
  // An attempt whose time is up leaves the outcome to the retry that replaces it.
  deps.signal?.throwIfAborted();
  const fileName = `${report.kind}-${organisation.slug}-${stamp(generatedAt)}`;
  await finish(deps, orgId, reportId, 'failure' in outcome ? outcome : { content: outcome.file, contentType: CONTENT_TYPE[outcome.format], fileName: `${fileName}.${outcome.format}` });
  log.info({ outcome: 'failure' in outcome ? 'failed' : 'ready' }, 'report finished');
}

/** Marks a report failed with a message, when it is still queued or running (the dead-letter path). */
export async function failReport(deps: ReportDeps, orgId: string, reportId: string, message: string): Promise<void> {
  await finish(deps, orgId, reportId, { failure: message });
}

type Outcome = { failure: string } | { content: Buffer; contentType: string; fileName: string };

/** The report's end, once: its row, the audit entry (the system acted) and the notification of who asked for it. */
async function finish(deps: ReportDeps, orgId: string, reportId: string, outcome: Outcome): Promise<void> {
  await inScope(deps.db, { orgId }, async (tx) => {
    const r = await getReport(tx, orgId, reportId, true);
    if (!r || (r.status !== 'queued' && r.status !== 'running')) return;
    const now = deps.clock.now();
    if ('failure' in outcome) await markFailed(tx, orgId, r.id, outcome.failure, now);
    else await markReady(tx, orgId, r.id, outcome, now);
    const failed = 'failure' in outcome;
    await recordAudit(
      tx,
      orgId,
      {
        actorType: 'system',
        actorId: null,
        action: failed ? 'report.failed' : 'report.generated',
        targetType: 'report',
        targetId: r.id,
        outcome: failed ? 'failure' : 'success',
        correlationId: r.correlation_id,
        details: failed ? { kind: r.kind, format: r.format, error: outcome.failure } : { kind: r.kind, format: r.format, file_name: outcome.fileName, size: outcome.content.length },
      },
      now,
    );
    await notifyCreator(tx, r, outcome, now);
  });
}

/**
 * Tells the person who asked for the report that it is ready, or that it failed and why (kind `report.ready`
 * either way: the report is done). A service account has no notifications.
 */
async function notifyCreator(tx: Tx, r: ReportHead, outcome: Outcome, now: Date): Promise<void> {
  if (r.created_by_type !== 'person' || !r.created_by) return;
  const title = kindOf(r.kind as ReportKind).title;
  const asked = utcMinute(r.created_at);
  if ('failure' in outcome) {
    await notify(tx, r.org_id, r.created_by, 'report.ready', `Report failed: ${title}`, `The ${title.toLowerCase()} you asked for at ${asked} could not be generated. ${outcome.failure}`, now);
  } else {
    await notify(
      tx,
      r.org_id,
      r.created_by,
      'report.ready',
      `Report ready: ${title}`,
      `The ${title.toLowerCase()} you asked for at ${asked} is ready: ${outcome.fileName} (${fileSize(outcome.content.length)}). Download it from GET /api/v1/reports/${r.id}/download.`,
      now,
    );
  }
}
