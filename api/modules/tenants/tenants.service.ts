import { randomUUID } from 'node:crypto';
import type { RequestContext } from '../../platform/context.js';
import { inScope, type Db } from '../../db/database.js';
import { sessionsChanged } from '../../platform/auth.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { audit, recordAudit } from '../audit/index.js';
import { seedSampleTools } from '../inventory/index.js';
import { notify } from '../notifications/index.js';
import { createSession, setSessionOrg, type NewSession } from '../sessions/index.js';
import {
  getOrganisation,
  insertMembership,
  insertOrganisation,
  organisationWithSlugForUpdate,
  seesEveryOrganisation,
  updateOrganisationRow,
  type OrganisationRow,
} from './tenants.repository.js';
import type { Plan } from './tenants.schemas.js';

export interface NewOrganisation {
  name: string;
  slug: string;
  primaryRegion: string;
  /** The plan it starts on: DEFAULT_PLAN for onboarding, `team` for the demo organisation. */
  plan: Plan;
  creator: { userId: string; displayName: string };
  correlationId: string;
  now: Date;
}

/** Reads one organisation in its own scope. */
export function findOrganisation(db: Db, orgId: string): Promise<OrganisationRow | undefined> {
  return inScope(db, { orgId }, (tx) => getOrganisation(tx, orgId));
}

/**
 * Creates an organisation with its creator as organisation administrator, in one transaction
 * scoped to the new organisation, so row-level security checks every row written.
 */
export async function createOrganisation(db: Db, o: NewOrganisation): Promise<OrganisationRow> {
  const id = randomUUID();
  try {
    return await inScope(db, { orgId: id, userId: o.creator.userId }, async (tx) => {
      const org = await insertOrganisation(tx, {
        id,
        slug: o.slug,
        name: o.name,
        primary_region: o.primaryRegion,
        plan: o.plan,
        created_at: o.now,
        updated_at: o.now,
      });
      await insertMembership(tx, {
        org_id: id,
        user_id: o.creator.userId,
        display_name: o.creator.displayName,
        roles: ['org_admin'],
        created_at: o.now,
        updated_at: o.now,
      });
      await recordAudit(
        tx,
        id,
        {
          actorType: 'person',
          actorId: o.creator.userId,
          action: 'tenant.onboarded',
          targetType: 'tenant',
          targetId: id,
          outcome: 'success',
          correlationId: o.correlationId,
          details: { slug: o.slug, primary_region: o.primaryRegion, plan: o.plan },
        },
        o.now,
      );
      await seedSampleTools(tx, id, o.now);
      await notify(
        tx,
        id,
        o.creator.userId,
        'organisation.welcome',
        `Welcome to ${o.name}`,
        'You are the organisation administrator. Add people under Users and register your first agent.',
        o.now,
      );
      return org;
    });
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new ApiError('conflict', `The slug "${o.slug}" is taken; choose another.`, { field: 'slug' });
    }
    throw err;
  }
}

/**
 * Onboarding: creates the organisation, then moves the session `sessionId` of a signed-in person
 * creating another organisation to it, or opens the first session of a caller who has none (the
 * route sets its cookies).
 */
export async function onboardOrganisation(
  db: Db,
  o: NewOrganisation,
  sessionId: string | null,
  sessionTtlSeconds: number,
): Promise<{ org: OrganisationRow; session: NewSession | null }> {
  const org = await createOrganisation(db, o);
  if (sessionId) {
    await setSessionOrg(db, sessionId, org.id);
    return { org, session: null };
  }
  return { org, session: await createSession(db, o.creator.userId, org.id, o.now, sessionTtlSeconds) };
}

export interface OrganisationPatch {
  name?: string | null;
  content_retention?: string | null;
  approval_ttl_seconds?: number | null;
  owners_count_as_self?: boolean | null;
}

/**
 * Applies a patch to the request's organisation: honours If-Match when sent, bumps the version and
 * audits what changed under `action`; a patch that changes nothing writes nothing.
 */
export async function updateOrganisation(
  db: Db,
  req: RequestContext,
  orgId: string,
  patch: OrganisationPatch,
  action: string,
  ifMatch: string | undefined,
): Promise<OrganisationRow> {
  const updated = await inScope(db, { orgId }, async (tx) => {
    const org = await getOrganisation(tx, orgId, true);
    if (!org) throw notFound();
    checkIfMatch(ifMatch, org.version, false);
    const changes = changesOf(org, patch);
    if (Object.keys(changes).length === 0) return org;
    const updated = await updateOrganisationRow(tx, orgId, {
      ...valuesOf(changes),
      version: org.version + 1,
      updated_at: req.server.deps.clock.now(),
    });
    await audit(tx, req, orgId, { action, targetType: 'tenant', targetId: orgId, details: changes });
    return updated;
  });
  // The organisation's name and version are what GET /auth/me shows from a remembered session: read afresh.
  sessionsChanged(db);
  return updated;
}

export class PlanChangeError extends Error {}

/**
 * Moves the organisation `slug` to another plan: what a platform operator does with `tollgate org
 * set-plan` (no API operation changes a plan; billing would). Runs on the schema owner's connection, in
 * one transaction with its audit entry (`tenant.plan_changed`, actor `system`, the operator named in the
 * details). The limits of the new plan apply to agents created from now on; existing agents stay.
 */
export async function changePlan(
  db: Db,
  c: { slug: string; plan: Plan; operator: string; reason: string | null; correlationId: string; now: Date },
): Promise<{ org: OrganisationRow; from: Plan }> {
  return db.transaction().execute(async (tx) => {
    if (!(await seesEveryOrganisation(tx))) {
      throw new PlanChangeError('this connection cannot see every organisation: set MIGRATION_DATABASE_URL to the schema owner');
    }
    const org = await organisationWithSlugForUpdate(tx, c.slug);
    if (!org) throw new PlanChangeError(`no organisation has the slug "${c.slug}"`);
    const from = org.plan as Plan;
    if (from === c.plan) return { org, from };
    const updated = await updateOrganisationRow(tx, org.id, { plan: c.plan, version: org.version + 1, updated_at: c.now });
    await recordAudit(
      tx,
      org.id,
      {
        actorType: 'system',
        actorId: null,
        action: 'tenant.plan_changed',
        targetType: 'tenant',
        targetId: org.id,
        outcome: 'success',
        correlationId: c.correlationId,
        details: { from, to: c.plan, operator: c.operator, reason: c.reason },
      },
      c.now,
    );
    return { org: updated, from };
  });
}
