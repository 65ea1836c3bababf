import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepSessions } from '../../api/modules/gateway/index.js';
import { addMember, api, expectValidation, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { eventually } from '../support/kubectl.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;

const EXFILTRATION = {
  id: 'no-exfiltration',
  effect: 'deny',
  reason_code: 'FLOW_PRIVATE_DATA_EXFILTRATION',
  description: 'Regulated data read and untrusted content seen: nothing leaves for the internet',
  conditions: [
    { field: 'session.max_classification', op: 'in', value: ['regulated', 'restricted'] },
    { field: 'session.untrusted_content', op: 'eq', value: true },
    { field: 'tool.internet_facing', op: 'eq', value: true },
    { field: 'tool.privilege_class', op: 'neq', value: 'read' },
  ],
};
const BILLING_BUDGET = {
  id: 'billing-lookups-per-session',
  effect: 'require_approval',
  reason_code: 'FLOW_TOOL_OVERUSE',
  conditions: [
    { field: 'tool.key', op: 'eq', value: 'billing.lookup' },
    { field: 'session.same_tool_calls', op: 'gte', value: 5 },
  ],
};

/**
 * Session-aware flow rules (docs/policies.md, Flow rules): what an agent did earlier in a session is kept
 * in the database, written in each decision's transaction and read behind the chain head's lock, so two
 * API processes on one database decide a session's calls as one would, one after the other.
 */
describe('flow rules on two API processes', () => {
  let one: TestApp;
  let two: TestApp;
  let owner: pg.Client;
  let admin: Admin;
  let agentId: string;
  let token: string;
  let keyN = 0;

  const call = async (via: TestApp, tool: string, session?: string, operation = 'invoke') => {
    const res = await via.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': `flow-${++keyN}-${Date.now()}`, ...(session ? { 'tollgate-session': session } : {}) },
      payload: { tool, operation, target: `tool://${tool}/1`, parameters: { q: 'x' } },
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { action: { id: string }; decision: { decision: string; reason_codes: string[] } };
  };
  const facts = async (session: string) => {
    const { rows } = await owner.query(`select facts from agent_sessions where org_id = $1 and agent_id = $2 and session_key = $3`, [
      admin.tenant.id,
      agentId,
      session,
    ]);
    return rows[0]?.facts as { max_classification: string | null; untrusted_content: boolean; calls: number; tools: Record<string, number> } | undefined;
  };

  async function publish(rules: unknown[]): Promise<void> {
    const security = await addMember(one.app, admin.client, ['security_admin']);
    const created = await admin.client.post(api('/policies'), { key: `flow-${keyN}`, name: 'Flow rules', rules });
    expect(created.statusCode, created.body).toBe(201);
    const published = await security.client.post(api(`/policies/${created.json().id}/versions/1/publish`), undefined, { 'if-match': '"1"' });
    expect(published.statusCode, published.body).toBe(200);
  }

  beforeAll(async () => {
    const clock = new TestClock();
    one = await startTestApp({ clock, env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '1000' } });
    two = await startTestApp({ clock, share: one, env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '1000' } });
    owner = new pg.Client({ connectionString: one.ownerUrl });
    await owner.connect();
    admin = await onboardAdmin(one.app, 'Flow');
    const post = async (path: string, body: Record<string, unknown>) => {
      const res = await admin.client.post(api(path), body);
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    };
    const claims = await post('/resources/data', { name: 'Claims store', system: 'claims', classification: 'regulated' });
    const web = await post('/resources/apis', { name: 'News site', system: 'web', base_url: 'https://news.example.com', auth_type: 'none' });
    const relay = await post('/resources/apis', { name: 'Mail relay', system: 'mail', base_url: 'https://relay.example.net/v1', auth_type: 'none' });
    const billing = await post('/resources/apis', { name: 'Billing', system: 'billing', base_url: 'http://billing.payments.svc.cluster.local:8080', auth_type: 'none' });
    const tools = [
      await post('/tools', { tool_key: 'claims.read', name: 'Read claims', data_resource_id: claims, privilege_class: 'read' }),
      await post('/tools', { tool_key: 'web.fetch', name: 'Fetch a page', api_resource_id: web, privilege_class: 'read' }),
      await post('/tools', { tool_key: 'mail.send', name: 'Send mail', api_resource_id: relay, privilege_class: 'write' }),
      await post('/tools', { tool_key: 'billing.lookup', name: 'Billing lookup', api_resource_id: billing, privilege_class: 'read' }),
    ];
    agentId = await post('/agents', { name: 'Flow agent' });
    for (const id of tools) await post(`/agents/${agentId}/permissions`, { target_kind: 'tool', target_id: id, actions: ['invoke'] });
    const identity = (await admin.client.post(api(`/agents/${agentId}/identities`))).json();
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

  it('keeps facts before any flow rule exists, adding up every allowed call of a burst on both processes', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => call(i % 2 ? one : two, 'billing.lookup', 'burst')));
    expect(answers.every((a) => a.decision.decision === 'allow')).toBe(true);
    expect(await facts('id:burst')).toEqual({ max_classification: null, untrusted_content: false, calls: 12, tools: { 'billing.lookup': 12 } });

    await call(one, 'claims.read', 'early');
    await call(two, 'web.fetch', 'early');
    expect(await facts('id:early')).toEqual({ max_classification: 'regulated', untrusted_content: true, calls: 2, tools: { 'claims.read': 1, 'web.fetch': 1 } });
    // A denied call runs nothing and adds nothing.
    const unknown = await call(one, 'no.such.tool', 'early');
    expect(unknown.decision.decision).toBe('deny');
    expect((await facts('id:early'))!.calls).toBe(2);
  });

  it('denies sending out after regulated data and untrusted content, with facts gathered before the rule, on either process', async () => {
    await publish([EXFILTRATION, BILLING_BUDGET]);
    const denied = await call(two, 'mail.send', 'early');
    expect(denied.decision).toEqual({ decision: 'deny', reason_codes: ['FLOW_PRIVATE_DATA_EXFILTRATION'] });

    // The same steps in a new session, split over the processes.
    await call(one, 'web.fetch', 'run-1');
    await call(two, 'claims.read', 'run-1');
    expect((await call(one, 'mail.send', 'run-1')).decision.decision).toBe('deny');

    // Each half alone is allowed: regulated data without untrusted content, untrusted content without regulated data.
    await call(one, 'claims.read', 'only-data');
    expect((await call(two, 'mail.send', 'only-data')).decision.decision).toBe('allow');
    await call(two, 'web.fetch', 'only-web');
    expect((await call(one, 'mail.send', 'only-web')).decision.decision).toBe('allow');
  });

  it("takes the access token's lifetime as the session when the call names none", async () => {
    await call(one, 'claims.read');
    await call(two, 'web.fetch');
    expect((await call(one, 'mail.send')).decision.reason_codes).toEqual(['FLOW_PRIVATE_DATA_EXFILTRATION']);
    // A named session starts empty, whatever the token's session holds.
    expect((await call(two, 'mail.send', 'fresh')).decision.decision).toBe('allow');
  });

  it('counts calls of a tool exactly under a burst on two processes: the sixth and later need approval', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => call(i % 2 ? one : two, 'billing.lookup', 'counted')));
    const allowed = answers.filter((a) => a.decision.decision === 'allow');
    const held = answers.filter((a) => a.decision.decision === 'require_approval');
    expect(allowed).toHaveLength(5);
    expect(held).toHaveLength(7);
    expect(held.every((a) => a.decision.reason_codes.includes('FLOW_TOOL_OVERUSE'))).toBe(true);
    expect(await facts('id:counted')).toMatchObject({ calls: 5, tools: { 'billing.lookup': 5 } });
  });

  it('records on each first decision the agent and the session facts it read', async () => {
    const denied = await call(one, 'mail.send', 'early');
    const { rows } = await owner.query(`select decision_facts from action_requests where id = $1`, [denied.action.id]);
    expect(rows[0].decision_facts).toMatchObject({
      v: 1,
      agent: { id: agentId, status: 'active' },
      session: { id: 'id:early', facts: { maxClassification: 'regulated', untrustedContent: true, calls: 2, tools: { 'claims.read': 1, 'web.fetch': 1 } } },
    });
  });

  it("signs the session's facts into the decision's evidence where flow rules decide, and the chain verifies", async () => {
    const denied = await call(two, 'mail.send', 'early');
    const { rows } = await owner.query(`select payload from evidence_records where action_request_id = $1 and event_type = 'decision'`, [denied.action.id]);
    expect(rows[0].payload).toMatchObject({
      decision: 'deny',
      reason_codes: ['FLOW_PRIVATE_DATA_EXFILTRATION'],
      session: { id: 'id:early', facts: { max_classification: 'regulated', untrusted_content: true, calls: 2 } },
    });
    expect((await admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
  });

  it('gives console submissions no session', async () => {
    const res = await admin.client.post(
      api('/actions/console'),
      { agent_id: agentId, tool: 'claims.read', target: 'tool://claims.read/1' },
      { 'idempotency-key': `console-${Date.now()}` },
    );
    expect(res.statusCode, res.body).toBe(200);
    const { rows } = await owner.query(`select decision_facts from action_requests where id = $1`, [res.json().action.id]);
    expect(rows[0].decision_facts.session).toBeNull();
  });

  it('refuses a malformed session identifier', async () => {
    const res = await one.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'flow-bad-session', 'tollgate-session': 'has spaces' },
      payload: { tool: 'claims.read', target: 'tool://claims.read/1' },
    });
    expectValidation(res, 'header.tollgate-session');
  });
});

/**
 * What the database does with session facts on its own: merge_session_facts (migration 0021) adds two
 * batches' facts up whatever their order, and the hourly sweep deletes sessions idle for a week.
 */
describe('session facts in the database', () => {
  let t: TestApp;
  let owner: pg.Client;
  const clock = new TestClock();

  beforeAll(async () => {
    t = await startTestApp({ clock, worker: true, env: { JOB_POLL_INTERVAL_SECONDS: '0.5' } });
    owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
  });
  afterAll(async () => {
    await owner?.end();
    await t?.close();
  });

  const merge = async (a: unknown, b: unknown) => (await owner.query(`select merge_session_facts($1::jsonb, $2::jsonb) as f`, [a, b])).rows[0].f;

  it('merges two batches of one session in either order to the same facts', async () => {
    const a = { max_classification: 'regulated', untrusted_content: false, calls: 3, tools: { 'claims.read': 2, 'web.fetch': 1 } };
    const b = { max_classification: 'internal', untrusted_content: true, calls: 2, tools: { 'web.fetch': 1, 'mail.send': 1 } };
    const merged = { max_classification: 'regulated', untrusted_content: true, calls: 5, tools: { 'claims.read': 2, 'web.fetch': 2, 'mail.send': 1 } };
    expect(await merge(a, b)).toEqual(merged);
    expect(await merge(b, a)).toEqual(merged);
    expect(await merge({ max_classification: null, untrusted_content: false, calls: 0, tools: {} }, b)).toEqual(b);
  });

  it('keeps at most 200 tool keys, those counted already first', async () => {
    const tools = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`t${String(i).padStart(3, '0')}`, 1]));
    const merged = await merge({ max_classification: null, untrusted_content: false, calls: 200, tools }, { max_classification: null, untrusted_content: false, calls: 1, tools: { a0: 1 } });
    expect(Object.keys(merged.tools)).toHaveLength(200);
    expect(merged.tools.a0).toBeUndefined();
    expect(merged.calls).toBe(201);
  });

  it('deletes sessions idle for a week in an hourly job; the runtime role cannot delete them itself', async () => {
    const admin = await onboardAdmin(t.app, 'Sweep');
    const agent = (await admin.client.post(api('/agents'), { name: 'Swept agent' })).json();
    const now = clock.now().getTime();
    for (const [key, daysIdle] of [['old', 8], ['recent', 6]] as const) {
      await owner.query(
        `insert into agent_sessions (org_id, agent_id, session_key, facts, first_at, last_at) values ($1, $2, $3, '{}', $4, $4)`,
        [admin.tenant.id, agent.id, `id:${key}`, new Date(now - daysIdle * 86_400_000)],
      );
    }
    const schedule = (await owner.query(`select cron, timezone from pgboss.schedule where name = 'gateway.session-retention'`)).rows[0];
    expect(schedule).toEqual({ cron: '23 * * * *', timezone: 'UTC' });
    const keys = async () => (await owner.query(`select session_key from agent_sessions where agent_id = $1`, [agent.id])).rows.map((r) => r.session_key);
    expect(await t.app.deps.jobs.send('gateway.session-retention', {})).toEqual(expect.any(String));
    await eventually(async () => ((await keys()).length === 1 ? true : undefined), 10_000, 'the sweep');
    expect(await keys()).toEqual(['id:recent']);
    expect(await sweepSessions({ db: t.database.db, clock })).toBe(0);
    const runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
    try {
      await expect(runtime.query(`delete from agent_sessions`)).rejects.toThrow(/permission denied/);
    } finally {
      await runtime.end();
    }
  });
});
