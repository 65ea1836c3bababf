import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { canonicalize } from '../../../lib/canonical-json.js';

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

/** One Ed25519 evidence key, derived from a seed; its id is a digest of the public key. */
interface EvidenceKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
}

function keyOf(seed: string): EvidenceKey {
  // The label keeps the key apart from any other derived from the same text. Before evidence had a seed
  // of its own it was derived so from TOKEN_SIGNING_SEED, which is why that seed, listed among the
  // previous ones, still verifies the records of those versions.
  const secret = createHash('sha256').update(`tollgate:evidence:v1:${seed}`).digest();
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secret]), format: 'der', type: 'pkcs8' });
  const publicKey = createPublicKey(privateKey);
  const kid = createHash('sha256').update(publicKey.export({ format: 'der', type: 'spki' })).digest('base64url').slice(0, 16);
  return { kid, privateKey, publicKey };
}

/**
 * Hashes evidence over its RFC 8785 canonical JSON and signs the hash with Ed25519. The current key
 * (EVIDENCE_SIGNING_SEED) signs; it and the previous keys (EVIDENCE_SIGNING_PREVIOUS_SEEDS) verify,
 * each record with the key its `kid` names, so the key can be rotated and old records still verify.
 */
export class EvidenceSigner {
  /** The id of the key that signs, stored in every record it signs. */
  readonly kid: string;
  private readonly current: EvidenceKey;
  private readonly keys = new Map<string, EvidenceKey>();

  constructor(seed: string, previousSeeds: readonly string[] = []) {
    this.current = keyOf(seed);
    this.kid = this.current.kid;
    for (const k of [this.current, ...previousSeeds.map(keyOf)]) this.keys.set(k.kid, k);
  }

  hash(body: EvidenceBody): string {
    const canonical = canonicalize(body);
    if (canonical === undefined) throw new Error('evidence body cannot be canonicalised');
    return createHash('sha256').update(canonical).digest('hex');
  }

  sign(hash: string): string {
    return sign(null, Buffer.from(hash, 'hex'), this.current.privateKey).toString('base64url');
  }

  /** Whether a key of this id verifies here (the current key or a previous one). */
  knows(kid: string): boolean {
    return this.keys.has(kid);
  }

  /** Whether `signature` signs `hash` under the key `kid` names; false for a key not known here. */
  verify(kid: string, hash: string, signature: string): boolean {
    const key = this.keys.get(kid);
    if (!key) return false;
    try {
      return verify(null, Buffer.from(hash, 'hex'), key.publicKey, Buffer.from(signature, 'base64url'));
    } catch {
      return false;
    }
  }

  /** The public keys that verify here, the current one first (SPKI, DER, base64url), for verifying offline. */
  publicKeys(): { kid: string; public_key: string; current: boolean }[] {
    return [...this.keys.values()].map((k) => ({
      kid: k.kid,
      public_key: k.publicKey.export({ format: 'der', type: 'spki' }).toString('base64url'),
      current: k === this.current,
    }));
  }
}
