import { sql } from 'kysely';
import type { QueryCreator } from 'kysely';
import type { Tx } from '../../db/database.js';
import { timeOrderedId } from '../../db/ids.js';
import type { DB } from '../../db/schema.js';
import { rolesGranting, type Permission } from '../roles/index.js';
import type { Position } from '../../platform/pagination.js';

/** Notification kinds Tollgate sends; docs/decisions.md lists them. */
export type NotificationKind =
  | 'organisation.welcome'
  | 'membership.added'
  | 'membership.roles_changed'
  | 'approval.pending'
  | 'finding.high_severity'
  | 'exception.decided'
  | 'exception.expiring'
  | 'report.ready';

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
    .values({ id: timeOrderedId(), org_id: orgId, user_id: userId, kind, title, body, created_at: at })
    .execute();
}

/** One notification to send to several people. */
export interface Notice {
  kind: NotificationKind;
  title: string;
  body: string;
}

/**
 * The insert, as one statement on any query creator (a transaction, or a common table expression of a
 * larger statement such as the gateway's batch), of every notice for every active member of the
 * organisation whose roles grant `permission`. Nobody holding it: nothing is inserted.
 */
export function notifyHoldersOf(db: QueryCreator<DB>, orgId: string, permission: Permission, notices: Notice[], at: Date) {
  return db
    .insertInto('notifications')
    .columns(['id', 'org_id', 'user_id', 'kind', 'title', 'body', 'created_at'])
    .expression(
      sql`select gen_random_uuid(), m.org_id, m.user_id, n.kind, n.title, n.body, ${at}::timestamptz
          from memberships m
          cross join unnest(${notices.map((n) => n.kind)}::text[], ${notices.map((n) => n.title)}::text[], ${notices.map((n) => n.body)}::text[]) as n (kind, title, body)
          where m.org_id = ${orgId} and m.status = 'active' and m.roles && ${rolesGranting(permission)}::text[]`,
    );
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
