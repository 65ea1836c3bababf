import type { Config } from '../../config.js';
import { ApiError } from '../../platform/errors.js';

/**
 * The token the development verifier accepts (CHALLENGE_VERIFIER=development, the default outside production):
 * published here and in docs/authentication.md, so it proves nothing; the production guard refuses it.
 */
export const DEV_CHALLENGE_TOKEN = 'tollgate-development-challenge';

/** How long the siteverify call may take before the request gives up (503). */
const SITEVERIFY_TIMEOUT_MS = 5000;

/**
 * Checks the token a browser got from a challenge widget (Cloudflare Turnstile, hCaptcha or anything answering
 * their `siteverify` protocol). Resolves true when the challenge was passed, false when it was not; throws 503
 * `service_unavailable` when the verifier cannot be asked (a sign-up is refused rather than let through).
 */
export interface ChallengeVerifier {
  readonly kind: 'siteverify' | 'development' | 'none';
  verify(token: string | null | undefined, remoteIp: string): Promise<boolean>;
}

/**
 * The `siteverify` protocol shared by Turnstile and hCaptcha: a form POST of the secret, the token and the
 * client's address; the answer's `success` says whether the token is good (each token is good once).
 */
export class SiteverifyChallenge implements ChallengeVerifier {
  readonly kind = 'siteverify' as const;
  constructor(
    private readonly url: string,
    private readonly secret: string,
  ) {}

  async verify(token: string | null | undefined, remoteIp: string): Promise<boolean> {
    if (!token) return false;
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ secret: this.secret, response: token, remoteip: remoteIp }).toString(),
        redirect: 'error',
        signal: AbortSignal.timeout(SITEVERIFY_TIMEOUT_MS),
      });
    } catch {
      throw unavailable();
    }
    if (!res.ok) throw unavailable();
    let answer: unknown;
    try {
      answer = await res.json();
    } catch {
      throw unavailable();
    }
    return typeof answer === 'object' && answer !== null && (answer as { success?: unknown }).success === true;
  }
}

const unavailable = () => new ApiError('service_unavailable', 'The challenge could not be checked right now; retry later.', null, { 'retry-after': '5' });

/** CHALLENGE_VERIFIER=development: passes exactly DEV_CHALLENGE_TOKEN. */
export class DevelopmentChallenge implements ChallengeVerifier {
  readonly kind = 'development' as const;
  async verify(token: string | null | undefined): Promise<boolean> {
    return token === DEV_CHALLENGE_TOKEN;
  }
}

/** CHALLENGE_VERIFIER=none: no challenge; every request passes (refused in production while sign-up is on). */
export class NoChallenge implements ChallengeVerifier {
  readonly kind = 'none' as const;
  async verify(): Promise<boolean> {
    return true;
  }
}

/**
 * The verifier of CHALLENGE_VERIFIER. Its secret is SIGNUP_CLIENT_SECRET (the "signup client secret" the spec's
 * production guard requires with sign-up on): the secret key of the challenge site.
 */
export function challengeVerifier(config: Config): ChallengeVerifier {
  switch (config.challenge.verifier) {
    case 'siteverify':
      return new SiteverifyChallenge(config.challenge.verifyUrl, config.signup.clientSecret ?? '');
    case 'development':
      return new DevelopmentChallenge();
    case 'none':
      return new NoChallenge();
  }
}
