import { createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/** Client IDs carry a fixed prefix so that they are recognisable in logs, configs and scanners. */
export const CLIENT_ID_PREFIX = 'tgc_';
export const CLIENT_SECRET_PREFIX = 'tgs_';

export const newClientId = () => `${CLIENT_ID_PREFIX}${randomBytes(12).toString('hex')}`;
export const newClientSecret = () => `${CLIENT_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;

// scrypt cost: N=2^15, r=8, p=1 (about 32 MiB and tens of milliseconds a check).
const N = 32768;
const R = 8;
const P = 1;
const KEYLEN = 32;

function derive(secret: string, salt: Buffer, pepper: string): Promise<Buffer> {
  // The pepper (SECRET_PEPPER) lives outside the database: a stolen table alone cannot be brute-forced.
  const peppered = createHmac('sha256', pepper).update(secret).digest();
  return new Promise((resolve, reject) =>
    scrypt(peppered, salt, KEYLEN, { N, r: R, p: P, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** A slow, salted, peppered hash of a client secret: `scrypt$N$r$p$salt$hash`. */
export async function hashSecret(secret: string, pepper: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(secret, salt, pepper);
  return ['scrypt', N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

export async function verifySecret(secret: string, stored: string, pepper: string): Promise<boolean> {
  const [scheme, , , , salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const key = await derive(secret, Buffer.from(salt, 'base64url'), pepper);
  const expected = Buffer.from(hash, 'base64url');
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/** A hash that no secret matches, checked when the client ID is unknown so both failures take as long. */
export const UNKNOWN_CLIENT_HASH = `scrypt$${N}$${R}$${P}$${randomBytes(16).toString('base64url')}$${randomBytes(32).toString('base64url')}`;
