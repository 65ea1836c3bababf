import type { RequestContext } from '../../platform/context.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { Position } from '../../platform/pagination.js';
import { listAuditEvents, recordAudit, type AuditEntry, type AuditFilters } from './audit.repository.js';

type Event = Pick<AuditEntry, 'action'> & Partial<Pick<AuditEntry, 'targetType' | 'targetId' | 'details' | 'outcome'>>;

/** Audits what the request's person (or service account) did, with the request's correlation ID. */
export async function audit(tx: Tx, req: RequestContext, orgId: string, e: Event): Promise<void> {
  await recordAudit(
    tx,
    orgId,
    {
      actorType: req.principal?.kind === 'service' ? 'service_account' : 'person',
      actorId: req.principal?.userId ?? null,
      outcome: 'success',
      correlationId: req.id,
      ...e,
    },
    req.server.deps.clock.now(),
  );
}

/** One page of the organisation's audit log, newest first. */
export function auditLog(db: Db, orgId: string, filters: AuditFilters, after: Position | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listAuditEvents(tx, orgId, filters, after, limit));
}
