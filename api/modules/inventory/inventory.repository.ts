import { randomUUID } from 'node:crypto';
import type { Selectable, Updateable } from 'kysely';
import type { z } from 'zod';
import type { Tx } from '../../db/database.js';
import type { CredentialRefsTable, DB, McpServersTable, ModelsTable, ResourcesTable, ToolsTable } from '../../db/schema.js';
import { notFound, validationFailed } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import type {
  apiResourceIn,
  credentialIn,
  credentialOut,
  dataResourceIn,
  mcpServerIn,
  mcpServerOut,
  modelIn,
  modelOut,
  resourceOut,
  toolIn,
  toolOut,
} from './inventory.schemas.js';

type Table = 'mcp_servers' | 'models' | 'resources' | 'credential_refs' | 'tools';
type Row<T extends Table> = Selectable<DB[T]>;

/** One inventory record of the organisation, or 404; `lock` holds it for an update. */
export async function recordOr404<T extends Table>(tx: Tx, table: T, orgId: string, id: string, what: string, lock = false) {
  const q = tx.selectFrom(table as Table).selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound(`No such ${what}.`);
  return row as unknown as Row<T>;
}

/** The organisation's records of one kind, oldest first. */
export async function listRecords<T extends Exclude<Table, 'tools'>>(tx: Tx, table: T, orgId: string) {
  const rows = await tx.selectFrom(table as Table).selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
  return rows as unknown as Row<T>[];
}

/** Changes one record of the organisation and answers it as it is now. */
export async function updateRecord<T extends Table>(tx: Tx, table: T, orgId: string, id: string, values: Updateable<DB[T]>) {
  const row = await tx
    .updateTable(table as Table)
    .set(values as Updateable<DB[Table]>)
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return row as unknown as Row<T>;
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

/** How many tools each MCP server of the organisation has (servers without tools are absent). */
export async function toolCountsByServer(tx: Tx, orgId: string): Promise<Map<string | null, number>> {
  const counts = await tx
    .selectFrom('tools')
    .select((eb) => ['mcp_server_id', eb.fn.countAll<string>().as('n')])
    .where('org_id', '=', orgId)
    .where('mcp_server_id', 'is not', null)
    .groupBy('mcp_server_id')
    .execute();
  return new Map(counts.map((c) => [c.mcp_server_id, Number(c.n)]));
}

/** The ids of one MCP server's tools. */
export function toolsOfServer(tx: Tx, orgId: string, serverId: string) {
  return tx.selectFrom('tools').select('id').where('org_id', '=', orgId).where('mcp_server_id', '=', serverId).execute();
}

export interface ToolFilters {
  mcp_server_id?: string;
  privilege_class?: string;
}

export function findTools(tx: Tx, orgId: string, f: ToolFilters) {
  let q = tx.selectFrom('tools').selectAll().where('org_id', '=', orgId);
  if (f.mcp_server_id) q = q.where('mcp_server_id', '=', f.mcp_server_id);
  if (f.privilege_class) q = q.where('privilege_class', '=', f.privilege_class);
  return q.orderBy('tool_key').execute();
}

export function insertMcpServer(tx: Tx, orgId: string, b: z.output<typeof mcpServerIn>, now: Date) {
  return tx
    .insertInto('mcp_servers')
    .values({ id: randomUUID(), org_id: orgId, ...b, publisher: b.publisher ?? null, created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function insertModel(tx: Tx, orgId: string, b: z.output<typeof modelIn>, now: Date) {
  return tx
    .insertInto('models')
    .values({
      id: randomUUID(),
      org_id: orgId,
      ...b,
      model_version: b.model_version ?? null,
      max_data_classification: null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export type ResourceIn = z.output<typeof apiResourceIn> & z.output<typeof dataResourceIn>;

export function insertResource(tx: Tx, orgId: string, type: 'api' | 'data', b: ResourceIn, now: Date) {
  return tx
    .insertInto('resources')
    .values({
      id: randomUUID(),
      org_id: orgId,
      resource_type: type,
      name: b.name,
      system: b.system,
      base_url: b.base_url ?? null,
      auth_type: b.auth_type ?? null,
      criticality: b.criticality ?? null,
      kind: b.kind ?? null,
      classification: b.classification ?? null,
      contains_personal_data: b.contains_personal_data ?? null,
      region: b.region ?? null,
      created_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function insertCredential(tx: Tx, orgId: string, b: z.output<typeof credentialIn>, now: Date) {
  return tx
    .insertInto('credential_refs')
    .values({
      id: randomUUID(),
      org_id: orgId,
      ...b,
      rotation_interval_days: b.rotation_interval_days ?? null,
      last_rotated_at: null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function insertTool(tx: Tx, orgId: string, b: z.output<typeof toolIn>, now: Date) {
  return tx
    .insertInto('tools')
    .values({
      id: randomUUID(),
      org_id: orgId,
      ...b,
      mcp_server_id: b.mcp_server_id ?? null,
      api_resource_id: b.api_resource_id ?? null,
      data_resource_id: b.data_resource_id ?? null,
      credential_ref_id: b.credential_ref_id ?? null,
      operations: [...new Set(b.operations)],
      input_schema: JSON.stringify(b.input_schema),
      rate_limit_per_minute: null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
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
    source: s.source,
    protocol_version: s.protocol_version,
    capability_hash: s.capability_hash,
    last_seen_at: s.last_seen_at ? iso(s.last_seen_at) : null,
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
    title: t.title,
    description: t.description,
    mcp_server_id: t.mcp_server_id,
    api_resource_id: t.api_resource_id,
    data_resource_id: t.data_resource_id,
    operations: t.operations,
    privilege_class: t.privilege_class,
    privilege_source: t.privilege_source,
    read_only_hint: t.read_only_hint,
    definition_hash: t.definition_hash,
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
