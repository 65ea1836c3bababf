import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { GovernanceExceptionsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { CATALOGUE } from './catalogue.js';
import type { ExceptionOut, ExceptionStatus } from './exceptions.schemas.js';

export type ExceptionRow = Selectable<GovernanceExceptionsTable>;

export async function insertException(tx: Tx, e: Insertable<GovernanceExceptionsTable>): Promise<ExceptionRow> {
  return tx.insertInto('governance_exceptions').values(e).returningAll().executeTakeFirstOrThrow();
}

/** One page of the organisation's exceptions, newest first; `status` as read at `now` (expired is worked out). */
export function listExceptions(tx: Tx, orgId: string, status: ExceptionStatus | undefined, now: Date, after: Position | undefined, limit: number) {
  let q = tx.selectFrom('governance_exceptions').selectAll().where('org_id', '=', orgId);
  if (status === 'rejected') q = q.where('status', '=', 'rejected');
  else if (status === 'expired') q = q.where('status', 'in', ['pending', 'approved']).where('expires_at', '<=', now);
  else if (status) q = q.where('status', '=', status).where('expires_at', '>', now);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

export function getException(tx: Tx, orgId: string, id: string, lock = false): Promise<ExceptionRow | undefined> {
  const q = tx.selectFrom('governance_exceptions').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

export function updateException(tx: Tx, orgId: string, id: string, change: Updateable<GovernanceExceptionsTable>): Promise<ExceptionRow> {
  return tx.updateTable('governance_exceptions').set(change).where('org_id', '=', orgId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

/** Approved exceptions in force at `now` that cover an agent: its own, and the organisation's (no agent). */
export function exceptionsCoveringAgents(tx: Tx, orgId: string, agentIds: string[], now: Date) {
  return tx
    .selectFrom('governance_exceptions')
    .select(['id', 'control_id', 'agent_id', 'expires_at'])
    .where('org_id', '=', orgId)
    .where('status', '=', 'approved')
    .where('expires_at', '>', now)
    .where((eb) => eb.or([eb('agent_id', 'is', null), ...(agentIds.length ? [eb('agent_id', 'in', agentIds)] : [])]))
    .orderBy('expires_at', 'desc')
    .execute();
}

/**
 * Marks, and answers, the organisation's approved exceptions not yet notified that lapse after `now` and by
 * `until`. The update's row locks make a second job running at once skip what this one took.
 */
export function claimExpiring(tx: Tx, orgId: string, now: Date, until: Date): Promise<ExceptionRow[]> {
  return tx
    .updateTable('governance_exceptions')
    .set({ expiry_notified_at: now })
    .where('org_id', '=', orgId)
    .where('status', '=', 'approved')
    .where('expiry_notified_at', 'is', null)
    .where('expires_at', '>', now)
    .where('expires_at', '<=', until)
    .returningAll()
    .execute();
}

/** The active member of the organisation whose email is `email` (case aside), if any. */
export async function memberByEmail(tx: Tx, orgId: string, email: string): Promise<string | undefined> {
  const row = await tx
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select('m.user_id')
    .where('m.org_id', '=', orgId)
    .where('m.status', '=', 'active')
    .where(sql<boolean>`lower(u.email) = lower(${email})`)
    .executeTakeFirst();
  return row?.user_id;
}

/** Whether `userId` is an active member of the organisation (a person, not a service account). */
export async function isActiveMember(tx: Tx, orgId: string, userId: string): Promise<boolean> {
  const row = await tx
    .selectFrom('memberships')
    .select('user_id')
    .where('org_id', '=', orgId)
    .where('user_id', '=', userId)
    .where('status', '=', 'active')
    .executeTakeFirst();
  return row !== undefined;
}

/** The status as read at `now`: a pending or approved exception whose expires_at has passed is expired. */
export function statusAt(r: Pick<ExceptionRow, 'status' | 'expires_at'>, now: Date): ExceptionStatus {
  if ((r.status === 'pending' || r.status === 'approved') && new Date(r.expires_at).getTime() <= now.getTime()) return 'expired';
  return r.status as ExceptionStatus;
}

export const toException = (r: ExceptionRow, now: Date): ExceptionOut => {
  const control = CATALOGUE.byId.get(r.control_id);
  return {
    id: r.id,
    control_id: r.control_id,
    control_key: control?.key ?? r.control_id,
    control_title: control?.title ?? 'a control no longer in the catalogue',
    agent_id: r.agent_id,
    title: r.title,
    justification: r.justification,
    compensating_controls: r.compensating_controls,
    owner_email: r.owner_email,
    expires_at: iso(r.expires_at),
    status: statusAt(r, now),
    requested_by: r.requested_by,
    created_at: iso(r.created_at),
    decided_by: r.decided_by,
    decided_at: r.decided_at ? iso(r.decided_at) : null,
    decision_note: r.decision_note,
    version: r.version,
  };
};
