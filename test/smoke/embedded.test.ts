import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { inScope, openDatabase, type Database } from '../../api/db/database.js';
import { api, Client, onboardAdmin } from '../support/harness.js';
import type { FastifyInstance } from 'fastify';

/** The main flow on the embedded database (PGlite in memory), as `make run` serves it. */
describe('smoke: embedded database', () => {
  let database: Database;
  let app: FastifyInstance;
  beforeAll(async () => {
    const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'silent' });
    database = await openDatabase(config);
    app = await buildApp({ config, db: database.db });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await database.close();
  });

  it('is ready and serves the API document', async () => {
    expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const doc = (await app.inject({ url: api('/openapi.json') })).json();
    expect(doc).toMatchObject({ openapi: '3.1.0', info: { version: '0.1.0' } });
  });

  it('signs in, onboards, reads /auth/me and adds a user', async () => {
    const c = new Client(app);
    expect((await c.post(api('/auth/dev-login'), { email: 'smoke@example.com' })).json().status).toBe('onboarding');
    const org = await c.post(api('/tenants/onboard'), {
      name: 'Smoke Ltd',
      slug: 'smoke-ltd',
      primary_region: 'uk-south',
      admin_display_name: 'Smoke Admin',
    });
    expect(org.statusCode).toBe(201);
    expect((await c.get(api('/auth/me'))).json()).toMatchObject({ roles: ['org_admin'], tenant: { slug: 'smoke-ltd' } });
    const user = await c.post(api('/users'), { email: 'second.smoke@example.com', display_name: 'Second', roles: ['viewer'] });
    expect(user.statusCode).toBe(201);
    const emails = (await c.get(api('/users'))).json().items.map((u: { email: string }) => u.email);
    expect(emails.sort()).toEqual(['second.smoke@example.com', 'smoke@example.com']);
  });

  it("keeps organisations apart: B never sees A's people", async () => {
    const a = await onboardAdmin(app);
    const b = await onboardAdmin(app);
    const bUsers = (await b.client.get(api('/users'))).json().items.map((u: { id: string }) => u.id);
    expect(bUsers).toEqual([b.userId]);
    expect((await b.client.patch(api(`/users/${a.userId}`), { roles: ['viewer'] })).statusCode).toBe(404);
  });

  it('runs as the runtime role under row-level security', async () => {
    const role = await sql<{ current_user: string }>`select current_user`.execute(database.db);
    expect(role.rows[0]?.current_user).toBe('tollgate_app');
    const unscoped = await sql`select * from audit_events`.execute(database.db);
    expect(unscoped.rows).toEqual([]);
    const a = await onboardAdmin(app);
    const scoped = await inScope(database.db, { orgId: a.tenant.id }, (tx) =>
      tx.selectFrom('audit_events').select('org_id').execute(),
    );
    expect(scoped.length).toBeGreaterThan(0);
    expect(new Set(scoped.map((r) => r.org_id))).toEqual(new Set([a.tenant.id]));
  });
});
