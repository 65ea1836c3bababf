import { randomUUID } from 'node:crypto';
import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { WorkloadIdentitiesTable } from '../../db/schema.js';

/** Every column but the secret hash, which never leaves the repository. */
const publicColumns = ['id', 'org_id', 'agent_id', 'client_id', 'status', 'created_by', 'created_at', 'revoked_at', 'last_used_at'] as const;

export type IdentityRow = Pick<Selectable<WorkloadIdentitiesTable>, (typeof publicColumns)[number]>;

export function insertIdentity(
  tx: Tx,
  orgId: string,
  i: { agentId: string; clientId: string; secretHash: string; createdBy: string; createdAt: Date },
): Promise<IdentityRow> {
  return tx
    .insertInto('workload_identities')
    .values({
      id: randomUUID(),
      org_id: orgId,
      agent_id: i.agentId,
      client_id: i.clientId,
      secret_hash: i.secretHash,
      created_by: i.createdBy,
      created_at: i.createdAt,
      revoked_at: null,
      last_used_at: null,
    })
    .returning(publicColumns)
    .executeTakeFirstOrThrow();
}

/** The organisation's identities, optionally of one agent, oldest first. */
export function listIdentities(tx: Tx, orgId: string, agentId: string | undefined): Promise<IdentityRow[]> {
  let q = tx.selectFrom('workload_identities').select(publicColumns).where('org_id', '=', orgId);
  if (agentId) q = q.where('agent_id', '=', agentId);
  return q.orderBy('created_at').orderBy('id').execute();
}

/** An identity of the organisation, held for an update in the same transaction. */
export function lockIdentity(tx: Tx, orgId: string, id: string): Promise<IdentityRow | undefined> {
  return tx.selectFrom('workload_identities').select(publicColumns).where('org_id', '=', orgId).where('id', '=', id).forUpdate().executeTakeFirst();
}

export function markIdentityRevoked(tx: Tx, orgId: string, id: string, at: Date): Promise<IdentityRow> {
  return tx
    .updateTable('workload_identities')
    .set({ status: 'revoked', revoked_at: at })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returning(publicColumns)
    .executeTakeFirstOrThrow();
}

export async function markIdentityUsed(tx: Tx, orgId: string, id: string, at: Date): Promise<void> {
  await tx.updateTable('workload_identities').set({ last_used_at: at }).where('org_id', '=', orgId).where('id', '=', id).execute();
}

/** What the token exchange reads by client ID, before any organisation is known. */
export interface ClientRow {
  identity_id: string;
  org_id: string;
  agent_id: string;
  secret_hash: string;
  identity_status: string;
  agent_status: string;
  session_epoch: number;
  agent_slug: string;
  org_slug: string;
}

export async function identityForClient(db: Db, clientId: string): Promise<ClientRow | undefined> {
  const { rows } = await sql<ClientRow>`select * from identity_for_client(${clientId})`.execute(db);
  return rows[0];
}

/** What revocation checks of a token: its agent's status and session epoch, and its identity's status. */
export function tokenStateOf(tx: Tx, orgId: string, agentId: string, identityId: string) {
  return tx
    .selectFrom('agents')
    .leftJoin('workload_identities as i', (j) => j.onRef('i.agent_id', '=', 'agents.id').on('i.id', '=', identityId))
    .select(['agents.status as agent_status', 'agents.session_epoch', 'i.status as identity_status'])
    .where('agents.org_id', '=', orgId)
    .where('agents.id', '=', agentId)
    .executeTakeFirst();
}
