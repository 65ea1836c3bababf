import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { freshDatabase } from '../support/harness.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

type Proc = ReturnType<typeof spawnTollgate>;
const running: Proc[] = [];
const dirs: string[] = [];

function run(args: string[], env: Record<string, string>): Proc {
  const p = spawnTollgate(args, env);
  running.push(p);
  return p;
}
const exited = (p: Proc) =>
  new Promise<number>((resolve) => (p.exitCode !== null ? resolve(p.exitCode) : p.once('exit', (c) => resolve(c ?? -1))));
const tempDir = () => {
  const d = mkdtempSync(path.join(tmpdir(), 'tollgate-cli-'));
  dirs.push(d);
  return d;
};

afterEach(async () => {
  await Promise.all(running.splice(0).map(stop));
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const UNSAFE_PRODUCTION = {
  ENVIRONMENT: 'production',
  DATABASE_URL: 'postgres://tollgate_app@127.0.0.1:1/tollgate',
  DEV_LOGIN_ENABLED: 'true',
};

describe('tollgate', () => {
  it('help lists the commands; an unknown command exits 2', async () => {
    const help = run(['help'], {});
    expect(await exited(help)).toBe(0);
    expect(help.output()).toMatch(/api\s+start the central API/);
    expect(help.output()).toMatch(/migrate\s+apply database migrations/);
    const unknown = run(['frobnicate'], {});
    expect(await exited(unknown)).toBe(2);
    expect(unknown.output()).toContain('unknown command "frobnicate"');
  });

  it.each([['api'], ['migrate']])('%s refuses to start in production with an unsafe setting, naming it', async (cmd) => {
    const port = await freePort();
    const p = run([cmd], { ...UNSAFE_PRODUCTION, PORT: String(port) });
    expect(await exited(p)).toBe(78);
    expect(p.output()).toContain(`tollgate ${cmd}: refusing to start`);
    expect(p.output()).toContain('DEV_LOGIN_ENABLED');
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it('migrate applies nothing to an up-to-date database, and needs a database URL', async () => {
    const db = await freshDatabase();
    try {
      const p = run(['migrate'], { MIGRATION_DATABASE_URL: db.ownerUrl });
      expect(await exited(p)).toBe(0);
      expect(p.output()).toContain('database is up to date');
    } finally {
      await db.drop();
    }
    const none = run(['migrate'], {});
    expect(await exited(none)).toBe(78);
    expect(none.output()).toContain('MIGRATION_DATABASE_URL');
  });

  it('api refuses to serve as the schema owner', async () => {
    const db = await freshDatabase();
    try {
      const p = run(['api'], { DATABASE_URL: db.ownerUrl, PORT: String(await freePort()) });
      expect(await exited(p)).toBe(1);
      expect(p.output()).toContain('runtime role that owns nothing');
    } finally {
      await db.drop();
    }
  });

  it('api serves on PostgreSQL as the runtime role', async () => {
    const db = await freshDatabase();
    try {
      const port = await freePort();
      const p = run(['api'], { DATABASE_URL: db.runtimeUrl, PORT: String(port) });
      await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, p);
      await stop(p);
    } finally {
      await db.drop();
    }
  });

  it('api on the embedded database starts with the demo organisation and keeps its data across restarts', async () => {
    const env = { DATA_DIR: path.join(tempDir(), 'data'), SEED_DEMO: 'true', PORT: String(await freePort()) };
    const base = `http://127.0.0.1:${env.PORT}/api/v1`;
    const login = (email: string) =>
      fetch(`${base}/auth/dev-login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email }),
      }).then((r) => r.json() as Promise<{ status: string; tenant: { slug: string } | null }>);

    let p = run(['api'], env);
    const startMs = await waitForHttp(`http://127.0.0.1:${env.PORT}/healthz`, 60_000, p);
    expect(startMs).toBeLessThan(60_000);
    expect(await login('admin@demo.example')).toMatchObject({ status: 'signed_in', tenant: { slug: 'demo' } });
    expect((await login('someone.new@example.com')).status).toBe('onboarding');
    await stop(p);

    p = run(['api'], env);
    await waitForHttp(`http://127.0.0.1:${env.PORT}/healthz`, 60_000, p);
    // Seeding again is harmless, and the organisation is still there.
    expect(await login('admin@demo.example')).toMatchObject({ status: 'signed_in', tenant: { slug: 'demo' } });
    expect(p.output()).toContain('tollgate api ready');
  });
});
