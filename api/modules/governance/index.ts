/**
 * The governance module's public face: framework coverage and readiness (what the governance readiness report
 * prints), the catalogues, and the exception expiry job (api/jobs.ts lists it).
 */
export { governanceReadiness } from './governance.service.js';
export type { ControlStatus, FrameworkCoverage } from './coverage.js';
export { CATALOGUE, controlId, type Catalogue, type Control, type Framework } from './catalogue.js';
export { EVIDENCE_EVENT_TYPES, type EvidenceEventType } from './evidence-types.js';
export { AI_SYSTEM_CLASSES, type AiSystemClass } from './gaps.js';
export { DEFAULT_WINDOW_DAYS } from './governance.schemas.js';
export { exceptionExpiryJob, EXCEPTION_EXPIRY_QUEUE, EXPIRY_NOTICE_DAYS } from './governance.jobs.js';
