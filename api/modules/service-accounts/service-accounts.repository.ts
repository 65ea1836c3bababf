import { randomUUID } from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { ServiceAccountsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';

/** Every column but the secret hashes, which never leave the repository. */
export const publicColumns = [
  'id',
  'org_id',
  'name',
  'description',
  'roles',
  'client_id',
  'status',
  'previous_valid_until',
  'created_by',
  'created_at',
  'last_used_at',
  'revoked_at',
] as const;

export type ServiceAccountRow = Pick<Selectable<ServiceAccountsTable>, (typeof publicColumns)[number]>;

/** The API shape. The previous secret's end is shown only while that secret is still accepted. */
export function toServiceAccount(a: ServiceAccountRow, now: Date) {
  const until = a.status === 'active' ? a.previous_valid_until : null;
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    roles: a.roles,
    client_id: a.client_id,
    status: a.status as 'active' | 'revoked',
    previous_secret_valid_until: until && until.getTime() > now.getTime() ? iso(until) : null,
    created_by: a.created_by,
    created_at: iso(a.created_at),
    last_used_at: a.last_used_at ? iso(a.last_used_at) : null,
    revoked_at: a.revoked_at ? iso(a.revoked_at) : null,
  };
}

export function getServiceAccount(tx: Tx, orgId: string, id: string, lock = false) {
  const q = tx.selectFrom('service_accounts').select(publicColumns).where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

export function listServiceAccounts(tx: Tx, orgId: string, status: string | undefined, after: Position | undefined, limit: number) {
  let q = tx.selectFrom('service_accounts').select(publicColumns).where('org_id', '=', orgId);
  if (status) q = q.where('status', '=', status);
  if (after) q = q.where(sql<boolean>`(created_at, id) > (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at').orderBy('id').limit(limit + 1).execute();
}

export function nameTaken(tx: Tx, orgId: string, name: string) {
  return tx
    .selectFrom('service_accounts')
    .select('id')
    .where('org_id', '=', orgId)
    .where('name', '=', name)
    .executeTakeFirst()
    .then(Boolean);
}

export function insertServiceAccount(
  tx: Tx,
  orgId: string,
  a: { name: string; description: string; roles: string[]; clientId: string; secretHash: string; createdBy: string; createdAt: Date },
): Promise<ServiceAccountRow> {
  return tx
    .insertInto('service_accounts')
    .values({
      id: randomUUID(),
      org_id: orgId,
      name: a.name,
      description: a.description,
      roles: a.roles,
      client_id: a.clientId,
      secret_hash: a.secretHash,
      previous_secret_hash: null,
      previous_valid_until: null,
      created_by: a.createdBy,
      created_at: a.createdAt,
      last_used_at: null,
      revoked_at: null,
    })
    .returning(publicColumns)
    .executeTakeFirstOrThrow();
}

export function replaceSecret(tx: Tx, orgId: string, id: string, secretHash: string, previousValidUntil: Date): Promise<ServiceAccountRow> {
  return tx
    .updateTable('service_accounts')
    // The replaced secret becomes the previous one; a secret replaced earlier ends now.
    .set((eb) => ({ previous_secret_hash: eb.ref('secret_hash'), secret_hash: secretHash, previous_valid_until: previousValidUntil }))
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returning(publicColumns)
    .executeTakeFirstOrThrow();
}

export function markServiceAccountRevoked(tx: Tx, orgId: string, id: string, at: Date): Promise<ServiceAccountRow> {
  return tx
    .updateTable('service_accounts')
    .set({ status: 'revoked', revoked_at: at })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returning(publicColumns)
    .executeTakeFirstOrThrow();
}

export async function markServiceAccountUsed(tx: Tx, orgId: string, id: string, at: Date): Promise<void> {
  await tx.updateTable('service_accounts').set({ last_used_at: at }).where('org_id', '=', orgId).where('id', '=', id).execute();
}

/** What authentication reads of an account on each request: its name, status and roles. */
export function serviceAccountState(tx: Tx, orgId: string, id: string) {
  return tx.selectFrom('service_accounts').select(['name', 'status', 'roles']).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
}

/** What the token exchange reads by client ID, before any organisation is known. */
export interface ServiceClientRow {
  service_account_id: string;
  org_id: string;
  secret_hash: string;
  previous_secret_hash: string | null;
  previous_valid_until: Date | null;
  status: string;
}

export async function serviceAccountForClient(db: Db, clientId: string): Promise<ServiceClientRow | undefined> {
  const { rows } = await sql<ServiceClientRow>`select * from service_account_for_client(${clientId})`.execute(db);
  return rows[0];
}
