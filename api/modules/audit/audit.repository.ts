import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { timeOrderedId } from '../../db/ids.js';
import type { Position } from '../../platform/pagination.js';

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
      id: timeOrderedId(),
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

/** Exact-match filters on the audit log. */
export interface AuditFilters {
  action?: string;
  actor_id?: string;
  outcome?: string;
  target_id?: string;
}

/** One page of the organisation's audit log, newest first (one row more than `limit`, to tell if more follow). */
export function listAuditEvents(tx: Tx, orgId: string, f: AuditFilters, after: Position | undefined, limit: number) {
  let q = tx.selectFrom('audit_events').selectAll().where('org_id', '=', orgId);
  if (f.action) q = q.where('action', '=', f.action);
  if (f.actor_id) q = q.where('actor_id', '=', f.actor_id);
  if (f.outcome) q = q.where('outcome', '=', f.outcome);
  if (f.target_id) q = q.where('target_id', '=', f.target_id);
  if (after) q = q.where(sql<boolean>`(at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}
