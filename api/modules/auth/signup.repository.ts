import { randomUUID } from 'node:crypto';
import { sql, type Insertable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { SignupsTable } from '../../db/schema.js';

export type SignupRow = Awaited<ReturnType<typeof findSignup>>;

/** The waiting sign-up of an address (any case), locked for the rest of the transaction. */
export function findSignup(tx: Tx, email: string) {
  return tx
    .selectFrom('signups')
    .selectAll()
    .where(sql`lower(email)`, '=', email.toLowerCase())
    .forUpdate()
    .executeTakeFirst();
}

/** Whether a person with this address (any case) exists already. */
export async function personExists(tx: Tx, email: string): Promise<boolean> {
  const row = await tx.selectFrom('users').select('id').where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
  return row !== undefined;
}

/**
 * Starts the address's sign-up, or replaces the one waiting (a new name, password and code; attempts start
 * again). Two sign-ups of one address racing end as one row: the later one's.
 */
export async function upsertSignup(tx: Tx, row: Omit<Insertable<SignupsTable>, 'id' | 'attempts'>): Promise<{ id: string }> {
  return tx
    .insertInto('signups')
    .values({ id: randomUUID(), ...row, attempts: 0 })
    .onConflict((oc) =>
      oc.expression(sql`lower(email)`).doUpdateSet({
        email: row.email,
        name: row.name,
        password_hash: row.password_hash,
        consent_at: row.consent_at,
        code_hash: row.code_hash,
        code_expires_at: row.code_expires_at,
        attempts: 0,
        last_sent_at: row.last_sent_at,
        updated_at: row.updated_at,
      }),
    )
    .returning('id')
    .executeTakeFirstOrThrow();
}

/** A new code for the sign-up: the old one stops working and attempts start again. */
export async function setCode(tx: Tx, id: string, codeHash: string, expiresAt: Date, now: Date): Promise<void> {
  await tx
    .updateTable('signups')
    .set({ code_hash: codeHash, code_expires_at: expiresAt, attempts: 0, last_sent_at: now, updated_at: now })
    .where('id', '=', id)
    .execute();
}

/** Forgets that a code was sent (its email failed), so the person may ask again at once. */
export async function clearLastSent(tx: Tx, id: string): Promise<void> {
  await tx.updateTable('signups').set({ last_sent_at: null }).where('id', '=', id).execute();
}

/** Counts a wrong code. */
export async function addAttempt(tx: Tx, id: string, now: Date): Promise<void> {
  await tx
    .updateTable('signups')
    .set((eb) => ({ attempts: eb('attempts', '+', 1), updated_at: now }))
    .where('id', '=', id)
    .execute();
}

export async function deleteSignup(tx: Tx, id: string): Promise<void> {
  await tx.deleteFrom('signups').where('id', '=', id).execute();
}

/** Removes sign-ups nobody verified: their code expired before `before`. */
export async function deleteStaleSignups(tx: Tx, before: Date): Promise<void> {
  await tx.deleteFrom('signups').where('code_expires_at', '<', before).execute();
}

/** Keeps the verified person's password hash; a person who has one already keeps theirs. */
export async function insertCredential(tx: Tx, userId: string, passwordHash: string, consentAt: Date, now: Date): Promise<void> {
  await tx
    .insertInto('local_credentials')
    .values({ user_id: userId, password_hash: passwordHash, consent_at: consentAt, created_at: now, updated_at: now })
    .onConflict((oc) => oc.column('user_id').doNothing())
    .execute();
}
