import { createHash, createPrivateKey, createPublicKey, randomUUID, type KeyObject } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { ApiError } from '../../platform/errors.js';

export const TOKEN_AUDIENCE = 'svc-gateway';
export const TOKEN_ISSUER = 'tollgate';
export const TOKEN_LIFETIME_SECONDS = 300;

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

/**
 * Ed25519-signed agent tokens (jose). The key pair is derived from TOKEN_SIGNING_SEED, so every API
 * replica with the same seed signs and verifies alike; the key id is a digest of the public key.
 */
export class TokenService {
  readonly kid: string;
  private readonly privateKey: KeyObject;
  /**
   * Tokens already verified, by their exact text: an agent reuses its token for up to 300 s, so the
   * signature is checked once per token, not once per request. Expiry is still checked on every use.
   */
  private readonly verified = new Map<string, VerifiedToken>();
  private static readonly MAX_VERIFIED = 10_000;
  private readonly publicKey: KeyObject;

  constructor(seed: string, private readonly now: () => Date) {
    const secret = createHash('sha256').update(`tollgate:agent-token:v1:${seed}`).digest();
    this.privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
    this.publicKey = createPublicKey(this.privateKey);
    const raw = this.publicKey.export({ format: 'der', type: 'spki' });
    this.kid = createHash('sha256').update(raw).digest('base64url').slice(0, 16);
  }

  async issue(claims: AgentClaims, subject: string): Promise<{ token: string; expiresIn: number }> {
    const iat = Math.floor(this.now().getTime() / 1000);
    const token = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'EdDSA', kid: this.kid, typ: 'JWT' })
      .setIssuer(TOKEN_ISSUER)
      .setAudience(TOKEN_AUDIENCE)
      .setSubject(subject)
      .setJti(randomUUID())
      .setIssuedAt(iat)
      .setExpirationTime(iat + TOKEN_LIFETIME_SECONDS)
      .sign(this.privateKey);
    return { token, expiresIn: TOKEN_LIFETIME_SECONDS };
  }

  /** Verifies signature, issuer, audience and expiry; maps each failure to the spec's code. */
  async verify(token: string): Promise<VerifiedToken> {
    const known = this.verified.get(token);
    if (known) {
      if (known.exp * 1000 > this.now().getTime()) return known;
      this.verified.delete(token);
      throw new ApiError('token_expired');
    }
    const claims = await this.verifySignature(token);
    if (this.verified.size >= TokenService.MAX_VERIFIED) {
      // Drop the oldest entry (Map keeps insertion order).
      this.verified.delete(this.verified.keys().next().value!);
    }
    this.verified.set(token, claims);
    return claims;
  }

  private async verifySignature(token: string): Promise<VerifiedToken> {
    try {
      const { payload } = await jwtVerify(token, this.publicKey, {
        algorithms: ['EdDSA'],
        issuer: TOKEN_ISSUER,
        audience: TOKEN_AUDIENCE,
        currentDate: this.now(),
        requiredClaims: ['exp', 'iat', 'jti', 'sub'],
      });
      const { org, agt, idn, epc, uri, jti, exp } = payload as Partial<VerifiedToken>;
      if (typeof org !== 'string' || typeof agt !== 'string' || typeof idn !== 'string' || typeof epc !== 'number' || typeof uri !== 'string') {
        throw new ApiError('invalid_token');
      }
      return { org, agt, idn, epc, uri, jti: jti!, exp: exp! };
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (err instanceof errors.JWTExpired) throw new ApiError('token_expired');
      if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'aud') throw new ApiError('invalid_audience');
      throw new ApiError('invalid_token');
    }
  }
}
