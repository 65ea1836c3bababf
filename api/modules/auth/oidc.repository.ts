import { sql } from 'kysely';
import type { Db, Tx } from '../../db/database.js';

/** The person an OpenID Connect identity (issuer and subject) signs in as. */
export function findIdentity(db: Db | Tx, issuer: string, subject: string) {
  return db
    .selectFrom('user_identities')
    .select(['user_id'])
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .executeTakeFirst();
}

/** Whether the person already has another identity at this issuer (a second subject must not take it over). */
export async function hasOtherIdentity(db: Db | Tx, userId: string, issuer: string, subject: string): Promise<boolean> {
  const row = await db
    .selectFrom('user_identities')
    .select('subject')
    .where('user_id', '=', userId)
    .where('issuer', '=', issuer)
    .where('subject', '<>', subject)
    .executeTakeFirst();
  return row !== undefined;
}

/** Links the identity to the person; a concurrent first sign-in of the same identity links it once. */
export async function linkIdentity(db: Db | Tx, issuer: string, subject: string, userId: string, now: Date): Promise<void> {
  await db
    .insertInto('user_identities')
    .values({ issuer, subject, user_id: userId, created_at: now, last_sign_in_at: now })
    .onConflict((oc) => oc.columns(['issuer', 'subject']).doNothing())
    .execute();
}

export async function touchIdentity(db: Db | Tx, issuer: string, subject: string, now: Date): Promise<void> {
  await db
    .updateTable('user_identities')
    .set({ last_sign_in_at: now })
    .where('issuer', '=', issuer)
    .where('subject', '=', subject)
    .execute();
}

/**
 * The person with this email, without creating one (a refused sign-in creates nobody). The users module
 * offers only find-or-create by email.
 */
export function personWithEmail(db: Db | Tx, email: string) {
  return db.selectFrom('users').select(['id', 'email', 'display_name']).where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
}

/** Every membership of the person, whatever its status (in a transaction scoped to the person). */
export function membershipsOf(tx: Tx, userId: string) {
  return tx.selectFrom('memberships').select(['org_id', 'status']).where('user_id', '=', userId).execute();
}
