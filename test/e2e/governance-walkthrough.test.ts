import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, spawnTollgate, stop, waitForHttp } from '../support/processes.js';

const run = promisify(execFile);
const guide = readFileSync(path.join(ROOT, 'docs', 'governance.md'), 'utf8');

/**
 * docs/governance.md's auditor walkthrough, verbatim, against `tollgate api` on the embedded database with the demo
 * organisation (as `make run` starts it): a readiness PDF and an evidence bundle built by the in-process worker,
 * the bundle verified offline by `tollgate evidence verify` and by the standard-tools script, and a changed byte
 * caught by both.
 */
describe('docs/governance.md: from a fresh install to a verified evidence bundle', () => {
  let dir: string;
  let api: ReturnType<typeof spawnTollgate>;
  let port: number;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-governance-'));
    port = await freePort();
    api = spawnTollgate(['api'], { PORT: String(port), DATA_DIR: path.join(dir, 'data'), SEED_DEMO: 'true', JOB_POLL_INTERVAL_SECONDS: '0.5' });
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, api);
  }, 90_000);
  afterAll(async () => {
    await stop(api);
    rmSync(dir, { recursive: true, force: true });
  });

  it('produces a readiness PDF and an evidence bundle, verifies the bundle offline twice and catches tampering', async () => {
    const block = /<!-- walkthrough:start -->\s*```bash\n([\s\S]*?)```\s*<!-- walkthrough:end -->/.exec(guide)?.[1];
    expect(block).toBeDefined();
    // What a reader runs from the repository, run from a scratch directory: only the port and the paths differ.
    const script = `set -euo pipefail\n${block!
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('node dist/cli.js', `node ${path.join(ROOT, 'dist', 'cli.js')}`)
      .replaceAll('bash scripts/', `bash ${path.join(ROOT, 'scripts')}/`)}`;
    const { stdout } = await run('bash', ['-c', script], { cwd: dir, timeout: 150_000 });
    const lines = stdout.split('\n').filter(Boolean);
    expect(lines[0]).toBe('{"decision":"allow"}');
    expect(lines[1]).toBe('readiness.pdf: %PDF-');
    expect(lines[2]).toMatch(/^evidence\.tar\.gz: VERIFY\.md bodies\.jsonl (keys\/[\w-]+\.pem )+manifest\.json manifest\.sig records\.jsonl $/);
    expect(lines[3]).toMatch(/^OK: \d+ records, seq 1\.\.\d+$/);
    expect(lines[4]).toBe(lines[3]);
    const broken = lines.slice(5);
    expect(broken.filter((l) => /^BROKEN: record \d+ \(id [0-9a-f-]{36}\): /.test(l))).toHaveLength(2);
    expect(broken).toContain('tollgate evidence verify: exit 1');
    expect(broken).toContain('verify-evidence-bundle.sh: exit 1');

    // The PDF reads as the readiness of the three frameworks.
    const text = (await run('pdftotext', ['-layout', path.join(dir, 'readiness.pdf'), '-'])).stdout;
    expect(text).toContain('Demo');
    for (const framework of ['EU AI Act', 'NIST AI Risk Management Framework', 'ISO/IEC 42001']) expect(text).toContain(framework);
    expect(text).toMatch(/Page 1 of \d+/);
  }, 180_000);
});
