import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  clearAuthCookies,
  cookieOptions,
  onboardingCallerOf,
  personOf,
  rememberedWithSession,
  setOnboardingCookies,
  setSessionCookies,
} from '../../platform/auth.js';
import { ApiError } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import { deleteSession, deleteSessionsOf } from '../sessions/index.js';
import { toTenant } from '../tenants/index.js';
import {
  callbackOut,
  callbackQuery,
  devLoginIn,
  devLoginOut,
  loginOut,
  loginQuery,
  meOut,
  onboardingOut,
  providersOut,
  redirectOut,
  switchTenantIn,
} from './auth.schemas.js';
import { devLogin, oidcSignIn, switchTenant, tenantsOf, whoAmI } from './auth.service.js';
import { OIDC_FLOW_COOKIE, OIDC_FLOW_TTL_SECONDS, OidcRelyingParty, safeReturnTo, signInFailed, type OidcFlow } from './oidc.js';

const tags = ['Authentication and accounts'];

export async function authRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  // One relying party per app: its discovery document is kept for the app's life.
  const rp = new OidcRelyingParty(config.oidc, config.oidcSignIn);
  await oidcRoutes(app, rp);

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
      providers: [
        ...(rp.enabled
          ? [{ id: 'oidc', kind: 'oidc' as const, name: 'Single sign-on', login_url: '/api/v1/auth/login' }]
          : []),
        ...(config.devLoginEnabled
          ? [
              {
                id: 'dev',
                kind: 'development' as const,
                name: 'Development sign-in',
                login_url: '/api/v1/auth/dev-login',
              },
            ]
          : []),
      ],
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
      // What it shows changes only with the session, its memberships or an organisation (sessionsChanged):
      // read and built once per remembered session, not per request.
      return rememberedWithSession(req, 'auth.me', async () => {
        const { org, tenants } = await whoAmI(db, p.orgId, p.userId);
        return {
          user: { id: p.userId, email: p.email, display_name: p.displayName },
          tenant: toTenant(org),
          roles: p.roles,
          permissions: [...p.permissions].sort(),
          tenants: tenants.map((t) => ({ id: t.id, slug: t.slug, name: t.name, roles: t.roles })),
          csrf_token: p.csrfToken,
        };
      });
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

/**
 * Whether the caller asked for JSON rather than a page: a script that follows the flow itself. A browser's
 * navigation asks for text/html and gets the redirect (302) it needs; so does a caller that says nothing.
 */
function wantsJson(req: FastifyRequest): boolean {
  const accept = req.headers.accept ?? '';
  return accept.includes('application/json') && !accept.includes('text/html');
}

/** OpenID Connect sign-in: /auth/login sends the person to the provider, /auth/callback brings them back. */
async function oidcRoutes(app: FastifyInstance, rp: OidcRelyingParty): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;

  const clearFlow = (reply: FastifyReply) => reply.clearCookie(OIDC_FLOW_COOKIE, { path: '/' });

  /** The attempt of the signed flow cookie, or null when it is missing, forged or too old. */
  const flowOf = (req: FastifyRequest): OidcFlow | null => {
    const raw = req.cookies[OIDC_FLOW_COOKIE];
    if (!raw) return null;
    const unsigned = req.unsignCookie(raw);
    if (!unsigned.valid || unsigned.value === null) return null;
    try {
      const f = JSON.parse(Buffer.from(unsigned.value, 'base64url').toString('utf8')) as OidcFlow;
      const ok = [f.verifier, f.state, f.nonce, f.returnTo].every((v) => typeof v === 'string') && typeof f.exp === 'number';
      return ok && f.exp > clock.now().getTime() ? f : null;
    } catch {
      return null;
    }
  };

  r.get(
    '/auth/login',
    {
      ...caller('public', 'signin'),
      schema: {
        summary: 'Start OpenID Connect sign-in: a redirect (302) to the identity provider',
        description:
          'A browser gets 302 with Location at the provider and a short-lived, signed, HttpOnly cookie holding the ' +
          "attempt's PKCE verifier, state and nonce. A caller that accepts only application/json gets 200 with the " +
          'same URL instead. 404 when OpenID Connect is not configured.',
        tags,
        querystring: loginQuery,
        response: { 200: loginOut, 302: redirectOut },
      },
    },
    async (req, reply) => {
      const returnTo = safeReturnTo(req.query.return_to, rp.redirectUri);
      const { url, flow } = await rp.start(returnTo, req.query.signup, clock.now());
      const value = Buffer.from(JSON.stringify(flow)).toString('base64url');
      reply.setCookie(OIDC_FLOW_COOKIE, value, { ...cookieOptions(app, OIDC_FLOW_TTL_SECONDS), signed: true });
      reply.header('cache-control', 'no-store');
      if (wantsJson(req)) return { authorization_url: url.href };
      return reply.redirect(url.href, 302);
    },
  );

  r.get(
    '/auth/callback',
    {
      ...caller('public', 'signin'),
      schema: {
        summary: "The identity provider's answer: checks it, signs the person in and redirects (302) to return_to",
        description:
          'Checks state, the PKCE exchange, and the ID token (signature, issuer, audience, expiry, nonce), then ' +
          'requires multi-factor authentication. A person with an organisation gets a session; one without gets ' +
          'the onboarding cookie. A browser gets 302 to the checked return_to; a caller that accepts only ' +
          'application/json gets 200 with the result. Refusals answer the error envelope: 401 when the sign-in ' +
          'cannot be completed, 403 without multi-factor authentication or for a disabled account; a browser ' +
          "(Accept: text/html) is sent instead to the console's /sign-in?sign_in_error=<reason>, which says why.",
        tags,
        querystring: callbackQuery,
        response: { 200: callbackOut, 302: redirectOut },
      },
    },
    async (req, reply) => {
      try {
        const flow = flowOf(req);
        // One attempt, one callback: the cookie goes whatever the outcome.
        clearFlow(reply);
        reply.header('cache-control', 'no-store');
        if (!flow) throw signInFailed('no_sign_in_in_progress', 'No sign-in is in progress in this browser, or it took too long; start it again.');
        const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?')) : '';
        const claims = await rp.finish(query, flow);
        const { person, session, org } = await oidcSignIn(db, claims, {
          settings: config.oidcSignIn,
          now: clock.now(),
          sessionTtlSeconds: config.sessionTtlSeconds,
          correlationId: req.id,
        });
        const user = { id: person.id, email: person.email, display_name: person.display_name };
        let result;
        if (session) {
          setSessionCookies(app, reply, session);
          result = { status: 'signed_in' as const, user, tenant: org ? toTenant(org) : null, csrf_token: session.csrfToken, return_to: flow.returnTo };
        } else {
          const { csrfToken } = setOnboardingCookies(app, reply, { id: person.id });
          result = { status: 'onboarding' as const, user, tenant: null, csrf_token: csrfToken, return_to: flow.returnTo };
        }
        if (wantsJson(req)) return result;
        return reply.redirect(flow.returnTo, 302);
      } catch (err) {
        // A person's browser gets the console's sign-in page saying why, not a JSON envelope (a refusal of a
        // known person is audited where it is decided). Only the reason code travels in the address.
        if (!(err instanceof ApiError) || !(req.headers.accept ?? '').includes('text/html')) throw err;
        const reason = (err.details as { reason?: unknown } | null)?.reason;
        const code = typeof reason === 'string' && /^[a-z0-9_]{1,100}$/.test(reason) ? reason : err.code;
        req.log.info({ code: err.code, reason: code }, 'sign-in refused; the browser is sent to the sign-in page');
        return reply.redirect(`/sign-in?sign_in_error=${encodeURIComponent(code)}`, 302);
      }
    },
  );
}
