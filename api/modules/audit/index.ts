/** The audit module's public face: recording audit entries. */
export { audit } from './audit.service.js';
export { recordAudit, type AuditEntry } from './audit.repository.js';
