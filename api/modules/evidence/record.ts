import type { RequestContext } from '../../platform/context.js';
import type { Tx } from '../../db/database.js';
import { audit } from '../audit/index.js';
import type { AuditEntry } from '../audit/index.js';
import { appendEvidence, type EvidenceEvent } from './chain.js';

type Entry = Pick<AuditEntry, 'action'> & Partial<Pick<AuditEntry, 'targetType' | 'targetId' | 'details'>>;

/**
 * A person's or service account's high-impact change (containment, trust, deny-class, cancellation)
 * goes to the audit log and the evidence chain, in the change's own transaction, with the request's
 * correlation ID and actor.
 */
export async function auditWithEvidence(
  tx: Tx,
  req: RequestContext,
  orgId: string,
  entry: Entry,
  event: Omit<EvidenceEvent, 'correlationId'>,
): Promise<void> {
  await audit(tx, req, orgId, entry);
  const { evidence, clock } = req.server.deps;
  await appendEvidence(
    tx,
    evidence,
    orgId,
    [
      {
        ...event,
        correlationId: req.id,
        payload: {
          ...event.payload,
          actor_id: req.principal?.userId ?? null,
          // A person is the default actor; a service account says so.
          ...(req.principal?.kind === 'service' ? { actor_type: 'service_account' } : {}),
        },
      },
    ],
    clock.now(),
  );
}
