import { randomUUID } from 'node:crypto';
import type { Insertable, Selectable, Updateable } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { PoliciesTable, PolicyVersionsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';

export type PolicyRow = Selectable<PoliciesTable>;
export type VersionRow = Selectable<PolicyVersionsTable>;

/** One page of the organisation's policies, by key; one row more than `limit` tells a next page. */
export function listPolicies(tx: Tx, orgId: string, after: Position | undefined, limit: number): Promise<PolicyRow[]> {
  let q = tx.selectFrom('policies').selectAll().where('org_id', '=', orgId);
  // The position's `t` carries the key: policies are listed by key, which is unique.
  if (after) q = q.where(sql<boolean>`(key, id) > (${after.t}, ${after.id}::uuid)`);
  return q.orderBy('key').orderBy('id').limit(limit + 1).execute();
}

/** A policy of the organisation; `lock` holds it for an update in the same transaction. */
export function getPolicy(tx: Tx, orgId: string, id: string, lock = false): Promise<PolicyRow | undefined> {
  let q = tx.selectFrom('policies').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export function insertPolicy(tx: Tx, orgId: string, values: Omit<Insertable<PoliciesTable>, 'id' | 'org_id'>): Promise<PolicyRow> {
  return tx
    .insertInto('policies')
    .values({ id: randomUUID(), org_id: orgId, ...values })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Changes a policy's record and returns it as changed. */
export function updatePolicy(tx: Tx, orgId: string, id: string, changes: Updateable<PoliciesTable>): Promise<PolicyRow> {
  return tx.updateTable('policies').set(changes).where('org_id', '=', orgId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

/** A new version, a draft that no decision reads until it is published. */
export function insertVersion(
  tx: Tx,
  orgId: string,
  policyId: string,
  v: { number: number; rules: unknown[]; changeNote: string; authorId: string; createdAt: Date },
): Promise<VersionRow> {
  return tx
    .insertInto('policy_versions')
    .values({
      id: randomUUID(),
      org_id: orgId,
      policy_id: policyId,
      number: v.number,
      rules: JSON.stringify(v.rules),
      change_note: v.changeNote,
      author_id: v.authorId,
      created_at: v.createdAt,
      published_at: null,
      published_by: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Every version of a policy, newest first. */
export function versionsOf(tx: Tx, orgId: string, policyId: string): Promise<VersionRow[]> {
  return tx.selectFrom('policy_versions').selectAll().where('org_id', '=', orgId).where('policy_id', '=', policyId).orderBy('number', 'desc').execute();
}

export function getVersion(tx: Tx, orgId: string, policyId: string, number: number): Promise<VersionRow | undefined> {
  return tx
    .selectFrom('policy_versions')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('policy_id', '=', policyId)
    .where('number', '=', number)
    .executeTakeFirst();
}

/** Records who published a version and when. */
export async function markVersionPublished(tx: Tx, versionId: string, at: Date, by: string): Promise<void> {
  await tx.updateTable('policy_versions').set({ published_at: at, published_by: by }).where('id', '=', versionId).execute();
}
