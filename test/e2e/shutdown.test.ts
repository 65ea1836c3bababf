import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '../support/harness.js';
import { acknowledged, allowedAgents, apiEnv, Burst, expectAcknowledgedKept, isFailure, Person, send } from '../support/gateway-load.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

/**
 * SIGTERM to `tollgate api` in the middle of a burst: the listener closes at once, what was read is
 * finished and answered, kept-alive connections are told to close, then the pool, then exit 0.
 */

type Api = ReturnType<typeof spawnTollgate>;

let db: Awaited<ReturnType<typeof freshDatabase>>;
const running: Api[] = [];

beforeAll(async () => {
  db = await freshDatabase();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map(stop));
});
afterAll(async () => {
  await db?.drop();
});

async function startApi(env: Record<string, string>, base: string): Promise<Api> {
  const api = spawnTollgate(['api'], env);
  running.push(api);
  await waitForHttp(`${base}/readyz`, 60_000, api);
  return api;
}

function exited(api: Api): Promise<{ code: number | null; at: number }> {
  return new Promise((resolve) => {
    if (api.exitCode !== null) return resolve({ code: api.exitCode, at: Date.now() });
    api.once('exit', (code) => resolve({ code, at: Date.now() }));
  });
}

describe('SIGTERM to tollgate api', () => {
  it('mid-burst: requests in flight are answered, later ones refused at connect, nothing acknowledged is lost, exit 0', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = apiEnv(port, { DATABASE_URL: db.runtimeUrl });
    let api = await startApi(env, base);
    const person = await Person.onboard(base);
    const agents = await allowedAgents(base, person, 4);
    // Every loop keeps its connection alive, so the drain has kept-alive connections to close.
    const burst = new Burst(base, agents, { loopsPerAgent: 3, keepAlive: true }).start();
    await burst.until(300);
    const exit = exited(api);
    const termAt = Date.now();
    api.kill('SIGTERM');
    const { code, at } = await exit;
    await burst.stop();
    const shutdownMs = at - termAt;

    expect(code, api.output().slice(-2000)).toBe(0);

    // Every answer is an acknowledgement, and every socket error is a refused connection: no request
    // that reached the server was cut or turned away.
    const answered = burst.records.filter((s) => s.result && !isFailure(s.result));
    expect(answered.filter((s) => !acknowledged(s)).map((s) => s.result)).toEqual([]);
    const failures = burst.records.flatMap((s) => (s.result && isFailure(s.result) ? [s.result] : []));
    expect(failures.filter((f) => f.error !== 'ECONNREFUSED')).toEqual([]);
    expect(failures.length).toBeGreaterThan(0);
    // Submissions in flight when the signal came were finished and answered, not dropped.
    const inFlight = burst.records.filter((s) => acknowledged(s) && s.sentAt! <= termAt && s.doneAt! >= termAt);
    expect(inFlight.length).toBeGreaterThan(0);
    expect(api.output()).toContain('"msg":"shut down"');
    // Well inside the default bound of 20 seconds.
    expect(shutdownMs).toBeLessThan(5000);

    api = await startApi(env, base);
    const counts = await expectAcknowledgedKept(base, person, burst.records);
    // A graceful stop answers what it commits.
    expect(counts.committedUnacknowledged).toBe(0);
    process.stdout.write(`SIGTERM mid-burst: ${JSON.stringify({ ...counts, inFlightAnswered: inFlight.length, refused: failures.length, shutdownMs })}\n`);
  }, 60_000);

  it('exits 1 once SHUTDOWN_TIMEOUT_SECONDS passes with a request still unread', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const api = await startApi(apiEnv(port, { DATABASE_URL: db.runtimeUrl, SHUTDOWN_TIMEOUT_SECONDS: '2' }), base);
    // A client that sends half a body and stalls keeps its request in flight.
    const socket = connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.on('error', () => undefined);
    socket.write('POST /api/v1/identities/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"grant');
    await new Promise((r) => setTimeout(r, 200));
    const exit = exited(api);
    const termAt = Date.now();
    api.kill('SIGTERM');
    // New connections are refused at once.
    await new Promise((r) => setTimeout(r, 300));
    expect(await send(base, 'GET', '/healthz')).toMatchObject({ error: 'ECONNREFUSED' });
    const { code, at } = await exit;
    socket.destroy();
    expect(code).toBe(1);
    expect(at - termAt).toBeGreaterThanOrEqual(2000);
    expect(at - termAt).toBeLessThan(4000);
    expect(api.output()).toContain('shutdown took longer than SHUTDOWN_TIMEOUT_SECONDS');
  }, 60_000);
});
