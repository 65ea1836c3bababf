import { createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/** Client IDs carry a fixed prefix so that they are recognisable in logs, configs and scanners. */
export const CLIENT_ID_PREFIX = 'tgc_';
export const CLIENT_SECRET_PREFIX = 'tgs_';

export const newClientId = () => `${CLIENT_ID_PREFIX}${randomBytes(12).toString('hex')}`;
export const newClientSecret = () => `${CLIENT_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;

/**
 * How client secrets are stored (docs/decisions.md D17). They are 256 random bits that Tollgate
 * generates, never chosen by a person, so no dictionary or brute force applies to them and a slow
 * key-derivation function adds nothing but cost (scrypt took 166 ms of CPU a check on a 2-core
 * machine: the whole cost of issuing an identity, and a lever against the token endpoints). The hash
 * is HMAC-SHA256 keyed with the pepper (SECRET_PEPPER, outside the database: a stolen table alone
 * verifies nothing) over a per-secret salt and the secret: `hmac256$salt$hash`. Hashes written by
 * earlier versions (`scrypt$N$r$p$salt$hash`) still verify.
 */
const SCHEME = 'hmac256';

function mac(secret: string, salt: Buffer, pepper: string): Buffer {
  return createHmac('sha256', `tollgate:client-secret:v2:${pepper}`).update(salt).update(secret).digest();
}

function legacyScrypt(secret: string, salt: Buffer, params: { N: number; r: number; p: number }, pepper: string): Promise<Buffer> {
  const peppered = createHmac('sha256', pepper).update(secret).digest();
  return new Promise((resolve, reject) =>
    scrypt(peppered, salt, 32, { ...params, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** The stored form of a client secret: a salted, peppered HMAC-SHA256. */
export async function hashSecret(secret: string, pepper: string): Promise<string> {
  const salt = randomBytes(16);
  return [SCHEME, salt.toString('base64url'), mac(secret, salt, pepper).toString('base64url')].join('$');
}

/** Whether `secret` matches the stored hash (either scheme), compared in constant time. */
export async function verifySecret(secret: string, stored: string, pepper: string): Promise<boolean> {
  const parts = stored.split('$');
  let key: Buffer;
  let expected: Buffer;
  if (parts[0] === SCHEME && parts.length === 3) {
    key = mac(secret, Buffer.from(parts[1]!, 'base64url'), pepper);
    expected = Buffer.from(parts[2]!, 'base64url');
  } else if (parts[0] === 'scrypt' && parts.length === 6) {
    const [, n, r, p, salt, hash] = parts as [string, string, string, string, string, string];
    key = await legacyScrypt(secret, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) }, pepper);
    expected = Buffer.from(hash, 'base64url');
  } else {
    return false;
  }
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash that no secret matches, checked when the client ID is unknown so both failures take as long. */
export const UNKNOWN_CLIENT_HASH = `${SCHEME}$${randomBytes(16).toString('base64url')}$${randomBytes(32).toString('base64url')}`;

/**
 * Runs what a refused exchange owes besides its answer: the audit entry of a known client's wrong
 * secret. An unknown client has no organisation to audit in, so writing the entry before answering
 * made a known client's refusal a transaction slower than an unknown one's (3.2 against 2.3 ms), and
 * the time of the answer told which client IDs exist. Started once the answer is on its way, the
 * entry costs the answer nothing; a crash in that millisecond loses it.
 */
export type AfterAnswer = (work: () => Promise<unknown>) => void;

/** An AfterAnswer that reports a failed write to `onError` (it can no longer fail the request). */
export const afterAnswer =
  (onError: (err: unknown) => void): AfterAnswer =>
  (work) => {
    setImmediate(() => {
      work().catch(onError);
    });
  };
