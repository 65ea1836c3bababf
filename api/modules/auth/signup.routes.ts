import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { setOnboardingCookies } from '../../platform/auth.js';
import { ApiError } from '../../platform/errors.js';
import { caller } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { resendIn, signupAccepted, signupIn, verifyIn, verifyOut } from './signup.schemas.js';
import { RESEND_COOLDOWN_SECONDS, resendCode, signUp, verifySignup, type SignupDeps } from './signup.service.js';

const tags = ['Authentication and accounts'];

const accepted = {
  status: 'accepted' as const,
  message: 'If this address can sign up, a verification code is on its way. Check your inbox.',
  resend_after_seconds: RESEND_COOLDOWN_SECONDS,
};

/**
 * Self-service sign-up (docs/authentication.md): sign up, have the code sent again, verify it. Public and
 * limited per client address as sign-in is (RATE_LIMIT_SIGNIN_PER_MINUTE); 404 while SIGNUP_ENABLED is off.
 */
export async function signupRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { config } = app.deps;
  const deps: SignupDeps = {
    db: app.deps.db,
    clock: app.deps.clock,
    mailer: app.deps.mailer,
    challenge: app.deps.challenge,
    hits: app.deps.hits,
    pepper: config.secretPepper,
    log: app.log,
  };
  // Before the body is validated: while sign-up is off, every request to it answers 404, well-formed or not.
  const onRequest = async () => {
    if (!config.signup.enabled) throw new ApiError('not_found', 'Self-service sign-up is not enabled here.');
  };

  r.post(
    '/auth/signup',
    {
      ...caller('public', 'signin'),
      onRequest,
      schema: {
        summary: 'Sign up: a verification code is emailed (the answer never says whether the address has an account)',
        tags,
        body: signupIn,
        response: { 202: signupAccepted },
      },
    },
    async (req, reply) => {
      const b = req.body;
      await signUp(
        { ...deps, log: req.log },
        { email: b.email, name: b.name, password: b.password, consent: b.consent, challengeToken: b.challenge_token, website: b.website },
        req.ip,
        req.id,
      );
      return reply.status(202).send(accepted);
    },
  );

  r.post(
    '/auth/signup/resend',
    {
      ...caller('public', 'signin'),
      onRequest,
      schema: {
        summary: 'Email a new verification code (not within 60 seconds of the last one)',
        tags,
        body: resendIn,
        response: { 202: signupAccepted },
      },
    },
    async (req, reply) => {
      await resendCode({ ...deps, log: req.log }, req.body.email, req.id);
      return reply.status(202).send(accepted);
    },
  );

  r.post(
    '/auth/signup/verify',
    {
      ...caller('public', 'signin'),
      onRequest,
      schema: {
        summary: 'Verify the emailed code: creates the account and starts onboarding (create an organisation next)',
        tags,
        body: verifyIn,
        response: { 200: verifyOut },
      },
    },
    async (req, reply) => {
      const person = await verifySignup({ ...deps, log: req.log }, req.body.email, req.body.code, req.id);
      // As a first sign-in without an organisation: the onboarding cookie, then POST /tenants/onboard.
      const { csrfToken, expiresAt } = setOnboardingCookies(app, reply, person);
      return { status: 'onboarding' as const, user: person, expires_at: iso(expiresAt), csrf_token: csrfToken };
    },
  );
}
