import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { loadConfig } from '../../api/config.js';
import { openDatabase, type Database } from '../../api/db/database.js';
import { nodeId } from '../../api/modules/graph/index.js';
import { api, onboardAdmin } from '../support/harness.js';

/**
 * The graph on the embedded database (PGlite), as `make run` runs it: the version triggers, the projection under
 * its advisory lock, the repeatable-read load, point in time and rebuild, with no PostgreSQL server.
 */
describe('the graph on the embedded database', () => {
  let app: FastifyInstance;
  let database: Database;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    const config = loadConfig({ DATA_DIR: 'memory://', LOG_LEVEL: 'warn' });
    database = await openDatabase(config);
    app = await buildApp({ config, db: database.db, logStream: new PassThrough() });
    await app.ready();
    admin = await onboardAdmin(app, 'Embedded Graph Org');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  it('projects, follows a change, reads the past and rebuilds idempotently', async () => {
    const agent = (await admin.client.post(api('/agents'), { name: 'Embedded agent' })).json();
    const tool = (await admin.client.get(api('/tools'))).json().items.find((t: { tool_key: string }) => t.tool_key === 'crm.lookup_customer');
    const agentNode = nodeId(admin.tenant.id, 'agent', agent.id);
    const toolNode = nodeId(admin.tenant.id, 'tool', tool.id);
    expect((await admin.client.get(api(`/graph/nodes/${agentNode}/access`))).json().total).toBe(0);
    await new Promise((r) => setTimeout(r, 20));
    const before = new Date().toISOString();
    await new Promise((r) => setTimeout(r, 20));
    expect((await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] })).statusCode).toBe(201);

    const now = (await admin.client.get(api(`/graph/nodes/${agentNode}/access`))).json();
    expect(now.reachable.map((r: { id: string }) => r.id)).toEqual([toolNode]);
    const then = (await admin.client.get(api(`/graph/nodes/${agentNode}/access?at=${encodeURIComponent(before)}`))).json();
    expect(then.total).toBe(0);

    const first = (await admin.client.post(api('/graph/rebuild'))).json();
    const second = (await admin.client.post(api('/graph/rebuild'))).json();
    expect(second.changes).toEqual(first.changes);
    expect(Object.values(second.changes)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(second.edges).toBe(1);
  });
});
