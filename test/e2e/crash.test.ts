import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { acknowledged, allowedAgents, apiEnv, Burst, expectAcknowledgedKept, isFailure, migratedCluster, Person } from '../support/gateway-load.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

/**
 * `kill -9` of `tollgate api` while several agents submit at once: no clean shutdown, no flush, the
 * process is simply gone. What was acknowledged must have been committed before its answer left.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Api = ReturnType<typeof spawnTollgate>;

async function startApi(env: Record<string, string>, base: string): Promise<Api> {
  const api = spawnTollgate(['api'], env);
  cleanups.push(() => stop(api));
  await waitForHttp(`${base}/readyz`, 60_000, api);
  return api;
}

async function kill9(api: Api): Promise<void> {
  const exited = new Promise((r) => api.once('exit', r));
  api.kill('SIGKILL');
  await exited;
}

/** Burst, kill -9 mid-burst, restart on the same database, and check what was acknowledged. */
async function crashAndRestart(env: Record<string, string>, base: string, ackedBeforeKill: number) {
  const t0 = Date.now();
  const ms: Record<string, number> = {};
  const lap = (name: string) => (ms[name] = Date.now() - t0);
  let api = await startApi(env, base);
  lap('started');
  const person = await Person.onboard(base);
  const agents = await allowedAgents(base, person, 4);
  lap('set up');
  const burst = new Burst(base, agents, { loopsPerAgent: 3 }).start();
  await burst.until(ackedBeforeKill);
  await kill9(api);
  await burst.stop();
  lap('killed');
  expect(api.signalCode).toBe('SIGKILL');

  // Submissions were in flight when the process died: their callers saw the connection go.
  const cut = burst.records.filter((s) => s.result && isFailure(s.result) && s.result.error !== 'ECONNREFUSED');
  expect(cut.length).toBeGreaterThan(0);
  // Nothing but acknowledgements and socket errors: no submission was refused or failed.
  expect(burst.records.filter((s) => !acknowledged(s) && !(s.result && isFailure(s.result))).map((s) => s.result)).toEqual([]);

  api = await startApi(env, base);
  lap('restarted');
  const counts = await expectAcknowledgedKept(base, person, burst.records);
  lap('checked');
  expect(counts.acknowledged).toBeGreaterThanOrEqual(ackedBeforeKill);
  return { ...counts, cutOff: cut.length, ms };
}

describe('kill -9 of tollgate api during a burst of submissions', () => {
  it('on PostgreSQL (synchronous_commit on): every acknowledged action is kept once, replays answer it, the chain verifies', async () => {
    const { cluster, runtimeUrl } = await migratedCluster();
    cleanups.push(() => cluster.stop());
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const counts = await crashAndRestart(apiEnv(port, { DATABASE_URL: runtimeUrl }), base, 400);
    process.stdout.write(`kill -9 on PostgreSQL: ${JSON.stringify(counts)}\n`);
  }, 90_000);

  it('on the embedded database under DATA_DIR, as `make run` runs it: the same', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'tollgate-crash-'));
    cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const counts = await crashAndRestart(apiEnv(port, { DATA_DIR: dataDir, SEED_DEMO: 'true' }), base, 200);
    process.stdout.write(`kill -9 on the embedded database: ${JSON.stringify(counts)}\n`);
  }, 90_000);
});
