import type * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import type { Config } from '../../config.js';
import { ApiError } from '../../platform/errors.js';
import { withSystemCas } from '../../platform/outbound.js';

/**
 * The OpenID Connect relying party (docs/authentication.md, OpenID Connect sign-in), on openid-client:
 * the authorisation code flow with PKCE (S256), `state` and `nonce`. The library checks the ID token's
 * signature against the provider's keys, its issuer, audience, expiry and nonce, and the state of the
 * response. The provider's discovery document is fetched once and kept for the life of the process; a failed
 * discovery is not kept, so the next sign-in tries again.
 *
 * The issuer is the operator's configuration, not a user's input: it is not put through the connectors'
 * outbound guard (api/platform/outbound.ts), because a provider on a private network is normal.
 */

/** The signed cookie that carries one sign-in attempt from /auth/login to /auth/callback. */
export const OIDC_FLOW_COOKIE = 'tollgate_oidc';
/** How long a person may take at the provider before the attempt is forgotten. */
export const OIDC_FLOW_TTL_SECONDS = 600;

/** One sign-in attempt: what the callback must find again. Kept in the browser, signed, never shown to scripts. */
export interface OidcFlow {
  /** The PKCE code verifier (its S256 challenge went to the provider). */
  verifier: string;
  state: string;
  nonce: string;
  /** Where to send the person afterwards: a path on this service, already checked. */
  returnTo: string;
  /** Milliseconds since the epoch after which the attempt is refused. */
  exp: number;
}

/** The ID token's claims, as the library returns them once every check has passed. */
export type IdTokenClaims = client.IDToken;

/**
 * openid-client (with oauth4webapi), loaded when a sign-in first needs it: most deployments never
 * configure OpenID Connect, and its code would otherwise stay resident in every API process.
 */
const openidClient = () => import('openid-client');

export class OidcRelyingParty {
  private discovered: Promise<client.Configuration> | undefined;

  constructor(
    private readonly oidc: Config['oidc'],
    private readonly settings: Config['oidcSignIn'],
  ) {}

  /** Whether this deployment offers OpenID Connect sign-in: issuer, client and callback URL all set. */
  get enabled(): boolean {
    return Boolean(this.oidc.issuer && this.oidc.clientId && this.settings.redirectUri);
  }

  /** The callback URL the provider sends the person back to. */
  get redirectUri(): string {
    if (!this.settings.redirectUri) throw notConfigured();
    return this.settings.redirectUri;
  }

  /** The URL at the provider to send the person to, and the attempt to keep until they come back. */
  async start(returnTo: string, signup: boolean, now: Date): Promise<{ url: URL; flow: OidcFlow }> {
    const configuration = await this.configuration();
    const client = await openidClient();
    const verifier = client.randomPKCECodeVerifier();
    const flow: OidcFlow = {
      verifier,
      state: client.randomState(),
      nonce: client.randomNonce(),
      returnTo,
      exp: now.getTime() + OIDC_FLOW_TTL_SECONDS * 1000,
    };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.redirectUri,
      scope: this.settings.scopes.join(' '),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: flow.state,
      nonce: flow.nonce,
      // OpenID Connect's "Initiating User Registration": providers that know it show their sign-up page.
      ...(signup ? { prompt: 'create' } : {}),
    });
    return { url, flow };
  }

  /**
   * Exchanges the callback's code for tokens and returns the checked ID token claims. `query` is the
   * callback's query string as received. Any failed check answers 401 with the reason, never the token.
   */
  async finish(query: string, flow: OidcFlow): Promise<IdTokenClaims> {
    const configuration = await this.configuration();
    const client = await openidClient();
    const current = new URL(this.redirectUri);
    current.search = query;
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(configuration, current, {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        expectedNonce: flow.nonce,
        idTokenExpected: true,
      });
    } catch (err) {
      throw signInFailed(reasonOf(err));
    }
    const claims = tokens.claims();
    if (!claims) throw signInFailed('no_id_token');
    return claims;
  }

  /** Discovery from OIDC_ISSUER, once; the provider's keys are fetched (and refreshed) by the library. */
  private configuration(): Promise<client.Configuration> {
    if (!this.enabled) return Promise.reject(notConfigured());
    this.discovered ??= this.discover().catch((err: unknown) => {
      this.discovered = undefined;
      throw err;
    });
    return this.discovered;
  }

  private async discover(): Promise<client.Configuration> {
    const issuer = new URL(this.oidc.issuer!);
    const client = await openidClient();
    const options: client.DiscoveryRequestOptions = { [client.customFetch]: this.fetcher() };
    // Plain http only outside production (the production guard refuses an http issuer): a local provider.
    if (issuer.protocol === 'http:') options.execute = [client.allowInsecureRequests];
    try {
      return await client.discovery(issuer, this.oidc.clientId!, this.oidc.clientSecret, undefined, options);
    } catch (err) {
      throw new ApiError('service_unavailable', 'The identity provider cannot be reached; try again shortly.', {
        reason: reasonOf(err),
      });
    }
  }

  /** fetch with the system's CAs plus OIDC_CA_FILE's, for providers behind a private CA. */
  private fetcher(): client.CustomFetch | undefined {
    const ca = this.settings.ca;
    if (!ca) return undefined;
    const dispatcher = new Agent({ connect: { ca: withSystemCas(ca) } });
    return ((url: string, options: client.CustomFetchOptions) =>
      undiciFetch(url, { ...options, dispatcher } as Parameters<typeof undiciFetch>[1])) as unknown as client.CustomFetch;
  }
}

/** Whether the ID token shows multi-factor authentication: an amr value or an acr value the settings accept. */
export function showsMfa(claims: Record<string, unknown>, settings: Config['oidcSignIn']): boolean {
  const amr = claims[settings.amrClaim];
  const amrValues = Array.isArray(amr) ? amr : typeof amr === 'string' ? amr.split(/\s+/) : [];
  if (amrValues.some((v) => typeof v === 'string' && settings.mfaAmrValues.includes(v))) return true;
  const acr = claims[settings.acrClaim];
  return typeof acr === 'string' && settings.mfaAcrValues.includes(acr);
}

/**
 * `return_to` as a path on this service, or `/`. Only a single-slash path (after decoding) is kept:
 * absolute URLs, scheme-relative `//host`, backslashes (which browsers read as slashes), control
 * characters and schemes such as `javascript:` all fall back to `/`.
 */
export function safeReturnTo(raw: string | null | undefined, redirectUri: string): string {
  if (!raw) return '/';
  let decoded = raw;
  // Encoded forms (%2F%2Fevil, %5C) are decoded as a browser or proxy might, a few times over.
  for (let i = 0; i < 3; i++) {
    try {
      const next = decodeURIComponent(decoded);
      if (next === decoded) break;
      decoded = next;
    } catch {
      return '/';
    }
  }
  for (const candidate of [raw, decoded]) {
    if (!candidate.startsWith('/') || candidate.startsWith('//')) return '/';
    if (/[\\\u0000-\u001f\u007f]/.test(candidate)) return '/';
  }
  // Resolved against this service's own origin, the result must stay on it.
  const own = new URL(redirectUri);
  const resolved = new URL(raw, own.origin);
  if (resolved.origin !== own.origin) return '/';
  return `${resolved.pathname}${resolved.search}${resolved.hash}`;
}

const notConfigured = () => new ApiError('not_found', 'OpenID Connect sign-in is not configured on this deployment.');

/** 401: the sign-in could not be completed, with a machine-readable reason and no token or code. */
export function signInFailed(reason: string, message = 'The sign-in could not be completed; start it again.') {
  return new ApiError('unauthenticated', message, { reason });
}

/** A short, secret-free reason from openid-client's errors (their codes, or the provider's OAuth error). */
function reasonOf(err: unknown): string {
  const e = err as { error?: unknown; code?: unknown };
  if (typeof e?.error === 'string') return e.error.slice(0, 100);
  if (typeof e?.code === 'string') return e.code.slice(0, 100);
  return 'provider_error';
}
