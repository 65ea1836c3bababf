import { sql, type Insertable, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ReportsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { RISK_BAND } from '../shared/index.js';
import type { ReportFormat, ReportKind, ReportOut, ReportStatus } from './reports.schemas.js';

export type ReportRow = Selectable<ReportsTable>;
/** A report row without its file: what listings and the job's bookkeeping read. */
export type ReportHead = Omit<ReportRow, 'content'>;

const HEAD = [
  'id',
  'org_id',
  'kind',
  'parameters',
  'format',
  'status',
  'content_type',
  'file_name',
  'size',
  'error',
  'attempts',
  'created_by',
  'created_by_type',
  'correlation_id',
  'created_at',
  'started_at',
  'completed_at',
] as const;

export function toReport(r: ReportHead): ReportOut {
  return {
    id: r.id,
    kind: r.kind as ReportKind,
    parameters: r.parameters,
    format: r.format as ReportFormat,
    status: r.status as ReportStatus,
    content_type: r.content_type,
    file_name: r.file_name,
    size: r.size,
    error: r.error,
    created_by: r.created_by,
    created_at: iso(r.created_at),
    started_at: r.started_at ? iso(r.started_at) : null,
    completed_at: r.completed_at ? iso(r.completed_at) : null,
  };
}

export function insertReport(tx: Tx, values: Insertable<ReportsTable>): Promise<ReportHead> {
  return tx.insertInto('reports').values(values).returning(HEAD).executeTakeFirstOrThrow();
}

/** One report without its file; `lock` holds the row until the transaction ends. */
export function getReport(tx: Tx, orgId: string, id: string, lock = false): Promise<ReportHead | undefined> {
  const q = tx.selectFrom('reports').select(HEAD).where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** The organisation's reports, newest first, without their files; limit + 1 rows for the next cursor. */
export function listReports(tx: Tx, orgId: string, after: Position | undefined, limit: number): Promise<ReportHead[]> {
  let q = tx.selectFrom('reports').select(HEAD).where('org_id', '=', orgId);
  if (after) {
    const t = new Date(after.t);
    q = q.where((eb) => eb.or([eb('created_at', '<', t), eb.and([eb('created_at', '=', t), eb('id', '<', after.id)])]));
  }
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

/** A ready report's file. */
export async function reportFile(tx: Tx, orgId: string, id: string): Promise<Buffer | null> {
  const row = await tx.selectFrom('reports').select('content').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!row?.content) return null;
  // node-postgres answers a Buffer, the embedded database a Uint8Array: the same bytes either way.
  return Buffer.isBuffer(row.content) ? row.content : Buffer.from(row.content.buffer, row.content.byteOffset, row.content.byteLength);
}

/** The job's start on a report: running, one attempt more, the first start kept. */
export function markRunning(tx: Tx, orgId: string, id: string, now: Date): Promise<ReportHead> {
  return tx
    .updateTable('reports')
    .set((eb) => ({ status: 'running', started_at: eb.fn.coalesce('started_at', sql<Date>`${now}::timestamptz`), attempts: eb('attempts', '+', 1) }))
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returning(HEAD)
    .executeTakeFirstOrThrow();
}

export function markReady(tx: Tx, orgId: string, id: string, file: { content: Buffer; contentType: string; fileName: string }, now: Date) {
  return tx
    .updateTable('reports')
    .set({ status: 'ready', content: file.content, content_type: file.contentType, file_name: file.fileName, size: file.content.length, error: null, completed_at: now })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .execute();
}

export function markFailed(tx: Tx, orgId: string, id: string, error: string, now: Date) {
  return tx
    .updateTable('reports')
    .set({ status: 'failed', error: error.slice(0, 1000), completed_at: now })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .execute();
}

/* ---- What the reports read: the other modules' tables, read only, in the job's transaction. ---- */

export function organisationOf(tx: Tx, orgId: string) {
  return tx.selectFrom('organisations').select(['name', 'slug']).where('id', '=', orgId).executeTakeFirstOrThrow();
}

export interface InventoryRow {
  id: string;
  name: string;
  slug: string;
  environment: string;
  status: string;
  criticality: string;
  data_classification: string;
  gateway_enforced: boolean;
  gateway_access: boolean;
  risk_band: string | null;
  score: number | null;
  source: string;
  last_seen_at: Date | null;
  created_at: Date;
  owners: Array<{ name: string; email: string; owner_type: string }>;
  /** Tool keys it may call: bindings on the tool, or on its MCP server, that have not expired. */
  tools: string[];
}

/** Every agent (of one environment, without revoked ones when asked) with its owners, score and granted tools, by name. */
export async function inventoryRows(tx: Tx, orgId: string, now: Date, filter: { environment?: string; includeRevoked: boolean }): Promise<InventoryRow[]> {
  const { rows } = await sql<InventoryRow>`
    select a.id, a.name, a.slug, a.environment, a.status, a.criticality, a.data_classification, a.gateway_enforced,
           a.gateway_access, a.risk_band, s.score, a.source, a.last_seen_at, a.created_at,
           coalesce((select json_agg(json_build_object('name', o.name, 'email', o.email, 'owner_type', o.owner_type)
                                     order by o.owner_type, o.name collate "C")
                       from agent_owners o where o.org_id = a.org_id and o.agent_id = a.id), '[]') as owners,
           coalesce((select array_agg(distinct t.tool_key order by t.tool_key)
                       from permission_bindings b
                       join tools t on t.org_id = b.org_id
                                   and ((b.target_kind = 'tool' and t.id = b.target_id)
                                     or (b.target_kind = 'mcp_server' and t.mcp_server_id = b.target_id))
                      where b.org_id = a.org_id and b.agent_id = a.id and (b.expires_at is null or b.expires_at > ${now})),
                    '{}') as tools
      from agents a
      left join risk_scores s on s.org_id = a.org_id and s.agent_id = a.id
     where a.org_id = ${orgId}
       ${filter.environment ? sql`and a.environment = ${filter.environment}` : sql``}
       ${filter.includeRevoked ? sql`` : sql`and a.status <> 'revoked'`}
     order by lower(a.name), a.name, a.id`.execute(tx);
  return rows;
}

export interface RegisterRow {
  id: string;
  name: string;
  environment: string;
  status: string;
  score: number;
  band: string;
  factors: Array<{ key: string; contribution: number; why: string; enabled: boolean }>;
  computed_at: Date;
  /** The first daily score on or after the window's first day, to measure the change against. */
  score_then: number | null;
  open_findings: number;
}

/** Scored agents in `minBand` or above, highest score first, with the score at the window's start and their open findings. */
export async function registerRows(tx: Tx, orgId: string, opts: { minBand: string; sinceDay: string; limit?: number }): Promise<RegisterRow[]> {
  const bands = RISK_BAND.slice(Math.max(0, RISK_BAND.indexOf(opts.minBand as (typeof RISK_BAND)[number])));
  const { rows } = await sql<RegisterRow>`
    select a.id, a.name, a.environment, a.status, s.score, s.band, s.factors, s.computed_at,
           (select h.score from risk_history h
             where h.org_id = s.org_id and h.agent_id = s.agent_id and h.day >= ${opts.sinceDay}::date
             order by h.day limit 1) as score_then,
           (select count(*)::int from findings f
             where f.org_id = s.org_id and f.agent_id = s.agent_id and f.status in ('open', 'in_progress')) as open_findings
      from risk_scores s
      join agents a on a.org_id = s.org_id and a.id = s.agent_id
     where s.org_id = ${orgId} and s.band = any(${[...bands]}::text[])
     order by s.score desc, lower(a.name), a.id
     ${opts.limit ? sql`limit ${opts.limit}` : sql``}`.execute(tx);
  return rows;
}

export interface FindingRow {
  id: string;
  severity: string;
  status: string;
  category: string;
  title: string;
  created_at: Date;
  agent_name: string | null;
  server_name: string | null;
  tool_key: string | null;
}

/** Open and in-progress findings, most severe first, then oldest first; at most `limit`, and how many there are. */
export async function openFindings(tx: Tx, orgId: string, limit: number): Promise<{ rows: FindingRow[]; total: number }> {
  const { rows } = await sql<FindingRow & { total: number }>`
    select f.id, f.severity, f.status, f.category, f.title, f.created_at, a.name as agent_name, m.name as server_name,
           t.tool_key, count(*) over ()::int as total
      from findings f
      left join agents a on a.org_id = f.org_id and a.id = f.agent_id
      left join mcp_servers m on m.org_id = f.org_id and m.id = f.mcp_server_id
      left join tools t on t.org_id = f.org_id and t.id = f.tool_id
     where f.org_id = ${orgId} and f.status in ('open', 'in_progress')
     order by case f.severity when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end, f.created_at, f.id
     limit ${limit}`.execute(tx);
  return { rows: rows.map(({ total: _, ...r }) => r), total: rows[0]?.total ?? 0 };
}

export interface ExceptionRow {
  control_id: string;
  agent_name: string | null;
  title: string;
  owner_email: string;
  status: string;
  expires_at: Date;
}

/**
 * Exceptions in force or waiting for a decision (approved or pending, not yet lapsed), soonest to lapse first:
 * the governance module's table, read only.
 */
export async function exceptionsInForce(tx: Tx, orgId: string, now: Date): Promise<ExceptionRow[]> {
  const { rows } = await sql<ExceptionRow>`
    select e.control_id, a.name as agent_name, e.title, e.owner_email, e.status, e.expires_at
      from governance_exceptions e
      left join agents a on a.org_id = e.org_id and a.id = e.agent_id
     where e.org_id = ${orgId} and e.status in ('approved', 'pending') and e.expires_at > ${now}
     order by e.status, e.expires_at, e.id`.execute(tx);
  return rows;
}

export interface TaskRow {
  control_id: string | null;
  agent_name: string | null;
  title: string;
  assignee_email: string | null;
  due_at: Date | null;
  priority: string;
  status: string;
}

/** Remediation tasks open or in progress, most urgent first: the governance module's table, read only. */
export async function openRemediation(tx: Tx, orgId: string): Promise<TaskRow[]> {
  const { rows } = await sql<TaskRow>`
    select t.control_id, a.name as agent_name, t.title, t.assignee_email, t.due_at, t.priority, t.status
      from governance_remediation_tasks t
      left join agents a on a.org_id = t.org_id and a.id = t.agent_id
     where t.org_id = ${orgId} and t.status in ('open', 'in_progress')
     order by case t.priority when 'critical' then 0 when 'high' then 1 when 'medium' then 2 else 3 end,
              t.due_at nulls last, t.created_at, t.id`.execute(tx);
  return rows;
}
