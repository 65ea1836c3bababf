import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { clearAuthCookies, onboardingCallerOf, personOf, setOnboardingCookies, setSessionCookies } from '../../platform/auth.js';
import { ApiError } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import { deleteSession, deleteSessionsOf } from '../sessions/index.js';
import { toTenant } from '../tenants/index.js';
import { devLoginIn, devLoginOut, meOut, onboardingOut, providersOut, switchTenantIn } from './auth.schemas.js';
import { devLogin, switchTenant, tenantsOf, whoAmI } from './auth.service.js';

const tags = ['Authentication and accounts'];

export async function authRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;

  r.post(
    '/auth/dev-login',
    {
      ...caller('public', 'signin'),
      schema: {
        summary: 'Development sign-in (disabled in production): signs in as the person with this email',
        tags,
        body: devLoginIn,
        response: { 200: devLoginOut },
      },
    },
    async (req, reply) => {
      if (!config.devLoginEnabled) throw new ApiError('not_found', 'Development sign-in is disabled.');
      const email = req.body.email.trim();
      const { person, session, org } = await devLogin(db, email, req.body.tenant_id, clock.now(), config.sessionTtlSeconds);
      const user = { id: person.id, email: person.email, display_name: person.display_name };
      if (!session) {
        const { csrfToken } = setOnboardingCookies(app, reply, { id: person.id });
        return { status: 'onboarding' as const, user, tenant: null, csrf_token: csrfToken };
      }
      setSessionCookies(app, reply, session);
      return { status: 'signed_in' as const, user, tenant: org ? toTenant(org) : null, csrf_token: session.csrfToken };
    },
  );

  r.get(
    '/auth/providers',
    {
      ...caller('public'),
      schema: { summary: 'Sign-in methods this deployment offers', tags, response: { 200: providersOut } },
    },
    async () => ({
      providers: config.devLoginEnabled
        ? [
            {
              id: 'dev',
              kind: 'development' as const,
              name: 'Development sign-in',
              login_url: '/api/v1/auth/dev-login',
            },
          ]
        : [],
      signup_enabled: config.signup.enabled,
    }),
  );

  r.get(
    '/auth/me',
    {
      ...caller('signed in'),
      schema: {
        summary: 'The signed-in person, organisation, roles and effective permissions',
        tags,
        response: { 200: meOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      const { org, tenants } = await whoAmI(db, p.orgId, p.userId);
      return {
        user: { id: p.userId, email: p.email, display_name: p.displayName },
        tenant: toTenant(org),
        roles: p.roles,
        permissions: [...p.permissions].sort(),
        tenants: tenants.map((t) => ({ id: t.id, slug: t.slug, name: t.name, roles: t.roles })),
        csrf_token: p.csrfToken,
      };
    },
  );

  r.get(
    '/auth/onboarding',
    {
      ...caller('onboarding'),
      schema: {
        summary: 'The identity waiting to create an organisation',
        tags,
        response: { 200: onboardingOut },
      },
    },
    async (req) => {
      const p = onboardingCallerOf(req);
      const tenants = await tenantsOf(db, p.userId);
      return {
        user: { id: p.userId, email: p.email, display_name: p.displayName },
        expires_at: p.kind === 'onboarding' ? iso(p.expiresAt) : null,
        tenants: tenants.length,
        csrf_token: p.csrfToken,
      };
    },
  );

  r.post(
    '/auth/logout',
    {
      ...caller('signed in'),
      schema: { summary: 'Sign out of this session', tags, response: { 204: z.null() } },
    },
    async (req, reply) => {
      await deleteSession(db, personOf(req).sessionId);
      clearAuthCookies(reply);
      return reply.status(204).send(null);
    },
  );

  r.post(
    '/auth/logout-all',
    {
      ...caller('signed in'),
      schema: { summary: "Sign out of every one of the person's sessions", tags, response: { 204: z.null() } },
    },
    async (req, reply) => {
      await deleteSessionsOf(db, personOf(req).userId);
      clearAuthCookies(reply);
      return reply.status(204).send(null);
    },
  );

  r.post(
    '/auth/switch-tenant',
    {
      ...caller('signed in'),
      schema: {
        summary: 'Move this session to another organisation the person belongs to',
        tags,
        body: switchTenantIn,
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = personOf(req);
      await switchTenant(db, p.sessionId, p.userId, req.body.tenant_id);
      return reply.status(204).send(null);
    },
  );
}
