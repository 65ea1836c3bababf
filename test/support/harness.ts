import { randomBytes, randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { expect, inject } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig, type Config } from '../../api/config.js';
import { openDatabase, type Database } from '../../api/db/database.js';
import { startInProcessWorker } from '../../api/server.js';
import type { Clock } from '../../lib/clock.js';
import { OWNER_ROLE, RUNTIME_ROLE, TEMPLATE_DB, withDatabase } from './pg-urls.js';

/** A fresh database copied from the migrated template; URLs for the runtime role and the owner. */
export async function freshDatabase(): Promise<{ name: string; runtimeUrl: string; ownerUrl: string; drop(): Promise<void> }> {
  const adminUrl = inject('pgAdminUrl');
  const name = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name} template ${TEMPLATE_DB} owner ${OWNER_ROLE}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    runtimeUrl: withDatabase(adminUrl, name, RUNTIME_ROLE),
    ownerUrl: withDatabase(adminUrl, name, OWNER_ROLE),
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** A clock tests move by hand. */
export class TestClock implements Clock {
  constructor(private t = new Date('2026-11-23T09:00:00.000Z')) {}
  now(): Date {
    return new Date(this.t);
  }
  advance(seconds: number): void {
    this.t = new Date(this.t.getTime() + seconds * 1000);
  }
}

export interface TestApp {
  app: FastifyInstance;
  database: Database;
  config: Config;
  clock?: Clock;
  logs: string[];
  runtimeUrl: string;
  ownerUrl: string;
  close(): Promise<void>;
}

/**
 * The real app on real PostgreSQL, connected as the runtime role, on a fresh database.
 * `env` overrides configuration; `share` reuses another TestApp's database (several API processes).
 */
export async function startTestApp(
  opts: {
    env?: Record<string, string>;
    clock?: Clock;
    share?: TestApp;
    /** Extra routes a test needs, registered before the app is ready. */
    routes?: (app: FastifyInstance) => void;
    /** Run the jobs of api/jobs.ts in the app's process, as `make run` does (WORKER_IN_PROCESS); default off. */
    worker?: boolean;
  } = {},
): Promise<TestApp> {
  const fresh = opts.share ? undefined : await freshDatabase();
  const runtimeUrl = opts.share?.runtimeUrl ?? fresh!.runtimeUrl;
  const ownerUrl = opts.share?.ownerUrl ?? fresh!.ownerUrl;
  const config = loadConfig({ LOG_LEVEL: 'info', ...opts.env, DATABASE_URL: runtimeUrl, DATABASE_POOL_MAX: '4' });
  const database = await openDatabase(config);
  const logs: string[] = [];
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logs.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const app = await buildApp({ config, db: database.db, clock: opts.clock, logStream });
  opts.routes?.(app);
  await app.ready();
  if (opts.worker) await startInProcessWorker(app);
  return {
    app,
    database,
    config,
    clock: opts.clock,
    logs,
    runtimeUrl,
    ownerUrl,
    async close() {
      await app.close();
      await database.close();
      await fresh?.drop();
    },
  };
}

type Body = Record<string, unknown> | unknown[] | undefined;

/** A browser-like caller: keeps cookies and sends the CSRF header on unsafe methods. */
export class Client {
  readonly cookies = new Map<string, string>();
  constructor(private readonly app: FastifyInstance) {}

  get csrf(): string | undefined {
    return this.cookies.get('tollgate_csrf');
  }

  async request(
    method: InjectOptions['method'],
    url: string,
    body?: Body,
    headers: Record<string, string> = {},
  ): Promise<LightMyRequestResponse & { body: string; json<T = any>(): T }> {
    const h: Record<string, string> = { ...headers };
    if (this.cookies.size > 0) h.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (method !== 'GET' && this.csrf && !('x-csrf-token' in h)) h['x-csrf-token'] = this.csrf;
    const res = await this.app.inject({ method, url, headers: h, ...(body !== undefined ? { payload: body as object } : {}) });
    for (const c of res.cookies as Array<{ name: string; value: string; maxAge?: number; expires?: Date }>) {
      const expired = c.maxAge === 0 || (c.expires && c.expires.getTime() <= Date.now()) || c.value === '';
      if (expired) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
    return res as never;
  }

  get(url: string, headers?: Record<string, string>) {
    return this.request('GET', url, undefined, headers);
  }
  post(url: string, body?: Body, headers?: Record<string, string>) {
    return this.request('POST', url, body, headers);
  }
  patch(url: string, body?: Body, headers?: Record<string, string>) {
    return this.request('PATCH', url, body, headers);
  }
  delete(url: string, headers?: Record<string, string>) {
    return this.request('DELETE', url, undefined, headers);
  }
}

export const api = (path: string) => `/api/v1${path}`;

let counter = 0;
export const uniqueSlug = (prefix = 'org') => `${prefix}-${process.pid}-${++counter}-${randomBytes(2).toString('hex')}`;

/** Signs in (development sign-in) as a new person and creates an organisation: its administrator. */
export async function onboardAdmin(app: FastifyInstance, name = 'Acme') {
  const client = new Client(app);
  const email = `admin-${randomBytes(4).toString('hex')}@example.com`;
  const login = await client.post(api('/auth/dev-login'), { email });
  if (login.statusCode !== 200) throw new Error(`dev-login: ${login.statusCode} ${login.body}`);
  const res = await client.post(api('/tenants/onboard'), {
    name,
    slug: uniqueSlug(),
    primary_region: 'eu-west',
    admin_display_name: 'Ada Admin',
  });
  if (res.statusCode !== 201) throw new Error(`onboard: ${res.statusCode} ${res.body}`);
  const tenant = res.json().tenant as { id: string; slug: string };
  return { client, email, tenant, userId: login.json().user.id as string };
}

/** A new workload identity of the agent, exchanged for an access token (client credentials). */
export async function agentToken(app: FastifyInstance, admin: Client, agentId: string): Promise<string> {
  const identity = (await admin.post(api(`/agents/${agentId}/identities`))).json();
  const res = await app.inject({
    method: 'POST',
    url: api('/identities/token'),
    payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
  });
  if (res.statusCode !== 200) throw new Error(`token: ${res.statusCode} ${res.body}`);
  return res.json().access_token as string;
}

/** Adds a person with the given roles to the admin's organisation and signs them in. */
export async function addMember(app: FastifyInstance, admin: Client, roles: string[], tenantId?: string) {
  const email = `member-${randomBytes(4).toString('hex')}@example.com`;
  const res = await admin.post(api('/users'), { email, display_name: 'Mem Ber', roles });
  if (res.statusCode !== 201) throw new Error(`add member: ${res.statusCode} ${res.body}`);
  const client = new Client(app);
  const login = await client.post(api('/auth/dev-login'), { email, ...(tenantId ? { tenant_id: tenantId } : {}) });
  if (login.statusCode !== 200) throw new Error(`member login: ${login.statusCode} ${login.body}`);
  return { client, email, userId: res.json().id as string };
}

/** 422 validation_failed whose details name `field` (body path, or query./path./header. prefixed). */
export function expectValidation(res: { statusCode: number; json(): any }, field: string): void {
  expect(res.statusCode).toBe(422);
  expect(res.json().error.code).toBe('validation_failed');
  expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
}

/**
 * `tollgate api` as `make run` starts it, in process: the embedded database (PGlite, in memory) and the in-process
 * worker polling every half second; logs kept out of the test output.
 */
export async function startEmbeddedApp(): Promise<{ app: FastifyInstance; database: Database; close(): Promise<void> }> {
  const config = loadConfig({ DATA_DIR: 'memory://', JOB_POLL_INTERVAL_SECONDS: '0.5', LOG_LEVEL: 'warn' });
  const database = await openDatabase(config);
  const app = await buildApp({ config, db: database.db, logStream: new PassThrough() });
  await app.ready();
  await startInProcessWorker(app);
  return {
    app,
    database,
    async close() {
      await app.close();
      await database.close();
    },
  };
}

/** Runs `fn` on a connection of the schema owner (not held by row-level security): for what no operation shows or writes. */
export async function asOwner<T>(t: { ownerUrl: string }, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: t.ownerUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/**
 * Publishes `rules` as the first version of a new active policy `key`, written as the schema's owner: for a
 * test about what a published rule does, not about publishing (which needs a second person). Answers the
 * policy's id, and `retire` to make it inactive again.
 */
export async function publishRulesAsOwner(t: { ownerUrl: string }, orgId: string, key: string, rules: unknown[]) {
  const policyId = randomUUID();
  await asOwner(t, async (c) => {
    await c.query(`insert into policies (id, org_id, key, name, status, latest_version, published_version) values ($1, $2, $3, $3, 'active', 1, 1)`, [
      policyId,
      orgId,
      key,
    ]);
    await c.query(`insert into policy_versions (id, org_id, policy_id, number, rules) values ($1, $2, $3, 1, $4)`, [randomUUID(), orgId, policyId, JSON.stringify(rules)]);
  });
  return { policyId, retire: () => asOwner(t, (c) => c.query(`update policies set status = 'inactive' where id = $1`, [policyId])) };
}

/** Moves an organisation to another plan, as billing would (no operation of the API sets plans). */
export async function setPlan(t: { ownerUrl: string }, orgId: string, plan: 'developer' | 'team' | 'enterprise') {
  await asOwner(t, (c) => c.query('update organisations set plan = $1 where id = $2', [plan, orgId]));
}
