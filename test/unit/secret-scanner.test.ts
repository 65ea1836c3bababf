import { describe, expect, it } from 'vitest';
import { findSecrets, looksLikeKeyMaterial } from '../../api/modules/shared/secret-scanner.js';
import { BENIGN, POSITIVE } from '../fixtures/secret-corpus.js';

describe('secret scanner corpus', () => {
  it('finds every positive sample and flags no benign one', () => {
    const missed = POSITIVE.filter(([, params]) => findSecrets(params).length === 0).map(([format]) => format);
    const falsePositives = BENIGN.filter((params) => findSecrets(params).length > 0);
    const recall = (POSITIVE.length - missed.length) / POSITIVE.length;
    console.log(
      `secret scanner: recall ${(recall * 100).toFixed(1)}% (${POSITIVE.length - missed.length}/${POSITIVE.length} formats), ` +
        `false positives ${falsePositives.length}/${BENIGN.length} benign samples`,
    );
    expect(POSITIVE.length).toBeGreaterThanOrEqual(30);
    expect(missed).toEqual([]);
    expect(falsePositives).toEqual([]);
  });

  it('names where the secret is, never the secret itself', () => {
    const secret = `ghp_${'a1B2c3D4e5'.repeat(4)}`;
    const findings = findSecrets({ request: { headers: [{ 'x-api': secret }] } });
    expect(findings).toEqual([{ path: '$.request.headers[0]["x-api"]', kind: 'vcs_token' }]);
    expect(JSON.stringify(findings)).not.toContain(secret);
  });

  it('looks in keys as well as values', () => {
    expect(findSecrets({ [`sk_live_${'x1Y2z3'.repeat(4)}`]: 1 })).toEqual([{ path: '$[key]', kind: 'payment_key' }]);
  });

  it('refuses key material but accepts secret-store paths for credential references', () => {
    expect(looksLikeKeyMaterial('secret/data/payments/provider-key')).toBe(false);
    expect(looksLikeKeyMaterial('arn:cloud:secretsmanager:eu-west-1:123456789012:secret:payments')).toBe(false);
    expect(looksLikeKeyMaterial('projects/acme/secrets/payments/versions/latest')).toBe(false);
    expect(looksLikeKeyMaterial(`sk_live_${'a1B2c3D4'.repeat(3)}`)).toBe(true);
    expect(looksLikeKeyMaterial('Zx8vQ2mN7pL4kR9sT1wY6uB3cF5hJ0gD')).toBe(true);
  });
});
