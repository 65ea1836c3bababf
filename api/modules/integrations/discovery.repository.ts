import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type {
  AgentsTable,
  AgentVersionsTable,
  McpServersTable,
  ModelsTable,
  ResourcesTable,
  ToolsTable,
} from '../../db/schema.js';

/**
 * The SQL of reconciliation: how discovery finds and writes the registry's records. Every function takes
 * the run's open transaction (the organisation in scope) and answers rows.
 */

export type ToolRow = Selectable<ToolsTable>;
export type ServerRow = Selectable<McpServersTable>;
export type DiscoveredAgentRow = Selectable<AgentsTable>;

export function modelByName(tx: Tx, orgId: string, provider: string, modelName: string) {
  return tx
    .selectFrom('models')
    .select(['id'])
    .where('org_id', '=', orgId)
    .where('provider', '=', provider)
    .where('model_name', '=', modelName)
    .orderBy('created_at')
    .executeTakeFirst();
}

export async function insertModelRow(tx: Tx, row: Insertable<ModelsTable>): Promise<void> {
  await tx.insertInto('models').values(row).execute();
}

export function resourceByName(tx: Tx, orgId: string, name: string) {
  return tx
    .selectFrom('resources')
    .select(['id', 'resource_type'])
    .where('org_id', '=', orgId)
    .where('name', '=', name)
    .orderBy('created_at')
    .executeTakeFirst();
}

export async function insertResourceRow(tx: Tx, row: Insertable<ResourcesTable>): Promise<void> {
  await tx.insertInto('resources').values(row).execute();
}

export function serverByEndpoint(tx: Tx, orgId: string, endpoint: string) {
  return tx.selectFrom('mcp_servers').selectAll().where('org_id', '=', orgId).where('endpoint', '=', endpoint).forUpdate().executeTakeFirst();
}

export function insertServerRow(tx: Tx, row: Insertable<McpServersTable>) {
  return tx.insertInto('mcp_servers').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateServerRow(tx: Tx, orgId: string, id: string, change: Updateable<McpServersTable>): Promise<void> {
  await tx.updateTable('mcp_servers').set(change).where('org_id', '=', orgId).where('id', '=', id).execute();
}

/** The organisation's tools with these keys, locked: reconciliation may change them. */
export async function toolsByKey(tx: Tx, orgId: string, keys: string[]): Promise<Map<string, ToolRow>> {
  if (keys.length === 0) return new Map();
  const rows = await tx.selectFrom('tools').selectAll().where('org_id', '=', orgId).where('tool_key', 'in', keys).forUpdate().execute();
  return new Map(rows.map((t) => [t.tool_key, t]));
}

export function insertToolRow(tx: Tx, row: Insertable<ToolsTable>) {
  return tx.insertInto('tools').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function updateToolRow(tx: Tx, orgId: string, id: string, change: Updateable<ToolsTable>): Promise<void> {
  await tx.updateTable('tools').set(change).where('org_id', '=', orgId).where('id', '=', id).execute();
}

/** The next version number of a tool's recorded definitions. */
export async function nextToolVersion(tx: Tx, orgId: string, toolId: string): Promise<number> {
  const r = await tx
    .selectFrom('tool_versions')
    .select((eb) => eb.fn.max('number').as('n'))
    .where('org_id', '=', orgId)
    .where('tool_id', '=', toolId)
    .executeTakeFirst();
  return Number(r?.n ?? 0) + 1;
}

export async function insertToolVersion(
  tx: Tx,
  row: { id: string; org_id: string; tool_id: string; number: number; title: string | null; description: string; input_schema: string; read_only_hint: boolean | null; definition_hash: string; run_id: string },
): Promise<void> {
  await tx.insertInto('tool_versions').values(row).execute();
}

/** How many bindings hold this tool pinned to another definition than `hash` (they stop at the gateway). */
export async function bindingsPinnedElsewhere(tx: Tx, orgId: string, toolId: string, hash: string): Promise<number> {
  const r = await tx
    .selectFrom('permission_bindings')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('org_id', '=', orgId)
    .where('target_kind', '=', 'tool')
    .where('target_id', '=', toolId)
    .where('pinned_definition_hash', 'is not', null)
    .where('pinned_definition_hash', '<>', hash)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export function agentByExternalRef(tx: Tx, orgId: string, externalRef: string) {
  return tx.selectFrom('agents').selectAll().where('org_id', '=', orgId).where('external_ref', '=', externalRef).forUpdate().executeTakeFirst();
}

export async function slugInUse(tx: Tx, orgId: string, slug: string): Promise<boolean> {
  return (await tx.selectFrom('agents').select('id').where('org_id', '=', orgId).where('slug', '=', slug).executeTakeFirst()) !== undefined;
}

export async function insertAgentRow(tx: Tx, row: Insertable<AgentsTable>): Promise<void> {
  await tx.insertInto('agents').values(row).execute();
}

export async function updateAgentRow(tx: Tx, orgId: string, id: string, change: Updateable<AgentsTable>): Promise<void> {
  await tx.updateTable('agents').set(change).where('org_id', '=', orgId).where('id', '=', id).execute();
}

export async function insertOwnerRow(tx: Tx, row: { id: string; org_id: string; agent_id: string; name: string; email: string; owner_type: string }): Promise<void> {
  await tx.insertInto('agent_owners').values(row).execute();
}

export function latestAgentVersion(tx: Tx, orgId: string, agentId: string) {
  return tx
    .selectFrom('agent_versions')
    .select(['model_id', 'version_label'])
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .executeTakeFirst();
}

export async function countAgentVersions(tx: Tx, orgId: string, agentId: string): Promise<number> {
  const r = await tx
    .selectFrom('agent_versions')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function insertAgentVersionRow(tx: Tx, row: Insertable<AgentVersionsTable>): Promise<void> {
  await tx.insertInto('agent_versions').values(row).execute();
}

/** Records an identity a source says the agent has; answers whether it was new. */
export async function upsertExternalIdentity(
  tx: Tx,
  row: { id: string; org_id: string; agent_id: string; identity_type: string; subject: string; issuer: string | null; authentication_strength: 'weak' | 'moderate' | 'strong' | null; now: Date },
): Promise<boolean> {
  const { now, ...values } = row;
  const r = await tx
    .insertInto('agent_external_identities')
    .values({ ...values, first_seen_at: now, last_seen_at: now })
    .onConflict((oc) =>
      oc.columns(['agent_id', 'identity_type', 'subject']).doUpdateSet({ last_seen_at: now, issuer: values.issuer, authentication_strength: values.authentication_strength }),
    )
    // xmax is 0 on a row this statement inserted, and the updating transaction's id on one it updated.
    .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
    .executeTakeFirstOrThrow();
  return r.inserted;
}

export async function bindingExists(tx: Tx, orgId: string, agentId: string, targetKind: string, targetId: string): Promise<boolean> {
  const r = await tx
    .selectFrom('permission_bindings')
    .select('id')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('target_kind', '=', targetKind)
    .where('target_id', '=', targetId)
    .executeTakeFirst();
  return r !== undefined;
}

export async function insertBindingRow(
  tx: Tx,
  row: { id: string; org_id: string; agent_id: string; target_kind: string; target_id: string; actions: string[]; pinned_definition_hash: string | null; pinned_at: Date | null; created_at: Date },
): Promise<void> {
  await tx
    .insertInto('permission_bindings')
    .values({ ...row, delegated: false, constraints: JSON.stringify({}), expires_at: null, identity_id: null, created_by: null, pinned_by: null })
    .execute();
}

export async function delegationExists(tx: Tx, orgId: string, agentId: string, principalRef: string): Promise<boolean> {
  const r = await tx
    .selectFrom('delegations')
    .select('id')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('principal_ref', '=', principalRef)
    .executeTakeFirst();
  return r !== undefined;
}

export async function insertDelegationRow(
  tx: Tx,
  row: { id: string; org_id: string; agent_id: string; principal_ref: string; display_name: string; principal_type: string; scopes: string[]; created_at: Date },
): Promise<void> {
  await tx.insertInto('delegations').values({ ...row, expires_at: null, created_by: null }).execute();
}
