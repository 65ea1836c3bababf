import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Position } from '../../platform/pagination.js';

/** Notification kinds Tollgate sends; docs/decisions.md lists them. */
export type NotificationKind = 'organisation.welcome' | 'membership.added' | 'membership.roles_changed';

export async function notify(
  tx: Tx,
  orgId: string,
  userId: string,
  kind: NotificationKind,
  title: string,
  body: string,
  at: Date,
): Promise<void> {
  await tx
    .insertInto('notifications')
    .values({ id: randomUUID(), org_id: orgId, user_id: userId, kind, title, body, created_at: at })
    .execute();
}

export function listNotifications(tx: Tx, orgId: string, userId: string, after: Position | undefined, limit: number) {
  let q = tx
    .selectFrom('notifications')
    .select(['id', 'kind', 'title', 'body', 'read_at', 'created_at'])
    .where('org_id', '=', orgId)
    .where('user_id', '=', userId);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

export async function markRead(tx: Tx, orgId: string, userId: string, id: string, at: Date): Promise<boolean> {
  const r = await tx
    .updateTable('notifications')
    .set((eb) => ({ read_at: eb.fn.coalesce('read_at', sql<Date>`${at}::timestamptz`) }))
    .where('id', '=', id)
    .where('org_id', '=', orgId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) > 0;
}
