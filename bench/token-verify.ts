import { buildApp } from '../api/app.js';
import { loadConfig } from '../api/config.js';
import { openDatabase } from '../api/db/database.js';
import { api, Client } from '../test/support/harness.js';
import { record } from './results.js';

/**
 * Cost of verifying an agent token as a gateway operation does: the Ed25519 signature and claims
 * (jose), then the revocation check against the cached revocation state. In-process, on the
 * embedded database; the cache is warm, as it is for an agent calling more than once a second.
 */
export async function benchTokenVerify(iterations: number) {
  const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'silent' });
  const database = await openDatabase(config);
  const app = await buildApp({ config, db: database.db });
  await app.ready();
  try {
    const c = new Client(app);
    await c.post(api('/auth/dev-login'), { email: 'bench@example.com' });
    await c.post(api('/tenants/onboard'), { name: 'Bench', slug: 'bench', primary_region: 'eu-west', admin_display_name: 'Bench Admin' });
    const agent = (await c.post(api('/agents'), { name: 'Bench agent' })).json();
    const identity = (await c.post(api(`/agents/${agent.id}/identities`))).json();
    const exchanged = await app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    const token = exchanged.json().access_token as string;
    const { tokens, revocations } = app.deps;

    const run = async (name: string, fn: () => Promise<unknown>) => {
      for (let i = 0; i < Math.min(1000, iterations); i++) await fn(); // warm up
      const start = process.hrtime.bigint();
      for (let i = 0; i < iterations; i++) await fn();
      const us = Number(process.hrtime.bigint() - start) / 1000 / iterations;
      return { step: name, microseconds_per_token: Number(us.toFixed(1)), per_second_per_core: Math.round(1e6 / us) };
    };
    // Emptying the verified-token cache each time measures a token's first use: the Ed25519 check.
    const verified = (tokens as unknown as { verified: { clear(): void } }).verified;
    const rows = [
      await run('first use: signature and claims', () => {
        verified.clear();
        return tokens.verify(token);
      }),
      await run('reuse: claims and expiry (verified-token cache)', () => tokens.verify(token)),
      await run('gateway path: token and revocation (both cached)', async () => revocations.check(await tokens.verify(token))),
    ];
    for (const row of rows) record('token-verify', row.step, row.microseconds_per_token, 'µs');
    return rows;
  } finally {
    await app.close();
    await database.close();
  }
}
