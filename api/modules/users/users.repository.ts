import { randomUUID } from 'node:crypto';
import { sql, type Updateable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { MembershipsTable } from '../../db/schema.js';
import { isUniqueViolation, likePattern } from '../../platform/schemas.js';
import type { Position } from '../../platform/pagination.js';

export function findPerson(db: Db | Tx, userId: string) {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst();
}

/** People are global; the first sign-in or invitation creates the person. */
export async function findOrCreatePerson(db: Db | Tx, email: string, displayName: string) {
  const existing = await db
    .selectFrom('users')
    .selectAll()
    .where(sql`lower(email)`, '=', email.toLowerCase())
    .executeTakeFirst();
  if (existing) return existing;
  try {
    return await db
      .insertInto('users')
      .values({ id: randomUUID(), email, display_name: displayName })
      .returningAll()
      .executeTakeFirstOrThrow();
  } catch (err) {
    // Two first sign-ins racing: the other one created the person.
    if (!isUniqueViolation(err)) throw err;
    return db
      .selectFrom('users')
      .selectAll()
      .where(sql`lower(email)`, '=', email.toLowerCase())
      .executeTakeFirstOrThrow();
  }
}

const memberColumns = [
  'memberships.user_id as id',
  'users.email',
  'memberships.display_name',
  'memberships.roles',
  'memberships.status',
  'memberships.version',
  'memberships.created_at',
  'memberships.updated_at',
] as const;

export type MemberRow = Awaited<ReturnType<typeof getMember>> & {};

export function getMember(tx: Tx, orgId: string, userId: string) {
  return tx
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(memberColumns)
    .where('memberships.org_id', '=', orgId)
    .where('memberships.user_id', '=', userId)
    .executeTakeFirst();
}

/** What a membership change starts from, locked until the transaction ends. */
export function lockMembership(tx: Tx, orgId: string, userId: string) {
  return tx
    .selectFrom('memberships')
    .select(['roles', 'status', 'display_name', 'version'])
    .where('org_id', '=', orgId)
    .where('user_id', '=', userId)
    .forUpdate()
    .executeTakeFirst();
}

export async function updateMembership(
  tx: Tx,
  orgId: string,
  userId: string,
  values: Updateable<MembershipsTable>,
): Promise<void> {
  await tx.updateTable('memberships').set(values).where('org_id', '=', orgId).where('user_id', '=', userId).execute();
}

/** A page of the organisation's members, oldest first (one more than `limit`, to tell whether more follow). */
export function listMembers(db: Db | Tx, orgId: string, opts: { q?: string; after?: Position; limit: number }) {
  let q = db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(memberColumns)
    .where('memberships.org_id', '=', orgId);
  if (opts.q) {
    const p = likePattern(opts.q);
    q = q.where((eb) => eb.or([eb('users.email', 'ilike', p), eb('memberships.display_name', 'ilike', p)]));
  }
  if (opts.after) {
    const { t, id } = opts.after;
    q = q.where(sql<boolean>`(memberships.created_at, memberships.user_id) > (${t}::timestamptz, ${id}::uuid)`);
  }
  return q.orderBy('memberships.created_at').orderBy('memberships.user_id').limit(opts.limit + 1);
}

export async function countActiveAdmins(tx: Tx, orgId: string): Promise<number> {
  const r = await tx
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('org_id', '=', orgId)
    .where('status', '=', 'active')
    .where(sql<boolean>`'org_admin' = any(roles)`)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}
