import { afterEach, describe, expect, it } from 'vitest';
import {
  acknowledged,
  allowedAgents,
  apiEnv,
  Burst,
  expectAcknowledgedKept,
  isFailure,
  migratedCluster,
  Person,
  send,
  submit,
  TOOL,
  type Answer,
  type Failure,
} from '../support/gateway-load.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

/**
 * PostgreSQL stops under a running `tollgate api` (a cluster of the test's own, stopped the way a
 * crash stops it) and comes back: the API says it is not ready, refuses in the envelope instead of
 * deciding without the database, and serves again by itself.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** 503 service_unavailable in the envelope, its correlation ID the one in the header. */
function expectUnavailable(r: Answer | Failure, what: string) {
  expect(isFailure(r), `${what}: ${JSON.stringify(r)}`).toBe(false);
  const a = r as Answer;
  expect({ status: a.status, code: a.json?.error?.code }, `${what}: ${JSON.stringify(a.json)}`).toEqual({ status: 503, code: 'service_unavailable' });
  expect(a.json.error.correlation_id).toBe(a.headers['x-correlation-id']);
  expect(a.json.error.message).toEqual(expect.any(String));
}

describe('the database goes away and comes back', () => {
  it('PostgreSQL stopped: /readyz 503 within a second, submissions and reads 503 in the envelope, never a decision; service resumes without a restart', async () => {
    const { cluster, runtimeUrl } = await migratedCluster();
    cleanups.push(() => cluster.stop());
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const api = spawnTollgate(['api'], apiEnv(port, { DATABASE_URL: runtimeUrl }));
    cleanups.push(() => stop(api));
    await waitForHttp(`${base}/readyz`, 60_000, api);
    const person = await Person.onboard(base);
    const agents = await allowedAgents(base, person, 3);

    const burst = new Burst(base, agents, { loopsPerAgent: 2 }).start();
    const outages: Array<{ mode: string; answered503: number; firstAcknowledgedAfterStartMs: number }> = [];
    // A crash of the database server (no checkpoint, every session cut), then a clean stop that ends
    // every session with an error. The burst goes on throughout, while the server stops and while it
    // starts again and recovers.
    for (const mode of ['immediate', 'fast'] as const) {
      await burst.until(burst.acknowledgedCount + 100);
      await cluster.halt(mode);
      const downAt = Date.now();

      for (let i = 0; i < 3; i++) {
        await new Promise((r) => setTimeout(r, 100));
        // The process lives on without its database.
        expect(api.exitCode, api.output().slice(-3000)).toBeNull();
        const ready = await send(base, 'GET', '/readyz', { timeoutMs: 5000 });
        expect(ready).toMatchObject({ status: 503 });
        expect((ready as Answer).ms).toBeLessThan(1000);
      }
      // An agent's submission under a new key, a person's reads and a write.
      const key = `while-down-${mode}-${downAt}`;
      const fresh = await submit(base, {
        agent: agents[0]!,
        key,
        body: JSON.stringify({ tool: TOOL, target: 'crm://customers/7', parameters: { customer_id: '7' } }),
        correlationId: key,
      });
      expectUnavailable(fresh, 'a submission');
      expect((fresh as Answer).json.error.correlation_id).toBe(key);
      expectUnavailable(await person.call('GET', '/actions'), 'a list of actions');
      expectUnavailable(await person.call('GET', `/agents/${agents[0]!.id}`), 'an agent');
      expectUnavailable(await person.call('POST', '/agents', { name: `While down ${mode}` }), 'a new agent');
      // Let the burst run into the outage for a moment.
      await new Promise((r) => setTimeout(r, 1000));

      const resumeAt = Date.now();
      await cluster.resume();
      const upAt = Date.now();
      await burst.until(burst.acknowledgedCount + 100, 30_000);
      // The same process serves again: no restart.
      expect(api.exitCode).toBeNull();
      expect(await send(base, 'GET', '/readyz')).toMatchObject({ status: 200 });
      expect(await person.call('GET', `/agents/${agents[0]!.id}`)).toMatchObject({ status: 200 });

      // While the database was down no submission got a decision: each answer was a 503 in the envelope.
      const duringOutage = burst.records.filter((s) => s.sentAt! >= downAt && s.doneAt! <= resumeAt);
      expect(duringOutage.length).toBeGreaterThan(0);
      for (const s of duringOutage) expectUnavailable(s.result!, `submission ${s.key} during the outage`);
      outages.push({
        mode,
        answered503: duringOutage.length,
        firstAcknowledgedAfterStartMs: Math.min(...burst.records.filter((s) => acknowledged(s) && s.sentAt! >= upAt).map((s) => s.doneAt! - upAt)),
      });
    }
    await burst.stop();
    // Nothing but acknowledgements and 503s, before, during and after each outage.
    const other = burst.records.filter((s) => !acknowledged(s) && !(s.result && !isFailure(s.result) && s.result.status === 503));
    expect(other.map((s) => s.result)).toEqual([]);

    // What was acknowledged before the crash survived it (synchronous_commit on), once, and replays.
    const counts = await expectAcknowledgedKept(base, person, burst.records);
    process.stdout.write(`database loss: ${JSON.stringify({ ...counts, outages })}\n`);
  }, 90_000);
});
