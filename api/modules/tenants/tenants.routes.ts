import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf, onboardingCallerOf, setSessionCookies } from '../../platform/auth.js';
import { notFound } from '../../platform/errors.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { caller } from '../../platform/route.js';
import { toTenant } from './tenants.repository.js';
import { onboardIn, tenantOut, tenantPatchIn } from './tenants.schemas.js';
import { findOrganisation, onboardOrganisation, updateOrganisation } from './tenants.service.js';

export async function tenantsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;

  r.post(
    '/tenants/onboard',
    {
      ...caller('onboarding'),
      schema: {
        summary: 'Create an organisation; the caller becomes its organisation administrator',
        tags: ['Authentication and accounts'],
        body: onboardIn,
        response: {
          201: z.object({ tenant: tenantOut, roles: z.array(z.string()), csrf_token: z.string() }),
        },
      },
    },
    async (req, reply) => {
      const p = onboardingCallerOf(req);
      const { org, session } = await onboardOrganisation(
        db,
        {
          name: req.body.name,
          slug: req.body.slug,
          primaryRegion: req.body.primary_region,
          plan: config.defaultPlan,
          creator: { userId: p.userId, displayName: req.body.admin_display_name },
          correlationId: req.id,
          now: clock.now(),
        },
        p.kind === 'person' ? p.sessionId : null,
        config.sessionTtlSeconds,
      );
      if (session) setSessionCookies(app, reply, session);
      const csrf = session ? session.csrfToken : p.csrfToken;
      return reply.status(201).send({ tenant: toTenant(org), roles: ['org_admin'], csrf_token: csrf });
    },
  );

  r.get(
    '/tenants/current',
    {
      ...caller('tenant:read'),
      schema: { summary: 'The current organisation', tags: ['Authentication and accounts'], response: { 200: tenantOut } },
    },
    async (req) => {
      const p = actorOf(req);
      const org = await findOrganisation(db, p.orgId);
      if (!org) throw notFound();
      return toTenant(org);
    },
  );

  r.patch(
    '/tenants/current',
    {
      ...caller('tenant:manage'),
      schema: {
        summary: 'Rename the current organisation (honours If-Match when sent)',
        tags: ['Authentication and accounts'],
        headers: ifMatchHeaders.optional,
        body: tenantPatchIn,
        response: { 200: tenantOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return toTenant(await updateOrganisation(db, req, p.orgId, { name: req.body.name }, 'tenant.updated', req.headers['if-match']));
    },
  );
}
