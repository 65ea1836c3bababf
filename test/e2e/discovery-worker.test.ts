import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, setPlan } from '../support/harness.js';
import { apiEnv, Person } from '../support/gateway-load.js';
import { rpcRequests, startHostileMcp, tool } from '../support/hostile-mcp.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import type { Standin } from '../support/standin.js';

/**
 * The real discovery job (`discovery.run`: api/modules/integrations/discovery.job.ts) survives `kill -9` of
 * the `tollgate worker` running it, with real processes on real PostgreSQL: `tollgate api` (no in-process
 * worker) sends the job as a person starts a run, `tollgate worker` processes work it, and the run reaches an
 * MCP stand-in on loopback whose `tools/list` hangs, so the test knows the worker is inside the job when it
 * kills it. worker/README.md, "The contract of a job": a killed worker's job is retried after its expiry and
 * completes once; a job whose every attempt was killed goes to the dead letter, which marks the run failed.
 *
 * The queue keeps its own retry policy (migration 0009: 2 retries, 5 seconds apart); the processes get a
 * short expiry (JOB_TIMEOUT_SECONDS) and fast polling and maintenance so that a retry comes within seconds.
 */

const JOB_TIMEOUT_SECONDS = 3;
const ABANDONED = 'The run did not finish: its worker stopped or could not reach the database, and the retries are spent. Start a new run.';

type Proc = ReturnType<typeof spawnTollgate>;

const cleanups: Array<() => unknown> = [];
let fresh: Awaited<ReturnType<typeof freshDatabase>>;
let owner: pg.Client;
let person: Person;
let api: Proc;
const workers: Proc[] = [];

/** Settings both processes share: PostgreSQL as the runtime role, loopback open to connectors, quick jobs. */
function jobEnv(): Record<string, string> {
  return {
    DATABASE_URL: fresh.runtimeUrl,
    WORKER_IN_PROCESS: 'false',
    OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32',
    JOB_TIMEOUT_SECONDS: String(JOB_TIMEOUT_SECONDS),
    JOB_POLL_INTERVAL_SECONDS: '0.5',
    JOB_MAINTENANCE_INTERVAL_SECONDS: '1',
    DATABASE_POOL_MAX: '4',
    LOG_LEVEL: 'info',
  };
}

beforeAll(async () => {
  fresh = await freshDatabase();
  cleanups.push(() => fresh.drop());
  owner = new pg.Client({ connectionString: fresh.ownerUrl });
  await owner.connect();
  cleanups.push(() => owner.end());
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  api = spawnTollgate(['api'], apiEnv(port, jobEnv()));
  cleanups.push(() => stop(api));
  await waitForHttp(`${base}/readyz`, 60_000, api);
  person = await Person.onboard(base);
  await setPlan(fresh, person.orgId, 'enterprise');
}, 90_000);

afterAll(async () => {
  // Every worker, the API, the stand-ins, the database: each one whatever happened to the others.
  for (const w of workers) cleanups.push(() => stop(w));
  for (const c of cleanups.splice(0).reverse()) {
    try {
      await c();
    } catch (err) {
      process.stderr.write(`discovery-worker cleanup: ${(err as Error).message}\n`);
    }
  }
}, 60_000);

/** `tollgate worker` on the test's database, once it answers /readyz. */
async function startWorker(): Promise<Proc> {
  const port = await freePort();
  const worker = spawnTollgate(['worker'], { ...jobEnv(), WORKER_PORT: String(port) });
  workers.push(worker);
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, worker);
  return worker;
}

async function kill9(p: Proc): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) throw new Error(`the worker had already exited (${p.exitCode ?? p.signalCode}): ${p.output()}`);
  const exited = new Promise((r) => p.once('exit', r));
  p.kill('SIGKILL');
  await exited;
  expect(p.signalCode).toBe('SIGKILL');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, logs: () => string = () => ''): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms\n${logs().slice(-4000)}`);
    await sleep(100);
  }
}

/**
 * An MCP server on loopback whose `tools/list` never answers the first `hangs` times (the discovering
 * worker waits inside its job), and answers two tools after that.
 */
async function mcpStandin(hangs: number): Promise<Standin & { toolsLists: () => number }> {
  let left = hangs;
  const server = await startHostileMcp({
    page: () => ({ tools: [tool('echo'), tool('lookup', { annotations: { readOnlyHint: true } })] }),
    misbehave: (step) => step === 'tools/list' && left-- > 0,
  });
  cleanups.push(() => server.close());
  return Object.assign(server, { toolsLists: () => rpcRequests(server).filter((r) => r.method === 'tools/list').length });
}

/** A live `mcp` integration reaching `server`; answers its connector's id. */
async function mcpIntegration(name: string, prefix: string, server: Standin): Promise<string> {
  const created = await person.ok('POST', '/integrations', {
    kind: 'mcp',
    name,
    mode: 'live',
    config: { endpoint: `${server.url}/mcp`, name, tool_prefix: prefix },
  });
  return created.connector.id as string;
}

interface Run {
  id: string;
  status: 'running' | 'succeeded' | 'failed';
  counters: Record<string, number>;
  error_message: string | null;
  finished_at: string | null;
}

async function runsOf(connectorId: string): Promise<Run[]> {
  return (await person.ok('GET', `/connectors/${connectorId}/runs`)).items as Run[];
}

/** The run as served; undefined while it is running. */
async function finished(connectorId: string, runId: string): Promise<Run | undefined> {
  const run = (await runsOf(connectorId)).find((r) => r.id === runId);
  return run && run.status !== 'running' ? run : undefined;
}

/** The run's job as pg-boss keeps it (the queue's row, read as the schema owner). */
async function jobOf(queue: string, runId: string): Promise<{ state: string; retry_count: number } | undefined> {
  const { rows } = await owner.query(
    `select state, retry_count from pgboss.job where name = $1 and data->>'run_id' = $2
     union all select state, retry_count from pgboss.archive where name = $1 and data->>'run_id' = $2`,
    [queue, runId],
  );
  if (rows.length > 1) throw new Error(`${rows.length} ${queue} jobs for run ${runId}`);
  return rows[0] as { state: string; retry_count: number } | undefined;
}

/** The attempts the handler counted on the run's row (not served by the API). */
async function attemptsOf(runId: string): Promise<number> {
  const { rows } = await owner.query('select attempts from discovery_runs where id = $1', [runId]);
  return (rows[0] as { attempts: number }).attempts;
}

/** The audit entries of `action` on the connector that name the run. */
async function audits(action: string, connectorId: string, runId: string): Promise<Array<{ actor: { type: string }; details: { run_id: string; status: string } }>> {
  const page = await person.ok('GET', `/audit?limit=200&action=${action}&target_id=${connectorId}`);
  return (page.items as Array<{ actor: { type: string }; details: { run_id: string; status: string } }>).filter((e) => e.details.run_id === runId);
}

/** The `discovery_run` evidence records of the run. */
async function runEvidence(runId: string): Promise<Array<{ payload: { run_id: string; status: string; error_message: string | null } }>> {
  const page = await person.ok('GET', '/evidence?limit=200&event_type=discovery_run');
  return (page.items as Array<{ payload: { run_id: string; status: string; error_message: string | null } }>).filter((e) => e.payload.run_id === runId);
}

async function toolKeys(prefix: string): Promise<string[]> {
  const tools = (await person.ok('GET', '/tools')).items as Array<{ tool_key: string }>;
  return tools.map((t) => t.tool_key).filter((k) => k.startsWith(`${prefix}.`)).sort();
}

async function serversAt(server: Standin): Promise<number> {
  const servers = (await person.ok('GET', '/mcp-servers')).items as Array<{ endpoint: string }>;
  return servers.filter((s) => s.endpoint.startsWith(server.url)).length;
}

const jobLines = (p: Proc, queue: string, msg: string) =>
  p
    .output()
    .split('\n')
    .filter((l) => l.includes(`"queue":"${queue}"`) && l.includes(`"msg":"${msg}"`));

describe('kill -9 of tollgate worker in the middle of a discovery run', () => {
  it('another worker retries the job after its expiry: the run succeeds once, its tools land once', async () => {
    const standin = await mcpStandin(1);
    const connectorId = await mcpIntegration('Crash Once', 'crashonce', standin);
    const first = await startWorker();

    const started = (await person.ok('POST', `/connectors/${connectorId}/run`, {})) as Run;
    expect(started.status).toBe('running');
    const runId = started.id;
    // The worker is inside the job: it asked for the tool list, which does not come.
    await until('the first worker at tools/list', async () => (standin.toolsLists() >= 1 ? true : undefined), 30_000, first.output);
    expect(await jobOf('discovery.run', runId)).toEqual({ state: 'active', retry_count: 0 });
    await kill9(first);
    const killedAt = Date.now();
    // Nothing finished it: the run is still running, the job still active (until its expiry).
    expect((await runsOf(connectorId)).find((r) => r.id === runId)?.status).toBe('running');
    expect(await jobOf('discovery.run', runId)).toEqual({ state: 'active', retry_count: 0 });

    const second = await startWorker();
    const run = await until('the run finished', () => finished(connectorId, runId), 40_000, second.output);
    const killToSuccessMs = Date.now() - killedAt;
    // A while longer (several polls and maintenance rounds): nothing runs or finishes it again.
    await sleep(2_500);

    const runs = await runsOf(connectorId);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ id: runId, status: 'succeeded', error_message: null, counters: { mcp_servers_added: 1, tools_added: 2 } });
    expect(runs[0]!.finished_at).not.toBeNull();
    expect(run.status).toBe('succeeded');
    // Two attempts, the second one the retry; the stand-in was asked twice, never a third time.
    expect(await attemptsOf(runId)).toBe(2);
    expect(await jobOf('discovery.run', runId)).toEqual({ state: 'completed', retry_count: 1 });
    expect(standin.toolsLists()).toBe(2);
    expect(jobLines(second, 'discovery.run', 'job finished')).toHaveLength(1);
    expect(jobLines(second, 'discovery.run', 'job finished')[0]).toContain('"retry_count":1');
    // Completed once: one audit entry, one evidence record, the tools and their server once.
    const succeeded = await audits('discovery.run_succeeded', connectorId, runId);
    expect(succeeded).toHaveLength(1);
    expect(succeeded[0]).toMatchObject({ actor: { type: 'system' }, details: { status: 'succeeded' } });
    expect(await audits('discovery.run_failed', connectorId, runId)).toEqual([]);
    expect((await runEvidence(runId)).map((e) => e.payload.status)).toEqual(['succeeded']);
    expect(await toolKeys('crashonce')).toEqual(['crashonce.echo', 'crashonce.lookup']);
    expect(await serversAt(standin)).toBe(1);
    expect(await person.ok('GET', '/evidence/verify')).toMatchObject({ valid: true });

    await stop(second);
    process.stdout.write(`discovery kill -9 once: kill to succeeded ${killToSuccessMs} ms\n`);
  }, 75_000);

  it('a worker killed on every attempt: the retries are spent, the dead letter marks the run failed, never succeeded', async () => {
    const standin = await mcpStandin(Number.POSITIVE_INFINITY);
    const connectorId = await mcpIntegration('Crash Always', 'crashalways', standin);
    let worker = await startWorker();

    const started = (await person.ok('POST', `/connectors/${connectorId}/run`, {})) as Run;
    expect(started.status).toBe('running');
    const runId = started.id;
    const kills: number[] = [];
    // Three attempts (the first and the queue's 2 retries), each killed inside the job by kill -9.
    for (let attempt = 1; attempt <= 3; attempt++) {
      const current = worker;
      await until(`attempt ${attempt} at tools/list`, async () => (standin.toolsLists() >= attempt ? true : undefined), 40_000, current.output);
      expect(await jobOf('discovery.run', runId)).toEqual({ state: 'active', retry_count: attempt - 1 });
      await kill9(current);
      kills.push(Date.now());
      expect((await runsOf(connectorId)).find((r) => r.id === runId)?.status).toBe('running');
      worker = await startWorker();
    }

    const last = worker;
    const run = await until('the run finished', () => finished(connectorId, runId), 40_000, last.output);
    const lastKillToFailedMs = Date.now() - kills[2]!;
    await sleep(2_500);

    const runs = await runsOf(connectorId);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ id: runId, status: 'failed', error_message: ABANDONED, counters: { mcp_servers_added: 0, tools_added: 0 } });
    expect(run.status).toBe('failed');
    expect(runs[0]!.finished_at).not.toBeNull();
    expect(await attemptsOf(runId)).toBe(3);
    // The job failed after its last retry; its dead letter ran once, in the worker that was alive.
    expect(await jobOf('discovery.run', runId)).toEqual({ state: 'failed', retry_count: 2 });
    expect(await jobOf('discovery.run.dead', runId)).toMatchObject({ state: 'completed' });
    expect(jobLines(last, 'discovery.run.dead', 'job finished')).toHaveLength(1);
    expect(standin.toolsLists()).toBe(3);
    // Failed once, never succeeded: nothing of the source landed.
    expect(await audits('discovery.run_succeeded', connectorId, runId)).toEqual([]);
    const failed = await audits('discovery.run_failed', connectorId, runId);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ actor: { type: 'system' }, details: { status: 'failed' } });
    expect((await runEvidence(runId)).map((e) => [e.payload.status, e.payload.error_message])).toEqual([['failed', ABANDONED]]);
    expect(await toolKeys('crashalways')).toEqual([]);
    expect(await serversAt(standin)).toBe(0);
    // Not held running: the connector takes a new run (with no worker left to start it).
    await stop(last);
    const again = await person.call('POST', `/connectors/${connectorId}/run`, {});
    expect('status' in again && again.status).toBe(200);

    process.stdout.write(
      `discovery kill -9 on every attempt: between kills ${kills[1]! - kills[0]!} ms, ${kills[2]! - kills[1]!} ms; last kill to failed ${lastKillToFailedMs} ms\n`,
    );
  }, 90_000);
});
