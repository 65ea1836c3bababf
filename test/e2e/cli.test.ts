import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { DEV_EVIDENCE_SIGNING_SEED, DEV_TOKEN_SIGNING_SEED } from '../../api/config.js';
import { freshDatabase } from '../support/harness.js';
import { OWNER_ROLE, RUNTIME_ROLE, withDatabase } from '../support/pg-urls.js';
import { freePort } from '../support/postgres-cluster.js';
import { HttpClient } from '../support/http-client.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { SAFE_PRODUCTION_ENV } from '../support/production-env.js';

/** `tollgate <args>` from source, with stdout and stderr kept apart. */
type Proc = ReturnType<typeof spawnTollgate> & { stdout_: () => string; stderr_: () => string };

const running: Proc[] = [];
const dirs: string[] = [];
const drops: Array<() => Promise<void>> = [];

function run(args: string[], env: Record<string, string>): Proc {
  const child = spawnTollgate(args, env);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const p = Object.assign(child, { stdout_: () => out, stderr_: () => err });
  running.push(p);
  return p;
}

/** The exit code, or a failure when the process is still running after timeoutMs. */
function exitCode(p: Proc, timeoutMs = 20_000): Promise<number> {
  return new Promise((resolve, reject) => {
    if (p.exitCode !== null) return resolve(p.exitCode);
    const timer = setTimeout(
      () => reject(new Error(`still running after ${timeoutMs} ms: ${p.output()}`)),
      timeoutMs,
    );
    p.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 : -1));
    });
  });
}

function tempDir(): string {
  const d = mkdtempSync(path.join(tmpdir(), 'tollgate-cli-'));
  dirs.push(d);
  return d;
}

async function isListening(port: number): Promise<boolean> {
  try {
    await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) });
    return true;
  } catch {
    return false;
  }
}

/** An empty database owned by the schema owner (nothing migrated). */
async function emptyDatabase(): Promise<{ ownerUrl: string; runtimeUrl: string; tables(): Promise<string[]> }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `cli_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} owner ${OWNER_ROLE}`);
  } finally {
    await admin.end();
  }
  drops.push(async () => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    try {
      await c.query(`drop database if exists ${name} with (force)`);
    } finally {
      await c.end();
    }
  });
  const ownerUrl = withDatabase(adminUrl, name, OWNER_ROLE);
  return {
    ownerUrl,
    runtimeUrl: withDatabase(adminUrl, name, RUNTIME_ROLE),
    async tables() {
      const c = new pg.Client({ connectionString: ownerUrl });
      await c.connect();
      try {
        const { rows } = await c.query<{ tablename: string }>(
          "select tablename from pg_tables where schemaname = 'public' order by tablename",
        );
        return rows.map((r) => r.tablename);
      } finally {
        await c.end();
      }
    },
  };
}


/** Every condition safe except what a test changes; DATABASE_URL is set per test. */
const SAFE_PRODUCTION: Record<string, string> = { ...SAFE_PRODUCTION_ENV, LOG_LEVEL: 'warn' };

let db: Awaited<ReturnType<typeof freshDatabase>>;

beforeAll(async () => {
  db = await freshDatabase();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map(stop));
});
afterAll(async () => {
  await Promise.all(running.splice(0).map(stop));
  for (const drop of drops.splice(0)) await drop();
  await db?.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('tollgate help', () => {
  it('exits 0 listing the api and migrate commands', async () => {
    const p = run(['help'], {});
    expect(await exitCode(p)).toBe(0);
    expect(p.stdout_()).toMatch(/^\s+api\s+\S/m);
    expect(p.stdout_()).toMatch(/^\s+migrate\s+\S/m);
    expect(p.stdout_()).toMatch(/^\s+controller\s*$/m);
    expect(p.stdout_()).toMatch(/^\s+sidecar\s+\S/m);
  });

  it.each<[string, Record<string, string>, string]>([
    ['no API URL', { TOLLGATE_IDENTITY_DIR: '/nonexistent' }, 'TOLLGATE_API_URL'],
    ['no identity files', { TOLLGATE_API_URL: 'http://127.0.0.1:1', TOLLGATE_IDENTITY_DIR: '/nonexistent' }, 'TOLLGATE_IDENTITY_DIR has no client-id'],
    ['malformed MCP upstreams', { TOLLGATE_API_URL: 'http://127.0.0.1:1', TOLLGATE_MCP_UPSTREAMS: 'payments' }, 'TOLLGATE_MCP_UPSTREAMS'],
  ])('sidecar refuses with %s: exits 78 naming the setting', async (_n, env, text) => {
    if (!env.TOLLGATE_IDENTITY_DIR) {
      const identity = mkdtempSync(path.join(tmpdir(), 'tollgate-identity-'));
      dirs.push(identity);
      writeFileSync(path.join(identity, 'client-id'), 'tgc_x');
      writeFileSync(path.join(identity, 'client-secret'), 'do-not-echo-me');
      env = { ...env, TOLLGATE_IDENTITY_DIR: identity };
    }
    const p = run(['sidecar'], env);
    expect(await exitCode(p)).toBe(78);
    expect(p.stderr_()).toContain('tollgate sidecar: refusing to start');
    expect(p.stderr_()).toContain(text);
    expect(p.output()).not.toContain('do-not-echo-me');
  });

  it.each<[string, Record<string, string>, string]>([
    ['no API URL', { TOLLGATE_CLIENT_ID: 'tgsa_x', TOLLGATE_CLIENT_SECRET: 'do-not-echo-me' }, 'TOLLGATE_API_URL'],
    ['no credential', { TOLLGATE_API_URL: 'http://127.0.0.1:1' }, 'TOLLGATE_CREDENTIALS_DIR'],
    ['a bad worker count', { TOLLGATE_API_URL: 'http://127.0.0.1:1', TOLLGATE_CLIENT_ID: 'x', TOLLGATE_CLIENT_SECRET: 'do-not-echo-me', TOLLGATE_WORKERS: '500' }, 'TOLLGATE_WORKERS'],
  ])('controller refuses with %s: exits 78 naming the setting, echoing no secret', async (_n, env, variable) => {
    const p = run(['controller'], env);
    expect(await exitCode(p)).toBe(78);
    expect(p.stderr_()).toContain('tollgate controller: refusing to start');
    expect(p.stderr_()).toContain(variable);
    expect(p.output()).not.toContain('do-not-echo-me');
  });

  it('an unknown command exits 2 naming it', async () => {
    const p = run(['frobnicate'], {});
    expect(await exitCode(p)).toBe(2);
    expect(p.stderr_()).toContain('frobnicate');
  });
});

describe('production guard at start', () => {
  it('control: the safe production environment starts and serves, with development sign-in refused', async () => {
    const port = await freePort();
    const p = run(['api'], { ...SAFE_PRODUCTION, DATABASE_URL: db.runtimeUrl, PORT: String(port) });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, p);
    const login = await new HttpClient(`http://127.0.0.1:${port}/api/v1`).post('/auth/dev-login', {
      email: 'someone@example.com',
    });
    expect(login.status).toBe(404);
  }, 90_000);

  // Each row: one unsafe setting on top of the safe production environment, and the variable named.
  it.each<[string, Record<string, string>, string]>([
    ['development sign-in on', { DEV_LOGIN_ENABLED: 'true' }, 'DEV_LOGIN_ENABLED'],
    ['secure cookies off', { SESSION_COOKIE_SECURE: 'false' }, 'SESSION_COOKIE_SECURE'],
    ['CORS origin *', { CORS_ALLOWED_ORIGINS: '*' }, 'CORS_ALLOWED_ORIGINS'],
    ['in-memory email', { EMAIL_BACKEND: 'memory' }, 'EMAIL_BACKEND'],
    ['the development evidence seed', { EVIDENCE_SIGNING_SEED: DEV_EVIDENCE_SIGNING_SEED }, 'EVIDENCE_SIGNING_SEED'],
    ['no DATABASE_URL (the embedded database)', { DATABASE_URL: '' }, 'DATABASE_URL'],
  ])('api refuses with %s: exits 78 within seconds, names the setting, listens on nothing', async (_n, change, variable) => {
    const port = await freePort();
    const env = { ...SAFE_PRODUCTION, DATABASE_URL: db.runtimeUrl, DATA_DIR: path.join(tempDir(), 'data'), PORT: String(port), ...change };
    const started = Date.now();
    const p = run(['api'], env);
    expect(await exitCode(p, 20_000)).toBe(78);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(p.stderr_()).toContain('tollgate api: refusing to start');
    expect(p.stderr_()).toContain(variable);
    expect(await isListening(port)).toBe(false);
    // The embedded database was not opened either.
    expect(existsSync(env.DATA_DIR)).toBe(false);
  }, 30_000);

  it('api does not echo secret values in its refusal', async () => {
    const secret = 'short-auth-events-secret';
    const p = run(['api'], { ...SAFE_PRODUCTION, DATABASE_URL: db.runtimeUrl, AUTH_EVENTS_SECRET: secret, PORT: String(await freePort()) });
    expect(await exitCode(p)).toBe(78);
    expect(p.stderr_()).toContain('AUTH_EVENTS_SECRET');
    for (const value of [secret, SAFE_PRODUCTION.SMTP_PASSWORD!, SAFE_PRODUCTION.OIDC_CLIENT_SECRET!, 'tollgate-test']) {
      expect(p.output()).not.toContain(value);
    }
  });

  it.each<[string, Record<string, string>, string]>([
    ['development sign-in on', { DEV_LOGIN_ENABLED: 'true' }, 'DEV_LOGIN_ENABLED'],
    ['the development signing seed', { TOKEN_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED }, 'TOKEN_SIGNING_SEED'],
    ['the evidence seed equal to the token seed', { EVIDENCE_SIGNING_SEED: 'k9Vq2rT7xLm4Pz8sWc3Nd6Hb1Yf5Gj0A' }, 'EVIDENCE_SIGNING_SEED'],
    ['private endpoints allowed', { ALLOW_PRIVATE_ENDPOINTS: 'true' }, 'ALLOW_PRIVATE_ENDPOINTS'],
    ['SMTP without STARTTLS', { SMTP_STARTTLS: 'false' }, 'SMTP_STARTTLS'],
  ])('migrate refuses with %s: exits 78, names the setting, touches no database', async (_n, change, variable) => {
    const empty = await emptyDatabase();
    const env = { ...SAFE_PRODUCTION, DATABASE_URL: empty.runtimeUrl, MIGRATION_DATABASE_URL: empty.ownerUrl, ...change };
    const p = run(['migrate'], env);
    expect(await exitCode(p)).toBe(78);
    expect(p.stderr_()).toContain('tollgate migrate: refusing to start');
    expect(p.stderr_()).toContain(variable);
    expect(await empty.tables()).toEqual([]);
  }, 30_000);
});

describe('tollgate migrate', () => {
  it('reports an already migrated database as up to date and exits 0', async () => {
    const p = run(['migrate'], { MIGRATION_DATABASE_URL: db.ownerUrl });
    expect(await exitCode(p, 30_000)).toBe(0);
    expect(p.stdout_()).toContain('up to date');
    expect(p.stdout_()).not.toContain('applied');
  }, 40_000);

  it('migrates an empty database as the schema owner, then reports it up to date', async () => {
    const empty = await emptyDatabase();
    const first = run(['migrate'], { MIGRATION_DATABASE_URL: empty.ownerUrl });
    expect(await exitCode(first, 30_000)).toBe(0);
    expect(first.stdout_()).toMatch(/applied: .*0001_foundation/);
    expect(await empty.tables()).toEqual(expect.arrayContaining(['organisations', 'users', 'memberships', 'audit_events']));
    const again = run(['migrate'], { MIGRATION_DATABASE_URL: empty.ownerUrl });
    expect(await exitCode(again, 30_000)).toBe(0);
    expect(again.stdout_()).toContain('up to date');
  }, 60_000);

  it('works in production with every setting safe', async () => {
    const p = run(['migrate'], { ...SAFE_PRODUCTION, DATABASE_URL: db.runtimeUrl, MIGRATION_DATABASE_URL: db.ownerUrl });
    expect(await exitCode(p, 30_000)).toBe(0);
    expect(p.stdout_()).toContain('up to date');
  }, 40_000);

  it('without any database URL exits non-zero with a message naming the setting', async () => {
    const p = run(['migrate'], {});
    const code = await exitCode(p);
    expect(code).not.toBe(0);
    expect(p.stderr_()).toContain('MIGRATION_DATABASE_URL');
  });
});

describe('tollgate api', () => {
  it('refuses to start as the schema owner, with a message, listening on nothing', async () => {
    const port = await freePort();
    const p = run(['api'], { DATABASE_URL: db.ownerUrl, PORT: String(port) });
    const code = await exitCode(p, 30_000);
    expect(code).not.toBe(0);
    expect(p.stderr_()).toMatch(/runtime role that owns nothing/);
    expect(p.stderr_()).toContain('tollgate_owner');
    // The connection URL's password is not printed.
    expect(p.output()).not.toContain('tollgate-test');
    expect(await isListening(port)).toBe(false);
  }, 40_000);

  it('serves on PostgreSQL as the runtime role', async () => {
    const port = await freePort();
    const p = run(['api'], { DATABASE_URL: db.runtimeUrl, PORT: String(port) });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, p);
    expect(await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()).toEqual({ status: 'ready' });
  }, 90_000);

  it(
    'on the embedded database: serves within 60 s, signs in the demo administrator, keeps data across a restart',
    async () => {
      const dataDir = path.join(tempDir(), 'data');
      const port = await freePort();
      const env = { DATA_DIR: dataDir, SEED_DEMO: 'true', PORT: String(port) };
      const base = `http://127.0.0.1:${port}/api/v1`;

      let p = run(['api'], env);
      const startMs = await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, p);
      expect(startMs).toBeLessThan(60_000);
      expect(existsSync(path.join(dataDir, 'pgdata'))).toBe(true);

      const admin = new HttpClient(base);
      const login = await admin.post('/auth/dev-login', { email: 'admin@demo.example' });
      expect(login.status).toBe(200);
      expect(login.json).toMatchObject({ status: 'signed_in', user: { email: 'admin@demo.example' }, tenant: { slug: 'demo' } });
      const added = await admin.post('/users', { email: 'kept@example.com', display_name: 'Kept Person', roles: ['approver'] });
      expect(added.status).toBe(201);

      // A clean stop on SIGTERM.
      const exit = exitCode(p, 15_000);
      p.kill('SIGTERM');
      expect(await exit).toBe(0);
      expect(await isListening(port)).toBe(false);

      // Restart on the same DATA_DIR, as `make run` does again (seeding twice is harmless).
      p = run(['api'], env);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, p);
      expect(p.stderr_()).not.toContain('demo organisation not created');

      const again = new HttpClient(base);
      const relogin = await again.post('/auth/dev-login', { email: 'admin@demo.example' });
      expect(relogin.json).toMatchObject({ status: 'signed_in', tenant: { slug: 'demo', id: login.json.tenant.id } });
      const users = await again.get('/users');
      expect(users.status).toBe(200);
      const kept = users.json.items.find((u: { email: string }) => u.email === 'kept@example.com');
      expect(kept).toMatchObject({ id: added.json.id, roles: ['approver'], status: 'active' });
      expect(users.json.items.map((u: { email: string }) => u.email).sort()).toEqual(['admin@demo.example', 'kept@example.com']);

      // The person created before the restart is still a member: they sign straight into the demo organisation.
      const member = await new HttpClient(base).post('/auth/dev-login', { email: 'kept@example.com' });
      expect(member.json).toMatchObject({ status: 'signed_in', user: { id: added.json.id }, tenant: { slug: 'demo' } });
    },
    180_000,
  );
});

describe('tollgate org set-plan', () => {
  const PROD_AGENT = {
    name: 'Prod bot',
    environment: 'production',
    purpose: 'Pays approved invoices',
    data_classification: 'internal',
    owners: [{ name: 'Olga Owner', email: 'olga@example.com' }],
  };

  async function onboard(base: string): Promise<{ client: HttpClient; slug: string }> {
    const client = new HttpClient(base);
    expect((await client.post('/auth/dev-login', { email: `admin-${randomBytes(4).toString('hex')}@example.com` })).status).toBe(200);
    const slug = `plan-${randomBytes(4).toString('hex')}`;
    const res = await client.post('/tenants/onboard', { name: 'Plan Co', slug, primary_region: 'eu-west', admin_display_name: 'Ada' });
    expect(res.status).toBe(201);
    return { client, slug };
  }

  it(
    'on PostgreSQL: moves one organisation to another plan as the schema owner, audited; the new limits apply at once',
    async () => {
      const port = await freePort();
      const base = `http://127.0.0.1:${port}/api/v1`;
      const api = run(['api'], { DATABASE_URL: db.runtimeUrl, PORT: String(port) });
      await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, api);
      const { client, slug } = await onboard(base);
      expect((await client.get('/tenants/current')).json.plan).toBe('developer');
      const refused = await client.post('/agents', PROD_AGENT);
      expect(refused.status).toBe(403);
      expect(refused.json.error).toMatchObject({ code: 'module_not_in_plan', details: { module: 'production_agents' } });

      const operatorEnv = { DATABASE_URL: db.runtimeUrl, MIGRATION_DATABASE_URL: db.ownerUrl };
      const set = run(['org', 'set-plan', slug, 'team', '--reason', 'contract TG-42 signed'], operatorEnv);
      expect(await exitCode(set, 30_000)).toBe(0);
      expect(set.stdout_()).toBe(`${slug}: developer -> team (audited as tenant.plan_changed)\n`);

      expect((await client.get('/tenants/current')).json).toMatchObject({ plan: 'team', version: 2 });
      expect((await client.post('/agents', PROD_AGENT)).status).toBe(201);
      const audit = await client.get('/audit?action=tenant.plan_changed');
      expect(audit.json.items).toHaveLength(1);
      expect(audit.json.items[0]).toMatchObject({
        actor: { type: 'system', id: null },
        action: 'tenant.plan_changed',
        outcome: 'success',
        details: { from: 'developer', to: 'team', reason: 'contract TG-42 signed', operator: expect.stringContaining('@') },
      });

      // Again: nothing changes, nothing more is audited.
      const again = run(['org', 'set-plan', slug, 'team'], operatorEnv);
      expect(await exitCode(again, 30_000)).toBe(0);
      expect(again.stdout_()).toContain('already on the team plan');
      expect((await client.get('/audit?action=tenant.plan_changed')).json.items).toHaveLength(1);

      // Back to developer: the production agent stays, a new one is refused again.
      expect(await exitCode(run(['org', 'set-plan', slug, 'developer'], operatorEnv), 30_000)).toBe(0);
      expect((await client.post('/agents', { ...PROD_AGENT, name: 'Prod bot 2' })).json.error.code).toBe('module_not_in_plan');
      expect((await client.get('/agents?environment=production')).json.items).toHaveLength(1);

      const unknown = run(['org', 'set-plan', 'no-such-org', 'team'], operatorEnv);
      expect(await exitCode(unknown, 30_000)).toBe(1);
      expect(unknown.stderr_()).toContain('no organisation has the slug "no-such-org"');

      // The runtime role sees no organisation by slug: the command says which connection it needs.
      const runtimeOnly = run(['org', 'set-plan', slug, 'team'], { DATABASE_URL: db.runtimeUrl });
      expect(await exitCode(runtimeOnly, 30_000)).toBe(1);
      expect(runtimeOnly.stderr_()).toContain('set MIGRATION_DATABASE_URL to the schema owner');
      expect((await client.get('/tenants/current')).json.plan).toBe('developer');
    },
    120_000,
  );

  it('refuses bad usage with exit 2, naming the plans', async () => {
    const bad = run(['org', 'set-plan', 'demo', 'platinum'], {});
    expect(await exitCode(bad)).toBe(2);
    expect(bad.stderr_()).toContain('"platinum" is not a plan (developer, team, enterprise)');
    for (const args of [['org'], ['org', 'set-plan', 'demo'], ['org', 'rename', 'demo', 'team'], ['org', 'set-plan', 'demo', 'team', '--reason']]) {
      const p = run(args, {});
      expect(await exitCode(p)).toBe(2);
      expect(p.stderr_()).toContain('usage: tollgate org set-plan <slug>');
    }
  });

  it(
    'on the embedded database: the demo organisation starts on team; the command waits for the API to stop (the database lock)',
    async () => {
      const dataDir = path.join(tempDir(), 'data');
      const port = await freePort();
      const env = { DATA_DIR: dataDir, SEED_DEMO: 'true', PORT: String(port) };
      const api = run(['api'], env);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, api);
      const admin = new HttpClient(`http://127.0.0.1:${port}/api/v1`);
      expect((await admin.post('/auth/dev-login', { email: 'admin@demo.example' })).json.tenant).toMatchObject({ slug: 'demo', plan: 'team' });
      expect((await admin.post('/agents', PROD_AGENT)).status).toBe(201);

      // A second process on the same files would corrupt them: refused, naming the process.
      const busy = run(['org', 'set-plan', 'demo', 'developer'], { DATA_DIR: dataDir });
      expect(await exitCode(busy, 30_000)).toBe(1);
      expect(busy.stderr_()).toContain(`is in use by process ${api.pid}`);
      const second = run(['api'], { ...env, PORT: String(await freePort()) });
      expect(await exitCode(second, 30_000)).not.toBe(0);
      expect(second.stderr_()).toContain(`is in use by process ${api.pid}`);

      const exit = exitCode(api, 15_000);
      api.kill('SIGTERM');
      expect(await exit).toBe(0);
      const set = run(['org', 'set-plan', 'demo', 'developer'], { DATA_DIR: dataDir });
      expect(await exitCode(set, 60_000)).toBe(0);
      expect(set.stdout_()).toContain('demo: team -> developer');

      const again = run(['api'], env);
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000, again);
      const back = new HttpClient(`http://127.0.0.1:${port}/api/v1`);
      expect((await back.post('/auth/dev-login', { email: 'admin@demo.example' })).json.tenant.plan).toBe('developer');
      expect((await back.post('/agents', { ...PROD_AGENT, name: 'Prod bot 2' })).json.error.code).toBe('module_not_in_plan');
    },
    180_000,
  );

  it('DEFAULT_PLAN sets the plan of new organisations; a value that is not a plan stops the API', async () => {
    const port = await freePort();
    const api = run(['api'], { DATABASE_URL: db.runtimeUrl, PORT: String(port), DEFAULT_PLAN: 'enterprise' });
    await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, api);
    const { client } = await onboard(`http://127.0.0.1:${port}/api/v1`);
    expect((await client.get('/tenants/current')).json.plan).toBe('enterprise');

    const bad = run(['api'], { DATABASE_URL: db.runtimeUrl, PORT: String(await freePort()), DEFAULT_PLAN: 'gold' });
    expect(await exitCode(bad, 30_000)).toBe(78);
    expect(bad.stderr_()).toContain('DEFAULT_PLAN');
  }, 120_000);
});
