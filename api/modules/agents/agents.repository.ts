import type { Insertable, Selectable, Updateable } from 'kysely';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { AgentAttestationsTable, AgentOwnersTable, AgentsTable, AgentVersionsTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso, likePattern } from '../../platform/schemas.js';
import type { agentOut } from './agents.schemas.js';
import type { z } from 'zod';

export type AgentOut = z.infer<typeof agentOut>;

export type AgentRow = Selectable<AgentsTable> & { org_slug: string };
export type OwnerRow = Selectable<AgentOwnersTable>;
export type VersionRow = Selectable<AgentVersionsTable>;

function agentsOf(tx: Tx, orgId: string) {
  return tx
    .selectFrom('agents')
    .innerJoin('organisations', 'organisations.id', 'agents.org_id')
    .selectAll('agents')
    .select('organisations.slug as org_slug')
    .where('agents.org_id', '=', orgId);
}

/** An agent of the organisation; `lock` holds it for an update in the same transaction. */
export function getAgent(tx: Tx, orgId: string, id: string, lock = false) {
  const q = agentsOf(tx, orgId).where('agents.id', '=', id);
  return (lock ? q.forUpdate('agents') : q).executeTakeFirst() as Promise<AgentRow | undefined>;
}

export interface AgentFilters {
  q?: string;
  environment?: string;
  status?: string;
  risk_band?: string;
  source?: string;
}

export function listAgents(tx: Tx, orgId: string, f: AgentFilters, after: Position | undefined, limit: number) {
  let q = agentsOf(tx, orgId);
  if (f.q) {
    const p = likePattern(f.q);
    q = q.where((eb) => eb.or([eb('agents.name', 'ilike', p), eb('agents.slug', 'ilike', p), eb('agents.description', 'ilike', p)]));
  }
  if (f.environment) q = q.where('agents.environment', '=', f.environment);
  if (f.status) q = q.where('agents.status', '=', f.status);
  if (f.risk_band) q = q.where('agents.risk_band', '=', f.risk_band);
  if (f.source) q = q.where('agents.source', '=', f.source);
  if (after) q = q.where(sql<boolean>`(agents.created_at, agents.id) > (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('agents.created_at').orderBy('agents.id').limit(limit + 1).execute() as Promise<AgentRow[]>;
}

export async function ownersOf(tx: Tx, orgId: string, agentIds: string[]): Promise<Map<string, OwnerRow[]>> {
  const out = new Map<string, OwnerRow[]>(agentIds.map((id) => [id, []]));
  if (agentIds.length === 0) return out;
  const rows = await tx
    .selectFrom('agent_owners')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', 'in', agentIds)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  for (const r of rows) out.get(r.agent_id)?.push(r);
  return out;
}

export async function countAgents(tx: Tx, orgId: string) {
  const r = await tx
    .selectFrom('agents')
    .select((eb) => [
      eb.fn.countAll<string>().as('total'),
      sql<string>`count(*) filter (where environment <> 'production')`.as('non_production'),
    ])
    .where('org_id', '=', orgId)
    .where('status', '<>', 'revoked')
    .executeTakeFirstOrThrow();
  return { total: Number(r.total), nonProduction: Number(r.non_production) };
}

export async function slugTaken(tx: Tx, orgId: string, slug: string): Promise<boolean> {
  const r = await tx.selectFrom('agents').select('id').where('org_id', '=', orgId).where('slug', '=', slug).executeTakeFirst();
  return r !== undefined;
}

export async function insertAgent(tx: Tx, agent: Insertable<AgentsTable>): Promise<void> {
  await tx.insertInto('agents').values(agent).execute();
}

/** Changes an agent of the organisation; the caller sets its version and updated_at where they move. */
export async function updateAgent(tx: Tx, orgId: string, id: string, change: Updateable<AgentsTable>): Promise<void> {
  await tx.updateTable('agents').set(change).where('org_id', '=', orgId).where('id', '=', id).execute();
}

export async function insertOwners(tx: Tx, owners: Insertable<AgentOwnersTable>[]): Promise<void> {
  await tx.insertInto('agent_owners').values(owners).execute();
}

export function insertOwner(tx: Tx, owner: Insertable<AgentOwnersTable>): Promise<OwnerRow> {
  return tx.insertInto('agent_owners').values(owner).returningAll().executeTakeFirstOrThrow();
}

export function insertVersion(tx: Tx, version: Insertable<AgentVersionsTable>): Promise<VersionRow> {
  return tx.insertInto('agent_versions').values(version).returningAll().executeTakeFirstOrThrow();
}

export async function insertAttestation(tx: Tx, attestation: Insertable<AgentAttestationsTable>): Promise<void> {
  await tx.insertInto('agent_attestations').values(attestation).execute();
}

export const agentUri = (orgSlug: string, agentSlug: string) => `agent://${orgSlug}/${agentSlug}`;

export const toOwner = (o: OwnerRow) => ({
  id: o.id,
  name: o.name,
  email: o.email,
  owner_type: o.owner_type as 'accountable' | 'technical' | 'business',
  created_at: iso(o.created_at),
});

export function toAgent(a: AgentRow, owners: OwnerRow[]) {
  return {
    id: a.id,
    slug: a.slug,
    agent_uri: agentUri(a.org_slug, a.slug),
    name: a.name,
    description: a.description,
    purpose: a.purpose,
    framework: a.framework,
    environment: a.environment,
    business_unit: a.business_unit,
    criticality: a.criticality,
    data_classification: a.data_classification,
    internet_exposure: a.internet_exposure,
    code_execution: a.code_execution,
    persistent_memory: a.persistent_memory,
    human_approval_coverage: a.human_approval_coverage,
    gateway_enforced: a.gateway_enforced,
    tags: a.tags,
    status: a.status,
    gateway_access: a.gateway_access,
    source: a.source,
    external_ref: a.external_ref,
    integration_id: a.integration_id,
    last_seen_at: a.last_seen_at ? iso(a.last_seen_at) : null,
    risk_band: a.risk_band,
    owners: owners.map(toOwner),
    last_attested_at: a.last_attested_at ? iso(a.last_attested_at) : null,
    version: a.version,
    created_at: iso(a.created_at),
    updated_at: iso(a.updated_at),
  } as AgentOut;
}
