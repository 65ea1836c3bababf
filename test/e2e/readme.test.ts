import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV_VARS } from '../../api/config.js';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, spawnTollgate, stop, waitForHttp } from '../support/processes.js';

const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');

describe('README', () => {
  it('lists every environment variable in its configuration table', () => {
    const table = readme.slice(readme.indexOf('## Configuration'));
    for (const name of ENV_VARS) expect(table, name).toContain(`\`${name}\``);
  });

  describe('curl walkthrough, verbatim, against `tollgate api` on the embedded database', () => {
    let dir: string;
    let api: ReturnType<typeof spawnTollgate>;
    let port: number;
    beforeAll(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'tollgate-readme-'));
      port = await freePort();
      api = spawnTollgate(['api'], { PORT: String(port), DATA_DIR: path.join(dir, 'data'), SEED_DEMO: 'true' });
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, api);
    });
    afterAll(async () => {
      await stop(api);
      rmSync(dir, { recursive: true, force: true });
    });

    it('signs in, onboards, reads /auth/me, creates a user and runs a mock discovery', async () => {
      const block = /<!-- walkthrough:start -->\s*```bash\n([\s\S]*?)```\s*<!-- walkthrough:end -->/.exec(readme)?.[1];
      expect(block).toBeDefined();
      // Only the port differs from what a reader runs.
      const script = `set -euo pipefail\n${block!.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)}`;
      const { stdout } = await promisify(execFile)('bash', ['-c', script], { cwd: dir, timeout: 30_000 });
      const lines = stdout.split('\n').filter(Boolean);
      expect(lines).toHaveLength(6);
      const [login, onboard, me, user, run, findings] = lines.map((l) => JSON.parse(l));
      expect(login).toMatchObject({ status: 'onboarding', user: { email: 'ada@example.com' } });
      expect(onboard).toMatchObject({ tenant: { slug: 'acme-payments', name: 'Acme Payments' }, roles: ['org_admin'] });
      expect(me).toMatchObject({ user: { email: 'ada@example.com' }, tenant: { slug: 'acme-payments' }, roles: ['org_admin'] });
      expect(me.permissions).toContain('user:manage');
      expect(user).toMatchObject({ email: 'grace@example.com', roles: ['approver'], status: 'active' });
      // Discovery on the embedded database, the job run by the API's in-process worker.
      expect(run).toMatchObject({ status: 'running', counters: { tools_added: 0 } });
      expect(findings.items.length).toBeGreaterThanOrEqual(2);
      expect(findings.items.every((f: { category: string; run_id: string }) => f.category === 'tool_poisoning' && f.run_id === run.id)).toBe(true);
      expect(findings.items.map((f: { title: string }) => f.title).join('\n')).toMatch(/notes\.summarise_note/);
    });
  });
});
