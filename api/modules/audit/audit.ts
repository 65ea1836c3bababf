import type { FastifyRequest } from 'fastify';
import type { Tx } from '../../db/database.js';
import { recordAudit, type AuditEntry } from './audit.repository.js';

type Event = Pick<AuditEntry, 'action'> & Partial<Pick<AuditEntry, 'targetType' | 'targetId' | 'details' | 'outcome'>>;

/** Audits what the request's person (or service account) did, with the request's correlation ID. */
export async function audit(tx: Tx, req: FastifyRequest, orgId: string, e: Event): Promise<void> {
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
