import { sql, type Insertable, type Selectable } from 'kysely';
import type { z } from 'zod';
import type { Tx } from '../../db/database.js';
import type { DelegationsTable, PermissionBindingsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { PRINCIPAL_TYPE, TARGET_KIND } from '../shared/index.js';
import type { bindingOut, delegationOut } from './bindings.schemas.js';

export type DelegationRow = Selectable<DelegationsTable>;
export type BindingRow = Selectable<PermissionBindingsTable>;
/** A binding with the current definition hash of the tool it is on (null for other targets and undiscovered tools). */
export type BindingWithTool = BindingRow & { tool_definition_hash: string | null };

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

/** The definition hash a tool of the organisation has now: null when never discovered, undefined when there is no such tool. */
export async function toolDefinitionHashOf(tx: Tx, orgId: string, toolId: string): Promise<string | null | undefined> {
  const tool = await tx.selectFrom('tools').select('definition_hash').where('org_id', '=', orgId).where('id', '=', toolId).executeTakeFirst();
  return tool?.definition_hash;
}

function agentBindingsWithTool(tx: Tx, orgId: string, agentId: string) {
  return tx
    .selectFrom('permission_bindings as b')
    .leftJoin('tools as t', (join) => join.onRef('t.id', '=', 'b.target_id').on('b.target_kind', '=', 'tool').on('t.org_id', '=', orgId))
    .selectAll('b')
    .select('t.definition_hash as tool_definition_hash')
    .where('b.org_id', '=', orgId)
    .where('b.agent_id', '=', agentId);
}

/** The agent's permission bindings, oldest first, each with its tool's current definition hash. */
export function bindingsOf(tx: Tx, orgId: string, agentId: string): Promise<BindingWithTool[]> {
  return agentBindingsWithTool(tx, orgId, agentId).orderBy('b.created_at').orderBy('b.id').execute();
}

/** One of the agent's bindings with its tool's current definition hash. */
export function bindingOf(tx: Tx, orgId: string, agentId: string, bindingId: string): Promise<BindingWithTool | undefined> {
  return agentBindingsWithTool(tx, orgId, agentId).where('b.id', '=', bindingId).executeTakeFirst();
}

/**
 * Pins a binding to `hash` unless another writer moved its pin since it was read as `from`; answers
 * the binding, or undefined when it moved (or is gone).
 */
export function repinBinding(
  tx: Tx,
  orgId: string,
  bindingId: string,
  pin: { from: string | null; hash: string; by: string | null; at: Date },
): Promise<BindingRow | undefined> {
  return tx
    .updateTable('permission_bindings')
    .set({ pinned_definition_hash: pin.hash, pinned_at: pin.at, pinned_by: pin.by })
    .where('org_id', '=', orgId)
    .where('id', '=', bindingId)
    .where(sql<boolean>`pinned_definition_hash is not distinct from ${pin.from}`)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Pins every binding on the tool that has no pin yet to `hash`, in the caller's transaction: bindings
 * granted before the tool was ever discovered pin to the first definition discovery sees (rug-pull
 * protection, docs/registry.md). `pinned_by` stays null: discovery pinned them, no person. Answers how
 * many it pinned.
 */
export async function pinUnpinnedBindings(tx: Tx, orgId: string, toolId: string, hash: string, now?: Date): Promise<number> {
  const r = await tx
    .updateTable('permission_bindings')
    .set({ pinned_definition_hash: hash, pinned_at: now ?? sql<Date>`now()` })
    .where('org_id', '=', orgId)
    .where('target_kind', '=', 'tool')
    .where('target_id', '=', toolId)
    .where('pinned_definition_hash', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
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

/**
 * Whether the tool's definition moved away from the one the binding was granted against: the gateway
 * refuses calls under it (TOOL_DEFINITION_CHANGED) until it is re-approved. An unpinned binding never is.
 */
const definitionChanged = (pinned: string | null, current: string | null): boolean => pinned !== null && pinned !== current;

export const toBinding = (row: BindingWithTool): z.infer<typeof bindingOut> => ({
  id: row.id,
  agent_id: row.agent_id,
  target_kind: row.target_kind as (typeof TARGET_KIND)[number],
  target_id: row.target_id,
  actions: row.actions,
  delegated: row.delegated,
  constraints: row.constraints,
  expires_at: row.expires_at ? iso(row.expires_at) : null,
  identity_id: row.identity_id,
  pinned_definition_hash: row.pinned_definition_hash,
  pinned_at: row.pinned_at ? iso(row.pinned_at) : null,
  definition_changed: definitionChanged(row.pinned_definition_hash, row.tool_definition_hash),
  created_at: iso(row.created_at),
});
