import { z } from 'zod';
import { REPORTS_QUEUE } from '../../db/migrations/0015_reports.js';
import type { JobHandler } from '../../platform/jobs.js';
import { failReport, generateReport } from './reports.service.js';

export { REPORTS_QUEUE };

/** What a report job carries: which report of which organisation. */
export const reportJob = z.object({ org_id: z.uuid(), report_id: z.uuid() });

/**
 * The reports queue's handler, as api/jobs.ts lists it. A job whose retries are spent (its worker died each time,
 * or the database stayed away) marks its report failed from the dead-letter queue, so that no report stays queued
 * or running for ever.
 */
export const reportsJobHandler: JobHandler = {
  queue: REPORTS_QUEUE,
  handler: async (data, ctx) => {
    const { org_id: orgId, report_id: reportId } = reportJob.parse(data);
    await generateReport({ ...ctx.deps, log: ctx.log, signal: ctx.signal }, orgId, reportId);
  },
  deadLetter: async (data, ctx) => {
    const { org_id: orgId, report_id: reportId } = reportJob.parse(data);
    ctx.log.warn({ report_id: reportId, error: ctx.error }, 'report generation failed its retries');
    await failReport(
      { ...ctx.deps, log: ctx.log },
      orgId,
      reportId,
      'The report was not generated: its worker stopped or could not reach the database, and the retries are spent. Create it again.',
    );
  },
};
