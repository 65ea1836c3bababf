import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import { sessionsChanged } from '../../platform/auth.js';

export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');
const newToken = () => randomBytes(32).toString('base64url');

export interface NewSession {
  token: string;
  csrfToken: string;
  expiresAt: Date;
}

/** Sessions are a platform table: a session belongs to a person, who may span organisations. */
export async function createSession(
  db: Db | Tx,
  userId: string,
  orgId: string,
  now: Date,
  ttlSeconds: number,
): Promise<NewSession> {
  const token = newToken();
  const csrfToken = newToken();
  const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
  await db
    .insertInto('sessions')
    .values({ id: hashToken(token), user_id: userId, org_id: orgId, csrf_token: csrfToken, expires_at: expiresAt, created_at: now })
    .execute();
  return { token, csrfToken, expiresAt };
}

export interface SessionPrincipalRow {
  user_id: string;
  org_id: string;
  csrf_token: string;
  email: string;
  roles: string[];
  status: string;
  display_name: string;
}

/**
 * The live session behind a cookie token with the membership it acts in, in one round trip
 * (the migration's session_principal function). Undefined for an unknown or expired session.
 */
export async function findSessionPrincipal(db: Db, token: string, now: Date) {
  const id = hashToken(token);
  const { rows } = await sql<SessionPrincipalRow>`select * from session_principal(${id}, ${now})`.execute(db);
  const row = rows[0];
  return row ? { sessionId: id, ...row } : undefined;
}

/*
 * Authentication remembers sessions for a moment (platform/auth.ts, SessionCache). A change made on the
 * database itself is committed when its statement returns, so these forget them at once; one made in a
 * transaction is not committed yet: its service calls sessionsChanged(db) after the transaction.
 */

export async function setSessionOrg(db: Db | Tx, sessionId: string, orgId: string): Promise<void> {
  await db.updateTable('sessions').set({ org_id: orgId }).where('id', '=', sessionId).execute();
  sessionsChanged(db as Db);
}

export async function deleteSession(db: Db | Tx, sessionId: string): Promise<void> {
  await db.deleteFrom('sessions').where('id', '=', sessionId).execute();
  sessionsChanged(db as Db);
}

/** Ends every session of a person, or only those in one organisation. */
export async function deleteSessionsOf(db: Db | Tx, userId: string, orgId?: string): Promise<number> {
  let q = db.deleteFrom('sessions').where('user_id', '=', userId);
  if (orgId) q = q.where('org_id', '=', orgId);
  const r = await q.executeTakeFirst();
  sessionsChanged(db as Db);
  return Number(r.numDeletedRows ?? 0);
}
