import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { inScope, openDatabase, type Db } from '../../api/db/database.js';
import type { JobContext, JobHandler } from '../../api/platform/jobs.js';
import { startTestApp } from '../support/harness.js';
import { RUNTIME_ROLE } from '../support/pg-urls.js';

/**
 * The job queue (api/platform/jobs.ts, pg-boss) as the API and the worker use it, on real PostgreSQL as the
 * runtime role and on the embedded database: enqueueing inside the caller's transaction, delivery, retries
 * and the dead-letter handler, stopping with a job in flight, and what the runtime role may do. The queue is
 * the product's `discovery.run` (created by migration 0009) with a handler of the test's only: the queue is
 * started as the in-process worker starts it, without api/jobs.ts's handlers (test/api/integrations.test.ts
 * runs discovery's own).
 */

/** Fast polling and maintenance, so a test waits a second, not a minute. */
const FAST = { JOB_POLL_INTERVAL_SECONDS: '0.5', JOB_MAINTENANCE_INTERVAL_SECONDS: '1', LOG_LEVEL: 'info' };
const QUEUE = 'discovery.run';

/** What a job asks the test handler to do. */
type Plan = { test: string; kind: 'record' } | { test: string; kind: 'fail' } | { test: string; kind: 'block' };

interface Seen {
  test: string;
  jobId: string;
  retryCount: number;
  event: 'ran' | 'dead';
  error?: string;
}

interface Backend {
  app: FastifyInstance;
  db: Db;
  logs: string[];
  ownerUrl?: string;
  close(): Promise<void>;
}

const backends: Array<[string, () => Promise<Backend>]> = [
  [
    'PostgreSQL, as the runtime role',
    async () => {
      const t = await startTestApp({ env: FAST });
      await t.app.deps.jobs.start();
      return { app: t.app, db: t.database.db, logs: t.logs, ownerUrl: t.ownerUrl, close: () => t.close() };
    },
  ],
  [
    'the embedded database',
    async () => {
      const config = loadConfig({ ...FAST, DATA_DIR: 'memory://' });
      const database = await openDatabase(config);
      const logs: string[] = [];
      const logStream = new PassThrough();
      logStream.on('data', (chunk: Buffer) => logs.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
      const app = await buildApp({ config, db: database.db, logStream });
      await app.ready();
      await app.deps.jobs.start();
      return {
        app,
        db: database.db,
        logs,
        async close() {
          await app.close();
          await database.close();
        },
      };
    },
  ],
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

async function jobRow(db: Db, id: string): Promise<{ state: string; retry_count: number } | undefined> {
  const { rows } = await sql<{ state: string; retry_count: number }>`
    select state, retry_count from pgboss.job where name = ${QUEUE} and id = ${id}`.execute(db);
  return rows[0];
}

describe.each(backends)('the job queue on %s', (_name, open) => {
  let b: Backend;
  const seen: Seen[] = [];
  /** Jobs of kind `block` wait here until the test lets them go (or their signal aborts). */
  const blocked = new Map<string, { release: () => void; signal: AbortSignal }>();
  const of = (test: string) => seen.filter((s) => s.test === test);

  const handler: JobHandler = {
    queue: QUEUE,
    async handler(data, ctx: JobContext) {
      const plan = data as Plan;
      seen.push({ test: plan.test, jobId: ctx.jobId, retryCount: ctx.retryCount, event: 'ran' });
      if (plan.kind === 'fail') throw new Error(`attempt ${ctx.retryCount} failed`);
      if (plan.kind === 'block') {
        await new Promise<void>((resolve, reject) => {
          blocked.set(plan.test, { release: resolve, signal: ctx.signal });
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
        });
      }
    },
    async deadLetter(data, ctx) {
      seen.push({ test: (data as Plan).test, jobId: ctx.jobId, retryCount: ctx.retryCount, event: 'dead', error: ctx.error });
    },
  };

  beforeAll(async () => {
    b = await open();
    // The queue runs as the in-process worker runs it; the test's handler is the queue's only one.
    expect(b.app.deps.jobs.started).toBe(true);
    await b.app.deps.jobs.serve([handler], b.app.deps);
  });
  afterAll(async () => {
    for (const { release } of blocked.values()) release();
    await b?.close();
  });

  it('a job sent in a transaction that rolls back is never delivered; one that commits is delivered once, and not before the commit', async () => {
    const { jobs } = b.app.deps;
    await expect(
      inScope(b.db, {}, async (tx) => {
        await jobs.send(QUEUE, { test: 'rolled-back', kind: 'record' }, { tx });
        throw new Error('the caller changes its mind');
      }),
    ).rejects.toThrow('the caller changes its mind');

    let id: string | null = null;
    await inScope(b.db, {}, async (tx) => {
      id = await jobs.send(QUEUE, { test: 'committed', kind: 'record' }, { tx });
      // Three polls go by with the transaction open: nothing to deliver yet.
      await sleep(1600);
      expect(of('committed')).toEqual([]);
    });
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await until('the committed job ran', () => (of('committed').length ? true : undefined));
    await until('its completion recorded', async () => ((await jobRow(b.db, id!))?.state === 'completed' ? true : undefined));
    // Three more polls: still exactly once.
    await sleep(1600);
    expect(of('committed')).toEqual([{ test: 'committed', jobId: id, retryCount: 0, event: 'ran' }]);
    expect(of('rolled-back')).toEqual([]);
    const { rows } = await sql<{ n: number }>`
      select count(*)::int as n from pgboss.job where data->>'test' = 'rolled-back'`.execute(b.db);
    expect(rows[0]!.n).toBe(0);
  });

  it('a handler that throws is retried up to the queue limit (2), then the dead-letter handler runs once with the last error', async () => {
    const id = await b.app.deps.jobs.send(QUEUE, { test: 'failing', kind: 'fail' }, { retryDelay: 0 });
    await until('the dead-letter handler ran', () => (of('failing').some((s) => s.event === 'dead') ? true : undefined));
    await sleep(1000);
    const runs = of('failing').filter((s) => s.event === 'ran');
    expect(runs.map((s) => [s.jobId, s.retryCount])).toEqual([[id, 0], [id, 1], [id, 2]]);
    const dead = of('failing').filter((s) => s.event === 'dead');
    expect(dead).toHaveLength(1);
    expect(dead[0]!.error).toBe('attempt 2 failed');
    // The dead-letter job is a job of its own, on discovery.run.dead.
    expect(dead[0]!.jobId).not.toBe(id);
    expect((await jobRow(b.db, id!))?.state).toBe('failed');
  });

  it('stopping waits for the job in flight up to its bound, then hands it back to the queue and aborts its signal', async () => {
    const id = await b.app.deps.jobs.send(QUEUE, { test: 'blocking', kind: 'block' });
    const job = await until('the blocking job started', () => blocked.get('blocking'));
    expect((await jobRow(b.db, id!))?.state).toBe('active');
    const started = Date.now();
    const { unfinished } = await b.app.deps.jobs.stop({ graceful: true, timeoutMs: 1000 });
    expect(unfinished).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(job.signal.aborted).toBe(true);
    expect(b.app.deps.jobs.started).toBe(false);
    // Back in the queue for another worker, its attempt counted.
    expect(await jobRow(b.db, id!)).toEqual({ state: 'retry', retry_count: 0 });
    await until('the attempt logged as failed', () => (b.logs.some((l) => l.includes(`"job_id":"${id}"`) && l.includes('job failed')) ? true : undefined));
  });

  it('the runtime role uses the queue and cannot create queues or change the schema', async () => {
    const { rows } = await sql<{ role: string; create: boolean; create_queue: boolean; update_jobs: boolean }>`
      select current_user as role,
        has_schema_privilege(current_user, 'pgboss', 'CREATE') as create,
        has_function_privilege(current_user, 'pgboss.create_queue(text, json)', 'EXECUTE') as create_queue,
        has_table_privilege(current_user, 'pgboss.job', 'UPDATE') as update_jobs`.execute(b.db);
    expect(rows[0]).toEqual({ role: RUNTIME_ROLE, create: false, create_queue: false, update_jobs: true });
    await expect(sql`select pgboss.create_queue('test.mine', '{}'::json)`.execute(b.db)).rejects.toThrow(/permission denied/);
    await expect(sql`create table pgboss.mine (id int)`.execute(b.db)).rejects.toThrow(/permission denied/);
    await expect(b.app.deps.jobs.send('no.such.queue', {})).rejects.toThrow('no job queue "no.such.queue"');
  });
});

describe('the job queue when the database refuses a completion (PostgreSQL)', () => {
  it('the process carries on, the job stays active, and runs again after its expiry: at least once', async () => {
    const t = await startTestApp({ env: FAST });
    await t.app.deps.jobs.start();
    const owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
    try {
      const runs: number[] = [];
      let release = () => undefined as void;
      await t.app.deps.jobs.serve(
        [
          {
            queue: QUEUE,
            async handler(_data, ctx) {
              runs.push(ctx.retryCount);
              if (ctx.retryCount === 0) await new Promise<void>((r) => (release = r));
            },
          },
        ],
        t.app.deps,
      );
      const id = await t.app.deps.jobs.send(QUEUE, { test: 'refused' }, { expireInSeconds: 3, retryDelay: 0 });
      await until('the job started', () => (runs.length ? true : undefined));
      await owner.query(`revoke update on pgboss.job from ${RUNTIME_ROLE}`);
      release();
      await until('the refusal logged', () => (t.logs.some((l) => l.includes('job queue: statement failed')) ? true : undefined));
      expect((await jobRow(t.database.db, id!))?.state).toBe('active');
      await owner.query(`grant update on pgboss.job to ${RUNTIME_ROLE}`);
      // Maintenance finds it expired, it is retried and this time completes.
      await until('the job completed', async () => ((await jobRow(t.database.db, id!))?.state === 'completed' ? true : undefined), 15_000);
      expect(runs).toEqual([0, 1]);
    } finally {
      await owner.query(`grant update on pgboss.job to ${RUNTIME_ROLE}`).catch(() => undefined);
      await owner.end();
      await t.close();
    }
  });
});
