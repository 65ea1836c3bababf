import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { notFound } from '../../platform/errors.js';
import type { Position } from '../../platform/pagination.js';
import { listNotifications, markRead } from './notifications.repository.js';

/** One page of a person's notifications in the organisation, newest first. */
export function notificationsOf(db: Db, orgId: string, userId: string, after: Position | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listNotifications(tx, orgId, userId, after, limit));
}

/** Marks one of the person's notifications read (the first reading counts); someone else's answers 404. */
export async function markNotificationRead(db: Db, clock: Clock, orgId: string, userId: string, id: string): Promise<void> {
  const found = await inScope(db, { orgId }, (tx) => markRead(tx, orgId, userId, id, clock.now()));
  if (!found) throw notFound('No such notification.');
}
