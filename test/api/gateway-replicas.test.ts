import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * Two API processes on one database: each keeps the registry in memory, and a change made through
 * either one, or by hand in SQL, decides the very next submission on the other.
 */
describe('gateway across API processes', () => {
  const clock = new TestClock();
  let one: TestApp;
  let two: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let owner: pg.Client;
  let token: string;
  let toolId: string;
  let bindingId: string;
  let keyN = 0;
  const key = () => `replica-${Date.now()}-${++keyN}`;
  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };

  const submitTo = (t: TestApp, idempotencyKey = key(), body: Record<string, unknown> = lookup) =>
    t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': idempotencyKey },
      payload: body,
    });
  const decisionOn = async (t: TestApp) => {
    const res = await submitTo(t);
    expect(res.statusCode).toBe(200);
    return res.json().decision as { decision: string; reason_codes: string[] };
  };

  beforeAll(async () => {
    one = await startTestApp({ clock, env: { TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    two = await startTestApp({ clock, share: one, env: { TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    owner = new pg.Client({ connectionString: one.ownerUrl });
    await owner.connect();
    admin = await onboardAdmin(one.app);
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    toolId = tools.find((x) => x.tool_key === 'crm.lookup_customer')!.id;
    const agent = (await admin.client.post(api('/agents'), { name: 'Replicated agent' })).json();
    const binding = await admin.client.post(api(`/agents/${agent.id}/permissions`), {
      target_kind: 'tool',
      target_id: toolId,
      actions: ['invoke'],
    });
    expect(binding.statusCode).toBe(201);
    bindingId = binding.json().id;
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const res = await one.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    token = res.json().access_token;
  });
  afterAll(async () => {
    await owner?.end();
    await two?.close();
    await one?.close();
  });

  it('decides on one process by a tool blocked through the other, and by its unblocking', async () => {
    // Both processes have the registry in memory now.
    expect((await decisionOn(one)).decision).toBe('allow');
    expect((await decisionOn(two)).decision).toBe('allow');

    const block = (blocked: boolean) =>
      admin.client.post(api(`/tools/${toolId}/block`), { blocked, confirm: true, reason: 'Incident 7: lookups leak' });
    expect((await block(true)).statusCode).toBe(200);
    expect(await decisionOn(two)).toMatchObject({ decision: 'deny', reason_codes: ['TOOL_BLOCKED'] });
    expect(await decisionOn(one)).toMatchObject({ decision: 'deny', reason_codes: ['TOOL_BLOCKED'] });

    expect((await block(false)).statusCode).toBe(200);
    expect((await decisionOn(two)).decision).toBe('allow');
  });

  it('sees a change written straight into the database, by whoever writes it', async () => {
    expect((await decisionOn(one)).decision).toBe('allow');
    await owner.query('update agents set gateway_access = false where org_id = $1', [admin.tenant.id]);
    expect(await decisionOn(one)).toMatchObject({ decision: 'deny', reason_codes: ['GATEWAY_ACCESS_DISABLED'] });
    await owner.query('update agents set gateway_access = true where org_id = $1', [admin.tenant.id]);
    expect((await decisionOn(one)).decision).toBe('allow');

    await owner.query('delete from permission_bindings where id = $1', [bindingId]);
    expect(await decisionOn(two)).toMatchObject({ decision: 'deny', reason_codes: ['PERMISSION_NOT_GRANTED'] });
  });

  it('makes one action of one key submitted to both processes at once, with the chain intact', async () => {
    const k = key();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => submitTo(i % 2 ? one : two, k)));
    for (const r of results) expect(r.statusCode).toBe(200);
    const bodies = results.map((r) => r.json());
    expect(new Set(bodies.map((b) => b.action.id)).size).toBe(1);
    expect(bodies.filter((b) => !b.replayed)).toHaveLength(1);

    const { rows } = await owner.query(
      `select count(*)::int as n from evidence_records where action_request_id = $1 and event_type = 'decision'`,
      [bodies[0].action.id],
    );
    expect(rows[0].n).toBe(1);
    const verify = (await admin.client.get(api('/evidence/verify'))).json();
    expect(verify).toMatchObject({ valid: true, first_broken: null });
  });
});
