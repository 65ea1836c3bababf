import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Tx } from '../../db/database.js';
import { ApiError } from '../../platform/errors.js';
import { audit } from '../audit/audit.js';
import { checkAgentAllowed } from '../tenants/plans.js';
import { getOrganisation } from '../tenants/tenants.repository.js';
import { countAgents, getAgent, ownersOf, slugTaken, type AgentRow } from './agents.repository.js';
import { SLUG, type agentIn } from './agents.schemas.js';
import type { AGENT_SOURCE } from '../shared/enums.js';

type AgentIn = z.output<typeof agentIn>;

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
export function checkProductionRequirements(a: { owners: number; purpose: string; dataClassification?: string | null }): void {
  const missing: string[] = [];
  if (a.owners === 0) missing.push('owners');
  if (!a.purpose.trim()) missing.push('purpose');
  if (!a.dataClassification) missing.push('data_classification');
  if (missing.length > 0) {
    throw new ApiError('production_requirements', `Production agents need ${missing.join(', ')}.`, { missing });
  }
}

/** Checks the organisation's plan allows one more agent in `environment`. */
export async function checkPlan(tx: Tx, orgId: string, environment: string, excludeAgent?: AgentRow): Promise<void> {
  const org = await getOrganisation(tx, orgId);
  const counts = await countAgents(tx, orgId);
  if (excludeAgent && excludeAgent.status !== 'revoked') {
    counts.total -= 1;
    if (excludeAgent.environment !== 'production') counts.nonProduction -= 1;
  }
  checkAgentAllowed(org?.plan ?? 'developer', environment, counts);
}

/** Agents registered by the Kubernetes controller's service account come from Kubernetes. */
function sourceOf(req: FastifyRequest): (typeof AGENT_SOURCE)[number] {
  const p = req.principal;
  return p?.kind === 'service' && p.roles.includes('controller') ? 'kubernetes' : 'manual';
}

export async function createAgent(tx: Tx, req: FastifyRequest, orgId: string, body: AgentIn) {
  const now = req.server.deps.clock.now();
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
  await tx
    .insertInto('agents')
    .values({
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
    })
    .execute();
  if (body.owners.length > 0) {
    await tx
      .insertInto('agent_owners')
      .values(body.owners.map((o) => ({ id: randomUUID(), org_id: orgId, agent_id: id, ...o, created_at: now })))
      .execute();
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
