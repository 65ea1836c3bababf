import { sql, type Insertable, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { GovernanceControlMappingsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';
import type { Condition } from './catalogue.js';
import type { EvidenceProbe, ExceptionRef, TaskRef } from './coverage.js';
import { isCatalogued } from './evidence-types.js';
import type { MappingOut } from './governance.schemas.js';
import { OPEN_TASK_STATUSES } from './remediation.schemas.js';

export type MappingRow = Selectable<GovernanceControlMappingsTable>;

/** The organisation's own mappings, of one control or of all, oldest first. */
export function listMappings(tx: Tx, orgId: string, controlId?: string): Promise<MappingRow[]> {
  let q = tx.selectFrom('governance_control_mappings').selectAll().where('org_id', '=', orgId);
  if (controlId) q = q.where('control_id', '=', controlId);
  return q.orderBy('created_at').orderBy('id').execute();
}

/** Adds a mapping; undefined when the control already has one of the same type and condition. */
export async function insertMapping(tx: Tx, m: Insertable<GovernanceControlMappingsTable>): Promise<MappingRow | undefined> {
  return tx
    .insertInto('governance_control_mappings')
    .values(m)
    .onConflict((oc) => oc.expression(sql`org_id, control_id, evidence_event_type, (coalesce(condition, '{}'::jsonb))`).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export const toMapping = (r: MappingRow): MappingOut => ({
  id: r.id,
  control_id: r.control_id,
  source: 'organisation',
  evidence_event_type: r.evidence_event_type,
  condition: (r.condition as Condition | null) ?? null,
  rationale: r.rationale,
  catalogued: isCatalogued(r.evidence_event_type),
  created_at: iso(r.created_at),
  created_by: r.created_by,
});

/**
 * For each probe, whether a record of its type whose payload contains its condition exists from `fromSeq` on, in
 * one statement: each probe is a short range of the index (org_id, event_type, seq), stopped at the first match.
 */
export async function probeEvidence(tx: Tx, orgId: string, fromSeq: string, probes: EvidenceProbe[]): Promise<boolean[]> {
  if (probes.length === 0) return [];
  // A probe without a condition leaves `c` out: it reads as SQL null.
  const input = probes.map((p, i) => ({ i, t: p.evidence_event_type, ...(p.condition ? { c: p.condition } : {}) }));
  const { rows } = await sql<{ i: number; found: boolean }>`
    select p.i, exists (
      select 1 from evidence_records e
      where e.org_id = ${orgId} and e.event_type = p.t and e.seq >= ${fromSeq}::bigint
        and (p.c is null or e.payload @> p.c)
    ) as found
    from jsonb_to_recordset(${JSON.stringify(input)}::jsonb) as p (i integer, t text, c jsonb)`.execute(tx);
  const found = new Array<boolean>(probes.length).fill(false);
  for (const r of rows) found[r.i] = r.found;
  return found;
}

/** Open and in-progress remediation tasks on controls, by control id, oldest first. */
export async function openTasksByControl(tx: Tx, orgId: string, controlIds?: string[]): Promise<Map<string, TaskRef[]>> {
  let q = tx
    .selectFrom('governance_remediation_tasks')
    .select(['id', 'title', 'control_id'])
    .where('org_id', '=', orgId)
    .where('status', 'in', OPEN_TASK_STATUSES)
    .where('control_id', 'is not', null);
  if (controlIds) q = q.where('control_id', 'in', controlIds.length ? controlIds : ['00000000-0000-0000-0000-000000000000']);
  const rows = await q.orderBy('created_at').orderBy('id').execute();
  const out = new Map<string, TaskRef[]>();
  for (const r of rows) out.set(r.control_id!, [...(out.get(r.control_id!) ?? []), { id: r.id, title: r.title }]);
  return out;
}

/** Approved exceptions in force at `now` for the whole organisation (no agent), by control id. */
export async function orgExceptionsInForce(tx: Tx, orgId: string, now: Date): Promise<Map<string, ExceptionRef[]>> {
  const rows = await tx
    .selectFrom('governance_exceptions')
    .select(['id', 'title', 'control_id', 'expires_at'])
    .where('org_id', '=', orgId)
    .where('status', '=', 'approved')
    .where('agent_id', 'is', null)
    .where('expires_at', '>', now)
    .execute();
  const out = new Map<string, ExceptionRef[]>();
  for (const r of rows) out.set(r.control_id, [...(out.get(r.control_id) ?? []), { id: r.id, title: r.title, expires_at: new Date(r.expires_at) }]);
  return out;
}

/** Used by the expiry job before it works organisation by organisation (migration 0014's owner-defined function). */
export async function orgsWithExpiringExceptions(db: Db, now: Date, until: Date): Promise<string[]> {
  const { rows } = await sql<{ org_id: string }>`
    select org_id from governance_orgs_with_expiring_exceptions(${now}::timestamptz, ${until}::timestamptz) as org_id`.execute(db);
  return rows.map((r) => r.org_id);
}
