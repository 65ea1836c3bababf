import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import { personOf, setSessionCookies } from '../../platform/auth.js';
import { notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { caller } from '../../platform/route.js';
import { audit } from '../audit/audit.js';
import { createSession, setSessionOrg } from '../auth/sessions.repository.js';
import { getOrganisation, toTenant } from './tenants.repository.js';
import { onboardIn, tenantOut, tenantPatchIn } from './tenants.schemas.js';
import { createOrganisation } from './tenants.service.js';

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
      const p = req.principal!;
      const now = clock.now();
      const org = await createOrganisation(db, {
        name: req.body.name,
        slug: req.body.slug,
        primaryRegion: req.body.primary_region,
        creator: { userId: p.userId, displayName: req.body.admin_display_name },
        correlationId: req.id,
        now,
      });
      let csrf = p.csrfToken;
      if (p.kind === 'person') {
        // A signed-in person creating another organisation: the session moves to it.
        await setSessionOrg(db, p.sessionId, org.id);
      } else {
        const session = await createSession(db, p.userId, org.id, now, config.sessionTtlSeconds);
        setSessionCookies(app, reply, session);
        csrf = session.csrfToken;
      }
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
      const p = personOf(req);
      const org = await inScope(db, { orgId: p.orgId }, (tx) => getOrganisation(tx, p.orgId));
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
        body: tenantPatchIn,
        response: { 200: tenantOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const org = await getOrganisation(tx, p.orgId, true);
        if (!org) throw notFound();
        checkIfMatch(req.headers['if-match'], org.version, false);
        if (req.body.name === undefined || req.body.name === null || req.body.name === org.name) return toTenant(org);
        const updated = await tx
          .updateTable('organisations')
          .set({ name: req.body.name, version: org.version + 1, updated_at: clock.now() })
          .where('id', '=', p.orgId)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'tenant.updated',
          targetType: 'tenant',
          targetId: p.orgId,
          details: { name: { from: org.name, to: updated.name } },
        });
        return toTenant(updated);
      });
    },
  );
}
