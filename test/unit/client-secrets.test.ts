import { createHmac, randomBytes, scryptSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashSecret, newClientSecret, UNKNOWN_CLIENT_HASH, verifySecret } from '../../api/modules/identities/secrets.js';

const PEPPER = 'pepper-for-tests-0123456789abcdef';

describe('client secret hashes', () => {
  it('verify the secret they were made from, under the same pepper only', async () => {
    const secret = newClientSecret();
    const stored = await hashSecret(secret, PEPPER);
    expect(stored).toMatch(/^hmac256\$/);
    expect(stored).not.toContain(secret.slice(4));
    expect(await verifySecret(secret, stored, PEPPER)).toBe(true);
    expect(await verifySecret(`${secret}x`, stored, PEPPER)).toBe(false);
    expect(await verifySecret(secret, stored, `${PEPPER}x`)).toBe(false);
  });

  it('are salted: one secret hashed twice gives two hashes', async () => {
    const secret = newClientSecret();
    expect(await hashSecret(secret, PEPPER)).not.toBe(await hashSecret(secret, PEPPER));
  });

  it('still verify the scrypt hashes of earlier versions', async () => {
    const secret = newClientSecret();
    const salt = randomBytes(16);
    const peppered = createHmac('sha256', PEPPER).update(secret).digest();
    const key = scryptSync(peppered, salt, 32, { N: 1024, r: 8, p: 1 });
    const legacy = ['scrypt', 1024, 8, 1, salt.toString('base64url'), key.toString('base64url')].join('$');
    expect(await verifySecret(secret, legacy, PEPPER)).toBe(true);
    expect(await verifySecret(newClientSecret(), legacy, PEPPER)).toBe(false);
  });

  it('match nothing for an unknown client, and refuse malformed hashes', async () => {
    expect(await verifySecret(newClientSecret(), UNKNOWN_CLIENT_HASH, PEPPER)).toBe(false);
    for (const bad of ['', 'hmac256$', 'md5$a$b', 'scrypt$1$2$3']) expect(await verifySecret('tgs_x', bad, PEPPER)).toBe(false);
  });
});
