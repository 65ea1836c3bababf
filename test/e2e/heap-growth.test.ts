import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

/**
 * HEAP_GROWTH_PERCENT (docs/decisions.md D39): `tollgate api` tells V8 how far its heap may grow past what a
 * full collection kept. V8's own account of each full collection (`--trace-gc-verbose`) names the factor it
 * set the next limit with: "[HeapController] Limit: old size: … KB, new limit: … KB (2.0)".
 */

const running: Array<ReturnType<typeof spawnTollgate>> = [];
const dirs: string[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => stop(p)));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The growth factors V8 set heap limits with while `tollgate api` started on a new embedded database. */
async function factorsOfAStart(env: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-heap-'));
  dirs.push(dir);
  const port = await freePort();
  const api = spawnTollgate(['api'], { PORT: String(port), DATA_DIR: path.join(dir, 'data'), LOG_LEVEL: 'warn', ...env }, ['--trace-gc-verbose']);
  running.push(api);
  // The embedded database's start (PGlite's WebAssembly postgres, the migrations, the demo's seed) takes
  // several full collections.
  await waitForHttp(`http://127.0.0.1:${port}/readyz`, 120_000, api);
  const factors = [...api.output().matchAll(/\[HeapController\] Limit: old size: \d+ KB, new limit: \d+ KB \(([\d.]+)\)/g)].map((m) => m[1]!);
  expect(factors.length, api.output().slice(-2000)).toBeGreaterThan(0);
  return factors;
}

describe('HEAP_GROWTH_PERCENT', () => {
  it('lets the heap grow to twice what a full collection kept by default, and to what it says when set', async () => {
    const [byDefault, atFifty] = await Promise.all([factorsOfAStart({ SEED_DEMO: 'true' }), factorsOfAStart({ SEED_DEMO: 'true', HEAP_GROWTH_PERCENT: '50' })]);
    // The first limits may be set before the command reads its configuration (while its modules load).
    expect(byDefault.at(-1)).toBe('2.0');
    expect(atFifty.at(-1)).toBe('1.5');
  }, 150_000);

  it('leaves the growth to V8 at 0', async () => {
    const factors = await factorsOfAStart({ SEED_DEMO: 'true', HEAP_GROWTH_PERCENT: '0' });
    // V8's own factor depends on how fast it collects against how fast the process allocates (1.1-4.0);
    // the fixed ones above would each be a coincidence.
    expect(factors.every((f) => f === '2.0')).toBe(false);
  }, 150_000);
});
