/**
 * The auth module's public face. Sign-in, sign-out and moving between organisations are HTTP
 * operations only (auth.routes.ts, registered by api/routes.ts); the module sits on top of tenants,
 * users and sessions and offers nothing to other modules.
 */
export {};
// The challenge check of sign-up, which the public forms share (built once as app.deps.challenge).
export { challengeVerifier, DEV_CHALLENGE_TOKEN, type ChallengeVerifier } from './challenge.js';
