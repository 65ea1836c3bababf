import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { createRequire } from 'node:module';

// RFC 8785 canonical JSON. The package is CommonJS whose typings claim an ES default export.
const canonicalize = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string | undefined;

const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
export const GENESIS_HASH = '0'.repeat(64);

/** What a record's hash covers: everything but the hash and signature themselves. */
export interface EvidenceBody {
  id: string;
  org_id: string;
  seq: number;
  prev_hash: string;
  event_type: string;
  agent_id: string | null;
  action_request_id: string | null;
  control_ref: string | null;
  correlation_id: string;
  payload: unknown;
  created_at: string;
}

/**
 * Hashes evidence over its RFC 8785 canonical JSON and signs the hash with Ed25519. The key is
 * derived from TOKEN_SIGNING_SEED under its own label, so it never equals the token key.
 */
export class EvidenceSigner {
  readonly kid: string;
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;

  constructor(seed: string) {
    const secret = createHash('sha256').update(`tollgate:evidence:v1:${seed}`).digest();
    this.privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
    this.publicKey = createPublicKey(this.privateKey);
    this.kid = createHash('sha256').update(this.publicKey.export({ format: 'der', type: 'spki' })).digest('base64url').slice(0, 16);
  }

  hash(body: EvidenceBody): string {
    const canonical = canonicalize(body);
    if (canonical === undefined) throw new Error('evidence body cannot be canonicalised');
    return createHash('sha256').update(canonical).digest('hex');
  }

  sign(hash: string): string {
    return sign(null, Buffer.from(hash, 'hex'), this.privateKey).toString('base64url');
  }

  verify(hash: string, signature: string): boolean {
    try {
      return verify(null, Buffer.from(hash, 'hex'), this.publicKey, Buffer.from(signature, 'base64url'));
    } catch {
      return false;
    }
  }
}
