import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * The pipelined group commit (D36) under a burst on two API processes sharing one database: batches of one
 * organisation overlap in each process and the two processes append to one chain, and still every
 * acknowledged decision is stored with its evidence, the budgets are exact, a key holds one action, and
 * the chain verifies.
 */
describe('gateway batches pipelined on two processes', () => {
  const LIMIT = 25;
  let one: TestApp;
  let two: TestApp;
  let owner: pg.Client;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  const tokens: string[] = [];
  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };

  beforeAll(async () => {
    const env = { RATE_LIMIT_GATEWAY_PER_MINUTE: String(LIMIT) };
    one = await startTestApp({ env });
    two = await startTestApp({ env, share: one });
    owner = new pg.Client({ connectionString: one.ownerUrl });
    await owner.connect();
    admin = await onboardAdmin(one.app);
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const toolId = tools.find((t) => t.tool_key === 'crm.lookup_customer')!.id;
    for (let a = 0; a < 4; a++) {
      const agent = (await admin.client.post(api('/agents'), { name: `Burst agent ${a}` })).json();
      await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'] });
      const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
      const res = await one.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      });
      tokens.push(res.json().access_token);
    }
  });
  afterAll(async () => {
    await owner?.end();
    await two?.close();
    await one?.close();
  });

  it('stores every acknowledged decision once, with its evidence, within each budget, on one valid chain', async () => {
    // Each agent sends 40 at once, alternating processes; every fifth key is sent twice.
    const sends = tokens.flatMap((token, a) =>
      Array.from({ length: 40 }, (_, i) => ({ token, agent: a, key: `burst-${a}-${i % 5 === 4 ? i - 1 : i}`, via: i % 2 ? one : two })),
    );
    const answers = await Promise.all(
      sends.map(async (s) => {
        const res = await s.via.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${s.token}`, 'idempotency-key': s.key },
          payload: lookup,
        });
        return { ...s, status: res.statusCode, body: res.json() };
      }),
    );

    for (let a = 0; a < tokens.length; a++) {
      const mine = answers.filter((x) => x.agent === a);
      // Every submission is counted once on its agent's budget, repeated keys too.
      expect(mine.filter((x) => x.status === 200)).toHaveLength(LIMIT);
      expect(mine.filter((x) => x.status === 429).every((x) => x.body.error.code === 'rate_limited')).toBe(true);
      expect(mine.filter((x) => x.status !== 200 && x.status !== 429)).toEqual([]);
    }
    const accepted = answers.filter((x) => x.status === 200);
    // A key answered twice is one action: the second answer is its replay.
    const byKey = new Map<string, string>();
    for (const x of accepted) {
      const seen = byKey.get(`${x.agent} ${x.key}`);
      if (seen) expect(x.body.action.id).toBe(seen);
      else byKey.set(`${x.agent} ${x.key}`, x.body.action.id);
    }
    const actionIds = [...byKey.values()];
    const { rows: actions } = await owner.query(`select id from action_requests where org_id = $1 and idempotency_key like 'burst-%'`, [admin.tenant.id]);
    expect(actions.map((r) => r.id).sort()).toEqual([...actionIds].sort());
    const { rows: decisions } = await owner.query(
      `select action_request_id, count(*)::int as n from evidence_records
        where org_id = $1 and event_type = 'decision' and action_request_id = any($2::uuid[]) group by action_request_id`,
      [admin.tenant.id, actionIds],
    );
    expect(decisions).toHaveLength(actionIds.length);
    expect(decisions.every((d) => d.n === 1)).toBe(true);

    const verify = (await admin.client.get(api('/evidence/verify'))).json();
    expect(verify).toMatchObject({ valid: true, first_broken: null });
  });
});
