import { randomUUID } from 'node:crypto';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { ApiError, notFound, validationFailed } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { recordExists } from '../inventory/index.js';
import { checkAgentAllowed } from '../tenants/index.js';
import { getOrganisation } from '../tenants/index.js';
import {
  countAgents,
  getAgent,
  insertAgent,
  insertAttestation,
  insertOwner,
  insertOwners,
  insertVersion,
  listAgents,
  ownersOf,
  slugTaken,
  toAgent,
  updateAgent,
  type AgentFilters,
  type AgentRow,
} from './agents.repository.js';
import { SLUG, type agentIn, type agentPatch, type ownerIn, type versionIn } from './agents.schemas.js';
import type { AGENT_SOURCE } from '../shared/index.js';

type AgentIn = z.output<typeof agentIn>;
type AgentPatch = z.output<typeof agentPatch>;
type OwnerIn = z.output<typeof ownerIn>;
type VersionIn = z.output<typeof versionIn>;

/** The agent, or 404 not_found: another organisation's agent does not exist here. */
export async function agentOr404(tx: Tx, orgId: string, agentId: string, lock = false) {
  const agent = await getAgent(tx, orgId, agentId, lock);
  if (!agent) throw notFound('No such agent.');
  return agent;
}

export async function agentWithOwners(tx: Tx, orgId: string, agentId: string) {
  const agent = await agentOr404(tx, orgId, agentId);
  return toAgent(agent, (await ownersOf(tx, orgId, [agentId])).get(agentId)!);
}

/** A slug from a name: lower-case words joined by hyphens, at most 100 characters. */
export function slugify(name: string): string {
  const s = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 100)
    .replace(/-+$/, '');
  return SLUG.test(s) ? s : 'agent';
}

async function freeSlug(tx: Tx, orgId: string, base: string): Promise<string> {
  if (!(await slugTaken(tx, orgId, base))) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base.slice(0, 100 - String(n).length - 1)}-${n}`;
    if (!(await slugTaken(tx, orgId, candidate))) return candidate;
  }
}

/**
 * Production agents need an owner, a purpose and a data classification (spec core rule 9).
 * Answers 422 production_requirements naming what is missing.
 */
function checkProductionRequirements(a: { owners: number; purpose: string; dataClassification?: string | null }): void {
  const missing: string[] = [];
  if (a.owners === 0) missing.push('owners');
  if (!a.purpose.trim()) missing.push('purpose');
  if (!a.dataClassification) missing.push('data_classification');
  if (missing.length > 0) {
    throw new ApiError('production_requirements', `Production agents need ${missing.join(', ')}.`, { missing });
  }
}

/** Checks the organisation's plan allows one more agent in `environment`. */
async function checkPlan(tx: Tx, orgId: string, environment: string, excludeAgent?: AgentRow): Promise<void> {
  const org = await getOrganisation(tx, orgId);
  const counts = await countAgents(tx, orgId);
  if (excludeAgent && excludeAgent.status !== 'revoked') {
    counts.total -= 1;
    if (excludeAgent.environment !== 'production') counts.nonProduction -= 1;
  }
  checkAgentAllowed(org?.plan ?? 'developer', environment, counts);
}

/** Agents registered by the Kubernetes controller's service account come from Kubernetes. */
function sourceOf(req: RequestContext): (typeof AGENT_SOURCE)[number] {
  const p = req.principal;
  return p?.kind === 'service' && p.roles.includes('controller') ? 'kubernetes' : 'manual';
}

async function createAgent(tx: Tx, clock: Clock, req: RequestContext, orgId: string, body: AgentIn) {
  const now = clock.now();
  if (body.environment === 'production') {
    checkProductionRequirements({
      owners: body.owners.length,
      purpose: body.purpose,
      dataClassification: body.data_classification,
    });
  }
  await checkPlan(tx, orgId, body.environment);
  let slug: string;
  if (body.slug) {
    if (await slugTaken(tx, orgId, body.slug)) {
      throw new ApiError('conflict', `An agent with slug "${body.slug}" exists.`, { field: 'slug' });
    }
    slug = body.slug;
  } else {
    slug = await freeSlug(tx, orgId, slugify(body.name));
  }
  const id = randomUUID();
  await insertAgent(tx, {
    id,
    org_id: orgId,
    slug,
    name: body.name,
    description: body.description,
    purpose: body.purpose,
    framework: body.framework,
    environment: body.environment,
    business_unit: body.business_unit ?? null,
    criticality: body.criticality,
    data_classification: body.data_classification ?? 'internal',
    internet_exposure: body.internet_exposure,
    code_execution: body.code_execution,
    persistent_memory: body.persistent_memory,
    human_approval_coverage: body.human_approval_coverage,
    tags: body.tags,
    source: sourceOf(req),
    external_ref: null,
    risk_band: null,
    last_attested_at: null,
    created_at: now,
    updated_at: now,
  });
  if (body.owners.length > 0) {
    await insertOwners(
      tx,
      body.owners.map((o) => ({ id: randomUUID(), org_id: orgId, agent_id: id, ...o, created_at: now })),
    );
  }
  await audit(tx, req, orgId, {
    action: 'agent.created',
    targetType: 'agent',
    targetId: id,
    details: { slug, environment: body.environment },
  });
  const agent = (await getAgent(tx, orgId, id))!;
  return { agent, owners: (await ownersOf(tx, orgId, [id])).get(id)! };
}

/** One page of the organisation's agents with their owners; `query.cursor` continues a listing. */
export function listAgentsPage(
  db: Db,
  cursors: Cursors,
  orgId: string,
  query: AgentFilters & { limit: number; cursor?: string },
) {
  const { limit, cursor, ...filters } = query;
  const scope = `agents:${orgId}`;
  const after = cursors.decode(scope, cursor);
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listAgents(tx, orgId, filters, after, limit);
    const owners = await ownersOf(tx, orgId, rows.map((a) => a.id));
    return cursors.page(scope, rows, limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => toAgent(a, owners.get(a.id) ?? []));
  });
}

export async function registerAgent(db: Db, clock: Clock, req: RequestContext, orgId: string, body: AgentIn) {
  const created = await inScope(db, { orgId }, (tx) => createAgent(tx, clock, req, orgId, body));
  return toAgent(created.agent, created.owners);
}

export function readAgent(db: Db, orgId: string, agentId: string) {
  return inScope(db, { orgId }, (tx) => agentWithOwners(tx, orgId, agentId));
}

/** Applies a patch to an agent, honouring If-Match when sent; production agents keep their requirements. */
export function changeAgent(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  agentId: string,
  patch: AgentPatch,
  ifMatch: string | string[] | undefined,
) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await agentOr404(tx, orgId, agentId, true);
    checkIfMatch(ifMatch, before.version, false);
    const changes = changesOf(before, patch);
    const next = { ...before, ...valuesOf(changes) } as typeof before;
    if (next.environment === 'production' && (changes.environment || changes.purpose || changes.data_classification)) {
      const owners = (await ownersOf(tx, orgId, [agentId])).get(agentId)!;
      checkProductionRequirements({ owners: owners.length, purpose: next.purpose, dataClassification: next.data_classification });
    }
    if (changes.environment) await checkPlan(tx, orgId, next.environment, before);
    if (Object.keys(changes).length > 0) {
      await updateAgent(tx, orgId, agentId, { ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() });
      await audit(tx, req, orgId, { action: 'agent.updated', targetType: 'agent', targetId: agentId, details: changes });
    }
    return agentWithOwners(tx, orgId, agentId);
  });
}

export function addOwner(db: Db, clock: Clock, req: RequestContext, orgId: string, agentId: string, owner: OwnerIn) {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const row = await insertOwner(tx, { id: randomUUID(), org_id: orgId, agent_id: agentId, ...owner, created_at: clock.now() });
    await audit(tx, req, orgId, {
      action: 'agent.owner_added',
      targetType: 'agent',
      targetId: agentId,
      details: { owner_id: row.id, owner_type: row.owner_type },
    });
    return row;
  });
}

export function addVersion(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, agentId: string, body: VersionIn) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    if (body.model_id && !(await recordExists(tx, orgId, 'models', body.model_id))) {
      throw validationFailed([{ field: 'model_id', message: 'no such model in this organisation' }]);
    }
    const version = await insertVersion(tx, {
      id: randomUUID(),
      org_id: orgId,
      agent_id: agentId,
      version_label: body.version_label,
      model_id: body.model_id ?? null,
      manifest: JSON.stringify(body.manifest),
      change_summary: body.change_summary,
      created_by: actor.userId,
      created_at: clock.now(),
    });
    await audit(tx, req, orgId, {
      action: 'agent.version_added',
      targetType: 'agent',
      targetId: agentId,
      details: { version_id: version.id, version_label: version.version_label },
    });
    return version;
  });
}

/** Records that `actor` attests the agent's registration at `now`, kept on the agent for risk scoring. */
export function attestAgent(db: Db, req: RequestContext, actor: ActorPrincipal, agentId: string, statement: string, now: Date) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId, true);
    const id = randomUUID();
    await insertAttestation(tx, { id, org_id: orgId, agent_id: agentId, statement, attested_by: actor.userId, attested_at: now });
    await updateAgent(tx, orgId, agentId, { last_attested_at: now });
    await audit(tx, req, orgId, { action: 'agent.attested', targetType: 'agent', targetId: agentId });
    return { id, agent_id: agentId, statement, attested_by: actor.userId, attested_at: iso(now) };
  });
}
