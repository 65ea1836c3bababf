import { spawn, type ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { openDatabase, type Database } from '../../api/db/database.js';
import { JobQueue } from '../../api/platform/jobs.js';
import { createLogger } from '../../api/platform/logger.js';
import { freshDatabase } from '../support/harness.js';
import { RUNTIME_ROLE } from '../support/pg-urls.js';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, spawnTollgate, stop, waitForHttp } from '../support/processes.js';

/**
 * `tollgate worker` as an operator runs it, on PostgreSQL: probes, the production guard, SIGTERM; and
 * kill -9 in the middle of a job. The kill runs test/support/test-worker.ts, the worker's own process code
 * (worker/worker.ts) working a test queue whose handler blocks, so that no test queue ships in the product.
 */

type Proc = ChildProcess & { output: () => string };

const running: Proc[] = [];
let fresh: Awaited<ReturnType<typeof freshDatabase>>;
let owner: pg.Client;
let sender: Database;
let queue: JobQueue;

beforeAll(async () => {
  fresh = await freshDatabase();
  owner = new pg.Client({ connectionString: fresh.ownerUrl });
  await owner.connect();
  // What a migration would create for a real queue: the queue (retried twice, at once) and a table.
  await owner.query(`select pgboss.create_queue('test.block', '{"policy":"standard","retryLimit":2,"retryDelay":0}'::json)`);
  await owner.query(`create table job_log (job_id uuid, attempt int, event text, at timestamptz default clock_timestamp())`);
  await owner.query(`grant select, insert on job_log to ${RUNTIME_ROLE}`);
  // The test sends as the API does: the runtime role, JOB_TIMEOUT_SECONDS=2 (an active job with no live worker is retried after it).
  const config = loadConfig({ DATABASE_URL: fresh.runtimeUrl, JOB_TIMEOUT_SECONDS: '2', LOG_LEVEL: 'silent' });
  sender = await openDatabase(config);
  queue = new JobQueue(sender.db, config.jobs, createLogger('silent'));
});
afterEach(async () => {
  await Promise.all(running.splice(0).map(stop));
});
afterAll(async () => {
  await sender?.close();
  await owner?.end();
  await fresh?.drop();
});

function track<T extends Proc>(p: T): T {
  running.push(p);
  return p;
}

/** test/support/test-worker.ts, started as `tollgate worker` is. */
function spawnTestWorker(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/test-worker.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return track(Object.assign(child, { output: () => out }));
}

function workerEnv(port: number, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: fresh.runtimeUrl,
    WORKER_PORT: String(port),
    JOB_POLL_INTERVAL_SECONDS: '0.5',
    JOB_MAINTENANCE_INTERVAL_SECONDS: '1',
    JOB_TIMEOUT_SECONDS: '2',
    LOG_LEVEL: 'info',
    ...extra,
  };
}

async function startTestWorker(extra: Record<string, string> = {}): Promise<Proc> {
  const port = await freePort();
  const worker = spawnTestWorker(workerEnv(port, extra));
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 30_000, worker);
  return worker;
}

function exitCode(p: ChildProcess, timeoutMs = 20_000): Promise<number | string> {
  return new Promise((resolve, reject) => {
    if (p.exitCode !== null || p.signalCode !== null) return resolve(p.exitCode ?? p.signalCode!);
    const timer = setTimeout(() => reject(new Error(`still running after ${timeoutMs} ms`)), timeoutMs);
    p.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? signal!);
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** The job's row as pg-boss keeps it, read as the schema owner. */
async function job(id: string): Promise<{ state: string; retry_count: number }> {
  const { rows } = await owner.query(`select state, retry_count from pgboss.job where name = 'test.block' and id = $1`, [id]);
  return rows[0] as { state: string; retry_count: number };
}

/** What the handler's attempts logged, in order: `<attempt> <event>`. */
async function log(id: string): Promise<string[]> {
  const { rows } = await owner.query(`select attempt, event from job_log where job_id = $1 order by at`, [id]);
  return (rows as { attempt: number; event: string }[]).map((r) => `${r.attempt} ${r.event}`);
}

async function activeAndStarted(id: string): Promise<true | undefined> {
  return (await job(id)).state === 'active' && (await log(id)).length > 0 ? true : undefined;
}

describe('tollgate worker', () => {
  it('starts on PostgreSQL as the runtime role, answers /healthz and /readyz, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    const worker = track(spawnTollgate(['worker'], { DATABASE_URL: fresh.runtimeUrl, WORKER_PORT: String(port) }));
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 30_000, worker);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()).toEqual({ status: 'ready' });
    expect(worker.output()).toContain('"msg":"tollgate worker ready"');
    worker.kill('SIGTERM');
    expect(await exitCode(worker)).toBe(0);
    expect(worker.output()).toContain('"msg":"shut down"');
  });

  it('refuses to start in production with the development settings, and without PostgreSQL (exit 78)', async () => {
    const production = track(spawnTollgate(['worker'], { ENVIRONMENT: 'production', DATABASE_URL: fresh.runtimeUrl, DEV_LOGIN_ENABLED: 'true' }));
    const embedded = track(spawnTollgate(['worker'], {}));
    expect(await exitCode(production)).toBe(78);
    expect(production.output()).toContain('tollgate worker: refusing to start');
    for (const variable of ['DEV_LOGIN_ENABLED', 'TOKEN_SIGNING_SEED', 'SECRET_PEPPER', 'SESSION_SECRET', 'OIDC_ISSUER']) {
      expect(production.output()).toContain(variable);
    }
    expect(await exitCode(embedded)).toBe(78);
    expect(embedded.output()).toContain('DATABASE_URL: the worker needs PostgreSQL');
  });

  it('kill -9 in the middle of a job: another worker retries it after its expiry, and it completes exactly once', async () => {
    const first = await startTestWorker();
    // The first attempt hangs as a stuck or slow job would; later attempts finish at once.
    const id = (await queue.send('test.block', { firstMs: 60_000 }))!;
    await until('the job active in the first worker', () => activeAndStarted(id));
    first.kill('SIGKILL');
    expect(await exitCode(first)).toBe('SIGKILL');
    expect(await job(id)).toEqual({ state: 'active', retry_count: 0 });

    await startTestWorker();
    await until('the job completed', async () => ((await job(id)).state === 'completed' ? true : undefined));
    // A while longer: nothing runs it again.
    await sleep(1500);
    expect(await log(id)).toEqual(['0 started', '1 started', '1 completed']);
    expect(await job(id)).toEqual({ state: 'completed', retry_count: 1 });
  });

  it('SIGTERM with a job in flight: the job finishes and the worker exits 0; past SHUTDOWN_TIMEOUT_SECONDS the job goes back to the queue, exit 1', async () => {
    const patient = await startTestWorker();
    const quick = (await queue.send('test.block', { firstMs: 1500 }))!;
    await until('the quick job active', () => activeAndStarted(quick));
    patient.kill('SIGTERM');
    expect(await exitCode(patient)).toBe(0);
    expect(await log(quick)).toEqual(['0 started', '0 completed']);
    expect((await job(quick)).state).toBe('completed');

    const hurried = await startTestWorker({ SHUTDOWN_TIMEOUT_SECONDS: '1' });
    const slow = (await queue.send('test.block', { firstMs: 30_000 }))!;
    await until('the slow job active', () => activeAndStarted(slow));
    hurried.kill('SIGTERM');
    expect(await exitCode(hurried)).toBe(1);
    expect(hurried.output()).toContain('jobs still running after SHUTDOWN_TIMEOUT_SECONDS went back to the queue');
    expect(await log(slow)).toEqual(['0 started']);
    // Handed back, not lost: another worker takes it (retry) without waiting for its expiry.
    expect(await job(slow)).toMatchObject({ state: 'retry' });
  });
});
