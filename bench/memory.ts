import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../test/support/postgres-cluster.js';
import { atMost, record } from './results.js';
import { benchDatabase, rssOf } from './support.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';

/**
 * One `tollgate api` as shipped (dist/cli.js): the time from spawning it to its first /healthz; its resident
 * memory 5 s after /readyz answers ("started"); and idle, once V8's memory reducer has run. After start-up
 * the young generation stays at its largest (32 MB on a machine of this size) and old-space pages freed by
 * start-up stay committed, until the reducer's major GC gives them back; the reducer waits for the process
 * to go quiet and runs within about 100 s of the last major GC (its watchdog), so the benchmark watches for
 * that GC (`--trace-gc` prints "Mark-Compact (reduce)") for up to `maxSettleSeconds`.
 */
async function idleApi(env: Record<string, string>, maxSettleSeconds: number) {
  const port = await freePort();
  const started = Date.now();
  const api = spawnBuiltTollgate(['api'], { PORT: String(port), LOG_LEVEL: 'warn', ...env }, ['--trace-gc']);
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 120_000, api);
    const startMs = Date.now() - started;
    await waitForHttp(`${base}/readyz`, 120_000, api);
    const ready = Date.now();
    await new Promise((r) => setTimeout(r, 5000));
    const afterStart = rssOf(api.pid!).rss;
    while (!api.output().includes('(reduce)') && Date.now() - ready < maxSettleSeconds * 1000) await new Promise((r) => setTimeout(r, 1000));
    const reduced = api.output().includes('(reduce)');
    // The reducer runs its GCs back to back; let them finish.
    if (reduced) await new Promise((r) => setTimeout(r, 3000));
    return { startMs, afterStart, reduced, idleAfterS: Math.round((Date.now() - ready) / 1000), ...rssOf(api.pid!) };
  } finally {
    await stop(api);
  }
}

/**
 * bench/memory: `tollgate api`'s resident memory idle (RSS and its peak so far) and its start-up time to
 * /healthz, on a durable PostgreSQL and on the embedded database (PGlite) as `make run` uses it: a new
 * data folder (initdb and every migration run on start), the same with the demo organisation seeded
 * (SEED_DEMO=true, what `make run` sets), and that folder started again. The embedded figures are the
 * largest of the three.
 */
export async function benchMemory(opts: { maxSettleSeconds: number }) {
  type Run = Awaited<ReturnType<typeof idleApi>>;
  const rows: Array<Record<string, string | number>> = [];
  const row = (database: string, r: Run) =>
    rows.push({
      database,
      start_to_healthz_ms: r.startMs,
      rss_5s_after_ready_mb: r.afterStart,
      rss_idle_mb: r.rss,
      idle_after: r.reduced ? `${r.idleAfterS} s (reducer ran)` : `${r.idleAfterS} s (reducer did not run)`,
      rss_peak_mb: r.peak,
    });

  const { cluster, runtimeUrl } = await benchDatabase();
  try {
    const pg = await idleApi({ DATABASE_URL: runtimeUrl }, opts.maxSettleSeconds);
    row('PostgreSQL', pg);
    record('memory', 'api RSS idle, PostgreSQL', pg.rss, 'MB', atMost(120));
    record('memory', 'api RSS 5 s after ready, PostgreSQL', pg.afterStart, 'MB');
    record('memory', 'api RSS peak, PostgreSQL', pg.peak, 'MB');
    record('memory', 'api start to /healthz, PostgreSQL', pg.startMs, 'ms');
  } finally {
    cluster.stop();
  }

  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-memory-'));
  try {
    const fresh = await idleApi({ DATA_DIR: path.join(dir, 'plain') }, opts.maxSettleSeconds);
    row('embedded, new data folder', fresh);
    const demo = await idleApi({ DATA_DIR: path.join(dir, 'demo'), SEED_DEMO: 'true' }, opts.maxSettleSeconds);
    row('embedded, new data folder, SEED_DEMO=true (make run)', demo);
    const again = await idleApi({ DATA_DIR: path.join(dir, 'demo'), SEED_DEMO: 'true' }, opts.maxSettleSeconds);
    row('embedded, the same folder started again', again);
    const runs = [fresh, demo, again];
    record('memory', 'api RSS idle, embedded database', Math.max(...runs.map((r) => r.rss)), 'MB', atMost(400));
    record('memory', 'api RSS 5 s after ready, embedded database', Math.max(...runs.map((r) => r.afterStart)), 'MB');
    record('memory', 'api RSS peak, embedded database', Math.max(...runs.map((r) => r.peak)), 'MB');
    record('memory', 'api start to /healthz, embedded database, new data folder', demo.startMs, 'ms');
    record('memory', 'api start to /healthz, embedded database, started again', again.startMs, 'ms');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
