import { randomUUID } from 'node:crypto';
import type { Tx } from '../../db/database.js';

export interface AuditEntry {
  actorType: 'person' | 'service_account' | 'agent' | 'client' | 'system';
  actorId: string | null;
  action: string;
  targetType?: string | null;
  targetId?: string | null;
  outcome: 'success' | 'denied' | 'failure';
  correlationId: string;
  details?: Record<string, unknown>;
}

/** Appends one audit entry inside the caller's transaction (organisation already set). */
export async function recordAudit(tx: Tx, orgId: string, e: AuditEntry, at?: Date): Promise<void> {
  await tx
    .insertInto('audit_events')
    .values({
      id: randomUUID(),
      org_id: orgId,
      ...(at ? { at } : {}),
      actor_type: e.actorType,
      actor_id: e.actorId,
      action: e.action,
      target_type: e.targetType ?? null,
      target_id: e.targetId ?? null,
      outcome: e.outcome,
      correlation_id: e.correlationId,
      details: JSON.stringify(e.details ?? {}),
    })
    .execute();
}
