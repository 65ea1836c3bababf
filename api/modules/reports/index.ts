/** The reports module's public face: the job that builds reports, for api/jobs.ts, and the kinds of report. */
export { REPORTS_QUEUE, reportsJobHandler } from './reports.jobs.js';
export { REPORT_KIND, REPORT_STATUS, type ReportKind, type ReportStatus } from './reports.schemas.js';
export { parseCsv, toCsv } from './csv.js';
