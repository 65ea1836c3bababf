import { randomUUID } from 'node:crypto';
import { sql, type Selectable, type Updateable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { FindingsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso, likePattern } from '../../platform/schemas.js';
import { notifyHoldersOf } from '../notifications/index.js';
import type { FindingFilters, FindingOut, FindingSeverity, FindingStatus } from './findings.schemas.js';

export type FindingRow = Selectable<FindingsTable>;

/** What a detector (discovery's reconciliation, later risk) knows when it opens a finding. */
export interface OpenFindingInput {
  category: string;
  severity: FindingSeverity;
  title: string;
  description: string;
  evidence: Record<string, unknown>;
  agent_id?: string | null;
  mcp_server_id?: string | null;
  tool_id?: string | null;
  run_id?: string | null;
  /**
   * What the finding is about (e.g. `tool_poisoning:read_only:<tool>:<hash>`): while a finding with this
   * key is open or in progress, another is not opened; once it is closed, the next one opens.
   */
  dedupe_key: string;
  /** When it is opened (the run's clock); the process's clock when absent. */
  now?: Date;
}

/** The states in which a finding holds its dedupe key (the partial unique index findings_open_once). */
const HOLDS_KEY = sql<boolean>`status in ('open', 'in_progress')`;

/**
 * Opens a finding in the caller's transaction unless one with the same `dedupe_key` is open or in
 * progress (the partial unique index `findings_open_once` decides, so concurrent runs cannot open two).
 * Answers the new finding's id with `opened: true`, or the id of the one already open with `opened: false`.
 */
export async function openFinding(tx: Tx, orgId: string, f: OpenFindingInput): Promise<{ id: string; opened: boolean }> {
  // A finding closed between the conflict and the look-up frees the key: try again (twice is plenty).
  for (let attempt = 0; attempt < 3; attempt++) {
    const id = await insertUnlessOpen(tx, orgId, f);
    if (id) {
      if (f.severity === 'high' || f.severity === 'critical') await notifySecurityStaff(tx, orgId, id, f);
      return { id, opened: true };
    }
    const open = await openWithKey(tx, orgId, f.dedupe_key);
    if (open) return { id: open.id, opened: false };
  }
  throw new Error(`finding ${f.dedupe_key}: the open one keeps changing`);
}

/** A high or critical finding just opened: every member who may triage findings is told (`finding.high_severity`). */
async function notifySecurityStaff(tx: Tx, orgId: string, id: string, f: OpenFindingInput): Promise<void> {
  const title = `${f.severity === 'critical' ? 'Critical' : 'High'} finding: ${f.title}`;
  const notice = {
    kind: 'finding.high_severity' as const,
    title: title.length > 200 ? `${title.slice(0, 199)}…` : title,
    body: `A ${f.severity} ${f.category.replaceAll('_', ' ')} finding opened (finding ${id}). Triage it with PATCH /findings/${id}.`,
  };
  await notifyHoldersOf(tx, orgId, 'finding:write', [notice], f.now ?? new Date()).execute();
}

async function insertUnlessOpen(tx: Tx, orgId: string, f: OpenFindingInput): Promise<string | undefined> {
  const at = f.now ?? new Date();
  const inserted = await tx
    .insertInto('findings')
    .values({
      id: randomUUID(),
      org_id: orgId,
      category: f.category,
      severity: f.severity,
      title: f.title,
      description: f.description,
      evidence: JSON.stringify(f.evidence),
      agent_id: f.agent_id ?? null,
      mcp_server_id: f.mcp_server_id ?? null,
      tool_id: f.tool_id ?? null,
      run_id: f.run_id ?? null,
      dedupe_key: f.dedupe_key,
      // Always the application's time, to the millisecond as the list's cursor keeps it: the database's now()
      // has microseconds, and a cursor rounded below them would skip the rest of the page's second.
      created_at: at,
      updated_at: at,
    })
    .onConflict((oc) => oc.columns(['org_id', 'dedupe_key']).where(HOLDS_KEY).doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted?.id;
}

/** The open or in-progress finding holding `dedupeKey`, if any (other than `exceptId`). */
export function openWithKey(tx: Tx, orgId: string, dedupeKey: string, exceptId?: string) {
  let q = tx.selectFrom('findings').select('id').where('org_id', '=', orgId).where('dedupe_key', '=', dedupeKey).where(HOLDS_KEY);
  if (exceptId) q = q.where('id', '<>', exceptId);
  return q.executeTakeFirst();
}

/** One page of the organisation's findings, newest first; fetches limit + 1 to tell whether more follow. */
export function listFindings(tx: Tx, orgId: string, f: FindingFilters, after: Position | undefined, limit: number): Promise<FindingRow[]> {
  let q = tx.selectFrom('findings').selectAll().where('org_id', '=', orgId);
  if (f.status) q = q.where('status', '=', f.status);
  if (f.severity) q = q.where('severity', '=', f.severity);
  if (f.category) q = q.where('category', '=', f.category);
  if (f.agent_id) q = q.where('agent_id', '=', f.agent_id);
  if (f.q) {
    const p = likePattern(f.q);
    q = q.where((eb) => eb.or([eb('title', 'ilike', p), eb('description', 'ilike', p)]));
  }
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

/** A finding of the organisation; `lock` holds it for an update in the same transaction. */
export function getFinding(tx: Tx, orgId: string, id: string, lock = false): Promise<FindingRow | undefined> {
  const q = tx.selectFrom('findings').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

export function updateFinding(tx: Tx, orgId: string, id: string, change: Updateable<FindingsTable>): Promise<FindingRow> {
  return tx.updateTable('findings').set(change).where('org_id', '=', orgId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export const toFinding = (r: FindingRow): FindingOut => ({
  id: r.id,
  category: r.category,
  severity: r.severity,
  status: r.status as FindingStatus,
  title: r.title,
  description: r.description,
  evidence: r.evidence as Record<string, unknown>,
  agent_id: r.agent_id,
  mcp_server_id: r.mcp_server_id,
  tool_id: r.tool_id,
  run_id: r.run_id,
  assigned_to: r.assigned_to,
  note: r.note,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
  resolved_at: r.resolved_at ? iso(r.resolved_at) : null,
  version: r.version,
});
