import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

/**
 * The token exchanges answer an unknown client and a known client with a wrong secret at the same
 * cost (docs/registry.md), so that a client ID's existence cannot be told from the time of the answer.
 * Both failures are timed interleaved (unknown, wrong, unknown, wrong, ...) through the real app on
 * real PostgreSQL, so that load on the machine falls on both alike, and their medians compared.
 */

const ROUNDS = 200;
const WARM_UP = 20;
/**
 * Two medians are "the same" within this share of the larger one. Measured on a 2-core machine: 29-32%
 * apart while a wrong secret was audited before the answer, 0-9% apart since.
 */
const TOLERANCE = 0.2;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

describe('token exchange: an unknown client and a wrong secret cost the same', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    // The limits would otherwise stop the measurement after 30 exchanges of one client ID.
    t = await startTestApp({
      env: { RATE_LIMIT_TOKEN_PER_MINUTE: '100000', RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: '100000', LOG_LEVEL: 'warn' },
    });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
  });
  afterAll(async () => t.close());

  async function timeBoth(url: string, known: { client_id: string; client_secret: string }, unknownId: string) {
    const attempt = async (client_id: string) => {
      const started = performance.now();
      const res = await t.app.inject({
        method: 'POST',
        url,
        payload: { grant_type: 'client_credentials', client_id, client_secret: `${known.client_secret}x` },
      });
      const took = performance.now() - started;
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('invalid_client');
      return took;
    };
    const unknown: number[] = [];
    const wrong: number[] = [];
    for (let i = 0; i < WARM_UP + ROUNDS; i++) {
      // Alternate which goes first, so that neither always follows the other's leftovers.
      const order = i % 2 === 0 ? (['u', 'w'] as const) : (['w', 'u'] as const);
      for (const which of order) {
        const took = await attempt(which === 'u' ? unknownId : known.client_id);
        if (i >= WARM_UP) (which === 'u' ? unknown : wrong).push(took);
      }
    }
    const m = { unknown: median(unknown), wrong: median(wrong) };
    const larger = Math.max(m.unknown, m.wrong);
    console.log(`${url}: median unknown client ${m.unknown.toFixed(3)} ms, wrong secret ${m.wrong.toFixed(3)} ms over ${ROUNDS} each`);
    return { ...m, larger };
  }

  it('POST /identities/token', async () => {
    const agent = (await admin.client.post(api('/agents'), { name: 'Timing agent' })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const m = await timeBoth(api('/identities/token'), identity, 'tgc_000000000000000000000000');
    expect(Math.abs(m.unknown - m.wrong)).toBeLessThan(TOLERANCE * m.larger);
  }, 120_000);

  it('POST /service-accounts/token', async () => {
    const sa = (await admin.client.post(api('/service-accounts'), { name: 'timing-sa' })).json();
    const m = await timeBoth(api('/service-accounts/token'), sa, 'tgsa_000000000000000000000000');
    expect(Math.abs(m.unknown - m.wrong)).toBeLessThan(TOLERANCE * m.larger);
  }, 120_000);
});
