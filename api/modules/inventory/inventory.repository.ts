import type { Selectable } from 'kysely';
import type { z } from 'zod';
import type { Tx } from '../../db/database.js';
import type { CredentialRefsTable, McpServersTable, ModelsTable, ResourcesTable, ToolsTable } from '../../db/schema.js';
import { notFound, validationFailed } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import type { credentialOut, mcpServerOut, modelOut, resourceOut, toolOut } from './inventory.schemas.js';

type Table = 'mcp_servers' | 'models' | 'resources' | 'credential_refs' | 'tools';

/** One inventory record of the organisation, or 404; `lock` holds it for an update. */
export async function recordOr404<T extends Table>(tx: Tx, table: T, orgId: string, id: string, what: string, lock = false) {
  const q = tx.selectFrom(table as Table).selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound(`No such ${what}.`);
  return row as unknown as T extends 'tools' ? Selectable<ToolsTable> : T extends 'credential_refs' ? Selectable<CredentialRefsTable> : T extends 'mcp_servers' ? Selectable<McpServersTable> : T extends 'models' ? Selectable<ModelsTable> : Selectable<ResourcesTable>;
}

/**
 * A reference from one record to another must stay inside the organisation; a reference to
 * nothing (or to another organisation's record) answers 422 naming the field.
 */
export async function checkReference(
  tx: Tx,
  orgId: string,
  field: string,
  table: Table,
  id: string | null | undefined,
  resourceType?: 'api' | 'data',
): Promise<void> {
  if (id && !(await recordExists(tx, orgId, table, id, resourceType))) {
    throw validationFailed([{ field, message: 'no such record in this organisation' }]);
  }
}

/** Whether the organisation has this record (an API or data resource when `resourceType` says so). */
export async function recordExists(tx: Tx, orgId: string, table: Table, id: string, resourceType?: 'api' | 'data'): Promise<boolean> {
  if (table === 'resources') {
    let q = tx.selectFrom('resources').select('id').where('org_id', '=', orgId).where('id', '=', id);
    if (resourceType) q = q.where('resource_type', '=', resourceType);
    return (await q.executeTakeFirst()) !== undefined;
  }
  return (await tx.selectFrom(table).select('id').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) !== undefined;
}

export const toMcpServer = (s: Selectable<McpServersTable>, toolCount: number) =>
  ({
    id: s.id,
    name: s.name,
    endpoint: s.endpoint,
    transport: s.transport,
    auth_type: s.auth_type,
    publisher: s.publisher,
    trust_state: s.trust_state,
    tool_count: toolCount,
    version: s.version,
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  }) as z.infer<typeof mcpServerOut>;

export const toModel = (m: Selectable<ModelsTable>) =>
  ({
    id: m.id,
    provider: m.provider,
    model_name: m.model_name,
    model_version: m.model_version,
    hosting: m.hosting,
    data_policy: m.data_policy,
    approved: m.approved,
    max_data_classification: m.max_data_classification,
    version: m.version,
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
  }) as z.infer<typeof modelOut>;

export const toResource = (r: Selectable<ResourcesTable>) =>
  ({
    id: r.id,
    resource_type: r.resource_type,
    name: r.name,
    system: r.system,
    base_url: r.base_url,
    auth_type: r.auth_type,
    criticality: r.criticality,
    kind: r.kind,
    classification: r.classification,
    contains_personal_data: r.contains_personal_data,
    region: r.region,
    created_at: iso(r.created_at),
  }) as z.infer<typeof resourceOut>;

export const toCredential = (c: Selectable<CredentialRefsTable>) =>
  ({
    id: c.id,
    name: c.name,
    provider: c.provider,
    secret_path: c.secret_path,
    credential_type: c.credential_type,
    scope: c.scope,
    shared: c.shared,
    rotation_interval_days: c.rotation_interval_days,
    status: c.status,
    last_rotated_at: c.last_rotated_at ? iso(c.last_rotated_at) : null,
    version: c.version,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  }) as z.infer<typeof credentialOut>;

export const toTool = (t: Selectable<ToolsTable>) =>
  ({
    id: t.id,
    tool_key: t.tool_key,
    name: t.name,
    description: t.description,
    mcp_server_id: t.mcp_server_id,
    api_resource_id: t.api_resource_id,
    data_resource_id: t.data_resource_id,
    operations: t.operations,
    privilege_class: t.privilege_class,
    approval_class: t.approval_class,
    idempotent: t.idempotent,
    input_schema: t.input_schema,
    credential_ref_id: t.credential_ref_id,
    rate_limit_per_minute: t.rate_limit_per_minute,
    blocked: t.blocked,
    builtin: t.builtin,
    version: t.version,
    created_at: iso(t.created_at),
    updated_at: iso(t.updated_at),
  }) as z.infer<typeof toolOut>;
