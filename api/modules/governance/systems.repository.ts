import { sql, type Insertable, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { GovernanceAiSystemsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import type { AgentFacts, AiSystemClass } from './gaps.js';

export type ClassificationRow = Selectable<GovernanceAiSystemsTable>;

/** An agent as the register shows it: the registry's fields, its classification, and the facts its gaps are read from. */
export interface SystemRow extends AgentFacts {
  agent_id: string;
  name: string;
  slug: string;
  environment: string;
  created_at: Date;
  classification: AiSystemClass | null;
  rationale: string | null;
  classified_by: string | null;
  classified_at: Date | null;
}

/**
 * The agents of the organisation with their classification and facts, in one statement: the registry's own
 * columns, whether an accountable owner and a risk score exist, and whether a decision and a person's approval
 * about the agent are in the evidence chain from `fromSeq` on (the window's first record).
 */
function systemsQuery(tx: Tx, orgId: string, fromSeq: string) {
  return tx
    .selectFrom('agents as a')
    .leftJoin('governance_ai_systems as s', (j) => j.onRef('s.org_id', '=', 'a.org_id').onRef('s.agent_id', '=', 'a.id'))
    .select([
      'a.id as agent_id',
      'a.name',
      'a.slug',
      'a.environment',
      'a.status',
      'a.purpose',
      'a.description',
      'a.gateway_enforced',
      'a.last_attested_at',
      'a.created_at',
      's.classification',
      's.rationale',
      's.classified_by',
      's.classified_at',
      sql<boolean>`exists (select 1 from agent_owners o where o.org_id = a.org_id and o.agent_id = a.id and o.owner_type = 'accountable')`.as(
        'has_accountable_owner',
      ),
      sql<boolean>`exists (select 1 from risk_scores r where r.org_id = a.org_id and r.agent_id = a.id)`.as('has_risk_score'),
      sql<boolean>`exists (select 1 from evidence_records e
        where e.org_id = a.org_id and e.event_type = 'decision' and e.agent_id = a.id and e.seq >= ${fromSeq}::bigint)`.as('decided_in_window'),
      sql<boolean>`exists (select 1 from evidence_records e
        where e.org_id = a.org_id and e.event_type = 'approval' and e.agent_id = a.id and e.seq >= ${fromSeq}::bigint)`.as('approved_in_window'),
    ])
    .where('a.org_id', '=', orgId);
}

const toSystemRow = (r: Awaited<ReturnType<ReturnType<typeof systemsQuery>['execute']>>[number]): SystemRow => ({
  ...r,
  classification: r.classification as AiSystemClass | null,
  last_attested_at: r.last_attested_at ? new Date(r.last_attested_at) : null,
  classified_at: r.classified_at ? new Date(r.classified_at) : null,
  created_at: new Date(r.created_at),
});

/** One page of the register, in the order agents were registered; fetches limit + 1 to tell whether more follow. */
export async function listSystems(
  tx: Tx,
  orgId: string,
  fromSeq: string,
  classification: AiSystemClass | undefined,
  after: Position | undefined,
  limit: number,
): Promise<SystemRow[]> {
  let q = systemsQuery(tx, orgId, fromSeq);
  if (classification === 'unclassified') q = q.where((eb) => eb.or([eb('s.classification', 'is', null), eb('s.classification', '=', 'unclassified')]));
  else if (classification) q = q.where('s.classification', '=', classification);
  if (after) q = q.where(sql<boolean>`(a.created_at, a.id) > (${after.t}::timestamptz, ${after.id}::uuid)`);
  const rows = await q.orderBy('a.created_at').orderBy('a.id').limit(limit + 1).execute();
  return rows.map(toSystemRow);
}

/** One agent of the organisation as the register shows it, or undefined. */
export async function getSystem(tx: Tx, orgId: string, agentId: string, fromSeq: string): Promise<SystemRow | undefined> {
  const row = await systemsQuery(tx, orgId, fromSeq).where('a.id', '=', agentId).executeTakeFirst();
  return row && toSystemRow(row);
}

/** The agent's classification, if it has one. */
export function getClassification(tx: Tx, orgId: string, agentId: string): Promise<ClassificationRow | undefined> {
  return tx.selectFrom('governance_ai_systems').selectAll().where('org_id', '=', orgId).where('agent_id', '=', agentId).executeTakeFirst();
}

/** Sets the agent's classification (created the first time). */
export function upsertClassification(tx: Tx, c: Insertable<GovernanceAiSystemsTable>): Promise<ClassificationRow> {
  return tx
    .insertInto('governance_ai_systems')
    .values(c)
    .onConflict((oc) =>
      oc.columns(['org_id', 'agent_id']).doUpdateSet((eb) => ({
        classification: eb.ref('excluded.classification'),
        rationale: eb.ref('excluded.rationale'),
        classified_by: eb.ref('excluded.classified_by'),
        classified_by_type: eb.ref('excluded.classified_by_type'),
        classified_at: eb.ref('excluded.classified_at'),
        version: sql<number>`governance_ai_systems.version + 1`,
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Whether the organisation has the agent. */
export async function agentExists(tx: Tx, orgId: string, id: string): Promise<boolean> {
  return (await tx.selectFrom('agents').select('id').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) !== undefined;
}

/**
 * Locks the organisation's agent for the rest of the transaction, so that two classifications of it run one after
 * the other (a weak lock: the registry's own updates wait only for the classification's short transaction, and
 * rows that reference the agent are not held up). False when the organisation has no such agent.
 */
export async function lockAgent(tx: Tx, orgId: string, id: string): Promise<boolean> {
  const row = await tx.selectFrom('agents').select('id').where('org_id', '=', orgId).where('id', '=', id).forNoKeyUpdate().executeTakeFirst();
  return row !== undefined;
}
