import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../api/db/database.js';
import { api, onboardAdmin, startEmbeddedApp } from '../support/harness.js';

/**
 * The risk recalculation on the embedded database (PGlite), as `make run` runs it: the migration's triggers and
 * queue, and the API's in-process worker draining them, with no PostgreSQL server.
 */
describe('risk scores on the embedded database', () => {
  let app: FastifyInstance;
  let database: Database;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    ({ app, database } = await startEmbeddedApp());
    admin = await onboardAdmin(app, 'Embedded Org');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  async function until(agentId: string, done: (s: any) => boolean, what: string) {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const s = (await admin.client.get(api(`/risks/agents/${agentId}`))).json();
      if (!s.stale && done(s)) return s;
      if (Date.now() > deadline) throw new Error(`${what}: not recalculated in 20 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const contribution = (s: any, key: string) => s.factors.find((f: { key: string }) => f.key === key).contribution;

  it('scores a new agent, then recalculates after a binding, a trust change and a suspension; what-if saves nothing', async () => {
    const agent = (await admin.client.post(api('/agents'), { name: 'Embedded agent' })).json();
    await until(agent.id, (s) => s.score === 21, 'first score');
    const server = (await admin.client.post(api('/mcp-servers'), { name: 'emb', endpoint: 'https://emb.example.com/mcp' })).json();
    const tool = (await admin.client.post(api('/tools'), { tool_key: 'emb.pay', name: 'Pay', privilege_class: 'financial', mcp_server_id: server.id })).json();
    expect((await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] })).statusCode).toBe(201);
    await until(agent.id, (s) => contribution(s, 'high_impact_tools') === 10 && contribution(s, 'mcp_trust') === 6, 'bound');
    await admin.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: 'quarantined', reason: 'suspicious tools' });
    await until(agent.id, (s) => contribution(s, 'mcp_trust') === 12, 'quarantined');
    await admin.client.post(api(`/agents/${agent.id}/suspend`), { reason: 'investigating', confirm: true });
    const suspended = await until(agent.id, (s) => contribution(s, 'containment') === -30, 'suspended');
    expect((await admin.client.get(api(`/agents?risk_band=${suspended.band}`))).json().items.map((a: { id: string }) => a.id)).toContain(agent.id);

    const whatIf = (await admin.client.post(api(`/risks/agents/${agent.id}/what-if`), { approve_mcp_servers: true })).json();
    expect(whatIf).toMatchObject({ applied: ['approve_mcp_servers'], saved: false });
    expect((await admin.client.get(api(`/risks/agents/${agent.id}`))).json()).toEqual(suspended);
  });
});
