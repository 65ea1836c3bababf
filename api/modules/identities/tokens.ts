import { createHash, createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { ApiError } from '../../platform/errors.js';

export const TOKEN_AUDIENCE = 'svc-gateway';
export const TOKEN_ISSUER = 'tollgate';
export const TOKEN_LIFETIME_SECONDS = 300;
/**
 * Service-account tokens are for the REST API, never the gateway: a different audience, so neither
 * kind of token is accepted where the other is expected (docs/registry.md, Service accounts).
 */
export const SERVICE_TOKEN_AUDIENCE = 'tollgate-api';
export const SERVICE_TOKEN_LIFETIME_SECONDS = 900;

// PKCS#8 DER prefix of an Ed25519 private key; the 32-byte seed follows it.
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** What an agent token says beyond the registered claims. */
export interface AgentClaims {
  org: string;
  agt: string;
  idn: string;
  /** The agent's session epoch when the token was issued; revoking sessions moves it on. */
  epc: number;
  uri: string;
}

export interface VerifiedToken extends AgentClaims {
  jti: string;
  exp: number;
}

/** What a service-account token says beyond the registered claims. */
export interface ServiceClaims {
  org: string;
  /** The service account's id. */
  sac: string;
}

export interface VerifiedServiceToken extends ServiceClaims {
  jti: string;
  exp: number;
}

/** Tokens already verified, by their exact text, each kind apart so one is never taken for the other. */
class VerifiedTokens<T extends { exp: number }> {
  private readonly entries = new Map<string, T>();
  private static readonly MAX = 10_000;

  /** The known claims, or undefined when the token was never verified; throws token_expired once it has expired. */
  get(token: string, now: Date): T | undefined {
    const known = this.entries.get(token);
    if (!known) return undefined;
    if (known.exp * 1000 > now.getTime()) return known;
    this.entries.delete(token);
    throw new ApiError('token_expired');
  }

  set(token: string, claims: T): void {
    // Drop the oldest entry (Map keeps insertion order).
    if (this.entries.size >= VerifiedTokens.MAX) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(token, claims);
  }

  /** Forgets every token (bench/token-verify measures a token's first use this way). */
  clear(): void {
    this.entries.clear();
  }
}

/**
 * Ed25519-signed agent and service-account tokens (jose). The key pair is derived from
 * TOKEN_SIGNING_SEED, so every API replica with the same seed signs and verifies alike; the key id is
 * a digest of the public key. The two kinds differ in audience and are verified apart.
 */
export class TokenService {
  readonly kid: string;
  private readonly privateKey: KeyObject;
  /**
   * Tokens already verified: an agent reuses its token for up to 300 s, so the signature is checked
   * once per token, not once per request. Expiry is still checked on every use.
   */
  private readonly verified = new VerifiedTokens<VerifiedToken>();
  private readonly verifiedService = new VerifiedTokens<VerifiedServiceToken>();
  private readonly publicKey: KeyObject;

  constructor(seed: string, private readonly now: () => Date) {
    const secret = createHash('sha256').update(`tollgate:agent-token:v1:${seed}`).digest();
    this.privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
    this.publicKey = createPublicKey(this.privateKey);
    const raw = this.publicKey.export({ format: 'der', type: 'spki' });
    this.kid = createHash('sha256').update(raw).digest('base64url').slice(0, 16);
  }

  private async sign(claims: object, subject: string, audience: string, lifetime: number): Promise<{ token: string; expiresIn: number }> {
    const iat = Math.floor(this.now().getTime() / 1000);
    const token = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'EdDSA', kid: this.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(audience)
      .setSubject(subject)
      .setJti(randomUUID())
      .setIssuedAt(iat)
      .setExpirationTime(iat + lifetime)
      .sign(this.privateKey);
    return { token, expiresIn: lifetime };
  }

  /** An agent token for the gateway (audience svc-gateway, 300 s). */
  issue(claims: AgentClaims, subject: string): Promise<{ token: string; expiresIn: number }> {
    return this.sign(claims, subject, TOKEN_AUDIENCE, TOKEN_LIFETIME_SECONDS);
  }

  /** A service-account token for the REST API (audience tollgate-api, 900 s). */
  issueService(claims: ServiceClaims): Promise<{ token: string; expiresIn: number }> {
    return this.sign(claims, `service-account:${claims.sac}`, SERVICE_TOKEN_AUDIENCE, SERVICE_TOKEN_LIFETIME_SECONDS);
  }

  /** Verifies an agent token: signature, issuer, audience and expiry; maps each failure to the spec's code. */
  async verify(token: string): Promise<VerifiedToken> {
    const known = this.verified.get(token, this.now());
    if (known) return known;
    const payload = await this.verifySignature(token, TOKEN_AUDIENCE);
    const { org, agt, idn, epc, uri, jti, exp } = payload as Partial<VerifiedToken>;
    if (typeof org !== 'string' || typeof agt !== 'string' || typeof idn !== 'string' || typeof epc !== 'number' || typeof uri !== 'string') {
      throw new ApiError('invalid_token');
    }
    const claims = { org, agt, idn, epc, uri, jti: jti!, exp: exp! };
    this.verified.set(token, claims);
    return claims;
  }

  /** Verifies a service-account token the same way, against its own audience. */
  async verifyService(token: string): Promise<VerifiedServiceToken> {
    const known = this.verifiedService.get(token, this.now());
    if (known) return known;
    const payload = await this.verifySignature(token, SERVICE_TOKEN_AUDIENCE);
    const { org, sac, jti, exp } = payload as Partial<VerifiedServiceToken>;
    if (typeof org !== 'string' || typeof sac !== 'string') throw new ApiError('invalid_token');
    const claims = { org, sac, jti: jti!, exp: exp! };
    this.verifiedService.set(token, claims);
    return claims;
  }

  private async verifySignature(token: string, audience: string): Promise<Record<string, unknown>> {
    try {
      const { payload } = await jwtVerify(token, this.publicKey, {
        algorithms: ['EdDSA'],
        issuer: TOKEN_ISSUER,
        audience,
        currentDate: this.now(),
        requiredClaims: ['exp', 'iat', 'jti', 'sub'],
      });
      return payload;
    } catch (err) {
      if (err instanceof errors.JWTExpired) throw new ApiError('token_expired');
      if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'aud') throw new ApiError('invalid_audience');
      throw new ApiError('invalid_token');
    }
  }
}
