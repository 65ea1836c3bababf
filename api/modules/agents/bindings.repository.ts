import type { Insertable, Selectable } from 'kysely';
import type { z } from 'zod';
import type { Tx } from '../../db/database.js';
import type { DelegationsTable, PermissionBindingsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { PRINCIPAL_TYPE, TARGET_KIND } from '../shared/index.js';
import type { bindingOut, delegationOut } from './bindings.schemas.js';

export type DelegationRow = Selectable<DelegationsTable>;
export type BindingRow = Selectable<PermissionBindingsTable>;

export function insertDelegation(tx: Tx, delegation: Insertable<DelegationsTable>): Promise<DelegationRow> {
  return tx.insertInto('delegations').values(delegation).returningAll().executeTakeFirstOrThrow();
}

/** The agent's delegations, oldest first. */
export function delegationsOf(tx: Tx, orgId: string, agentId: string): Promise<DelegationRow[]> {
  return tx
    .selectFrom('delegations')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Deletes one of the agent's delegations; undefined when there is none such. */
export function deleteDelegation(tx: Tx, orgId: string, agentId: string, delegationId: string): Promise<DelegationRow | undefined> {
  return tx
    .deleteFrom('delegations')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('id', '=', delegationId)
    .returningAll()
    .executeTakeFirst();
}

/** Whether `identityId` is a workload identity of the agent. */
export async function isIdentityOf(tx: Tx, orgId: string, agentId: string, identityId: string): Promise<boolean> {
  const identity = await tx
    .selectFrom('workload_identities')
    .select('id')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('id', '=', identityId)
    .executeTakeFirst();
  return identity !== undefined;
}

export function insertBinding(tx: Tx, binding: Insertable<PermissionBindingsTable>): Promise<BindingRow> {
  return tx.insertInto('permission_bindings').values(binding).returningAll().executeTakeFirstOrThrow();
}

/** The agent's permission bindings, oldest first. */
export function bindingsOf(tx: Tx, orgId: string, agentId: string): Promise<BindingRow[]> {
  return tx
    .selectFrom('permission_bindings')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Deletes one of the agent's permission bindings; undefined when there is none such. */
export function deleteBinding(tx: Tx, orgId: string, agentId: string, bindingId: string): Promise<BindingRow | undefined> {
  return tx
    .deleteFrom('permission_bindings')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('id', '=', bindingId)
    .returningAll()
    .executeTakeFirst();
}

export const toDelegation = (row: DelegationRow): z.infer<typeof delegationOut> => ({
  id: row.id,
  agent_id: row.agent_id,
  principal_ref: row.principal_ref,
  display_name: row.display_name,
  principal_type: row.principal_type as (typeof PRINCIPAL_TYPE)[number],
  scopes: row.scopes,
  expires_at: row.expires_at ? iso(row.expires_at) : null,
  created_at: iso(row.created_at),
});

export const toBinding = (row: BindingRow): z.infer<typeof bindingOut> => ({
  id: row.id,
  agent_id: row.agent_id,
  target_kind: row.target_kind as (typeof TARGET_KIND)[number],
  target_id: row.target_id,
  actions: row.actions,
  delegated: row.delegated,
  constraints: row.constraints,
  expires_at: row.expires_at ? iso(row.expires_at) : null,
  identity_id: row.identity_id,
  created_at: iso(row.created_at),
});
