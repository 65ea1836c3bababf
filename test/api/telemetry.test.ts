import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepTelemetry, TELEMETRY_EVENT_TYPES, telemetryEvents } from '../../api/modules/telemetry/index.js';
import { ROOT } from '../support/processes.js';
import { addMember, asOwner, api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type Client, type TestApp } from '../support/harness.js';

/**
 * Telemetry on real PostgreSQL with the in-process worker: every event type written by its real writer
 * (a gateway decision, token exchanges and refusals, containment, a discovery run on a mock integration,
 * an MCP trust change, a policy publish) and found with each filter; paging; stats per hour; permissions,
 * validation and isolation; retention deleting only old events, by the sweep and through its queue.
 */

type Event = {
  id: string;
  event_type: string;
  severity: string;
  occurred_at: string;
  agent_id: string | null;
  correlation_id: string;
  summary: string;
  attributes: Record<string, any>;
};
type Admin = Awaited<ReturnType<typeof onboardAdmin>>;

const HOUR = 3600;

describe('telemetry', () => {
  let t: TestApp;
  const clock = new TestClock(new Date('2026-11-23T09:10:00.000Z'));
  let admin: Admin;
  let other: Admin;
  let tools: Record<string, { id: string }>;
  let agent: { id: string; clientId: string; secret: string; token: string };
  let keyN = 0;
  const key = () => `tel-${Date.now()}-${++keyN}`;

  async function list(client: Client, query = ''): Promise<Event[]> {
    const res = await client.get(api(`/telemetry${query ? `?${query}` : ''}`));
    expect(res.statusCode, res.body).toBe(200);
    return res.json().items;
  }

  async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const exchange = (clientId: string, secret: string) =>
    t.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: secret } });

  async function newAgent(client: Client, name: string) {
    const a = (await client.post(api('/agents'), { name })).json();
    const identity = (await client.post(api(`/agents/${a.id}/identities`))).json();
    const res = await exchange(identity.client_id, identity.client_secret);
    expect(res.statusCode, res.body).toBe(200);
    return { id: a.id as string, clientId: identity.client_id as string, secret: identity.client_secret as string, token: res.json().access_token as string };
  }

  const submit = (token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': key(), ...headers },
      payload: body,
    });

  /** A statement as the database owner (past row-level security), for what no API operation shows or writes. */
  const owner = <T>(fn: (c: pg.Client) => Promise<T>) => asOwner(t, fn);
  /** The telemetry_events rows that name one of these actions. */
  const loggedFor = (actionIds: string[]) =>
    owner(async (c) => (await c.query(`select id, attributes from telemetry_events where attributes->>'action_id' = any($1)`, [actionIds])).rows);

  /**
   * An action row as the gateway writes one (decided `at`, first decision's latency `decisionMs`), planted
   * with chosen values: what no submission could make (a 600-character tool key), or a past date.
   */
  const plantAction = (orgId: string, agentId: string, at: Date, a: { tool: string; decision: string; reasonCodes: string[]; decisionMs: number | null; correlationId?: string }) =>
    owner(async (c) => {
      const id = randomUUID();
      await c.query(
        `insert into action_requests (id, org_id, agent_id, source, idempotency_key, request_hash, tool, operation, target, state,
           decision, reason_codes, trace, correlation_id, created_at, updated_at, decision_ms)
         values ($1, $2, $3, 'gateway', $10, 'h', $4, 'invoke', 't://x', 'denied', $5, $6, '[]', $7, $8, $8, $9)`,
        [id, orgId, agentId, a.tool, a.decision, a.reasonCodes, a.correlationId ?? `planted-${id}`, at, a.decisionMs, `planted-${id}`],
      );
      return id;
    });

  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const payment = (amount: number) => ({ tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount, currency: 'EUR' } });

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      worker: true,
      env: { JOB_POLL_INTERVAL_SECONDS: '0.5', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0' },
    });
    admin = await onboardAdmin(t.app, 'Telemetry Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    other = await onboardAdmin(t.app, 'Other Org');
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
    agent = await newAgent(admin.client, 'Telemetry agent');
    for (const [toolKey, constraints] of [
      ['crm.lookup_customer', {}],
      ['payments.create_payment', { max_amount: 500, currency: 'EUR' }],
    ] as const) {
      const res = await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tools[toolKey]!.id, actions: ['invoke'], constraints });
      expect(res.statusCode, res.body).toBe(201);
    }
  }, 60_000);
  afterAll(async () => t?.close());

  describe('each event type, written by its real writer', () => {
    it('gateway.decision: every decision, with its reason codes, latency and severity, in the batch that records it', async () => {
      const allowed = await submit(agent.token, lookup, { 'x-correlation-id': 'corr-allow-0001' });
      const denied = await submit(agent.token, payment(900));
      const secret = await submit(agent.token, { ...lookup, parameters: { customer_id: '42', note: 'AKIAQWERTYUIOPASDFGH' } });
      const held = await submit(agent.token, payment(100));
      for (const r of [allowed, denied, secret, held]) expect(r.statusCode, r.body).toBe(200);
      expect(held.json().decision.decision).toBe('require_approval');

      const decisions = await list(admin.client, 'event_type=gateway.decision');
      const of = (res: typeof allowed) => decisions.find((e) => e.attributes.action_id === res.json().action.id)!;
      expect(of(allowed)).toMatchObject({
        severity: 'info',
        agent_id: agent.id,
        correlation_id: 'corr-allow-0001',
        summary: 'allow crm.lookup_customer (invoke): PERMISSION_GRANTED',
        occurred_at: clock.now().toISOString(),
        attributes: { tool: 'crm.lookup_customer', operation: 'invoke', decision: 'allow', reason_codes: ['PERMISSION_GRANTED'], source: 'gateway', redeemed: false },
      });
      expect(of(allowed).attributes.latency_ms).toBeGreaterThan(0);
      expect(of(allowed).attributes.latency_ms).toBeLessThan(10_000);
      expect(of(denied)).toMatchObject({ severity: 'medium', attributes: { decision: 'deny', reason_codes: ['PERMISSION_CONSTRAINT_EXCEEDED'] } });
      expect(of(secret)).toMatchObject({ severity: 'high', attributes: { decision: 'deny' } });
      expect(of(secret).attributes.reason_codes).toContain('SECRET_DETECTED');
      expect(of(held)).toMatchObject({ severity: 'low', attributes: { decision: 'require_approval' } });

      // A replay decides nothing and writes nothing.
      const k = key();
      const first = await t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': k }, payload: lookup });
      const replay = await t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': k }, payload: lookup });
      expect(replay.json().replayed).toBe(true);
      const forAction = (await list(admin.client, 'event_type=gateway.decision&limit=200')).filter((e) => e.attributes.action_id === first.json().action.id);
      expect(forAction).toHaveLength(1);

      // A first decision writes no telemetry row: its action row is read as its event, named by the action's id.
      const ids = [allowed, denied, secret, held, first].map((r) => r.json().action.id as string);
      expect(await loggedFor(ids)).toEqual([]);
      expect(decisions.filter((e) => ids.includes(e.attributes.action_id)).map((e) => e.id).sort()).toEqual(ids.slice(0, 4).sort());
    });

    it('gateway.decision: the event read from an action row is the one the builder builds, to the character', async () => {
      const org = await onboardAdmin(t.app, 'Projection Org');
      const a = (await org.client.post(api('/agents'), { name: 'Projection agent' })).json();
      const at = clock.now();
      const cases = [
        { tool: 'crm.lookup_customer', decision: 'allow', reasonCodes: ['PERMISSION_GRANTED'], decisionMs: 1.234 },
        { tool: 'crm.lookup_customer', decision: 'allow', reasonCodes: [], decisionMs: 0 },
        { tool: 'payments.create_payment', decision: 'require_approval', reasonCodes: ['APPROVAL_REQUIRED', 'HIGH_VALUE'], decisionMs: 12.5 },
        { tool: 'crm.export_all', decision: 'deny', reasonCodes: ['PERMISSION_NOT_GRANTED'], decisionMs: 3 },
        { tool: 'crm.export_all', decision: 'deny', reasonCodes: ['POLICY_DENY', 'AGENT_SUSPENDED'], decisionMs: 0.001 },
        { tool: `${'x'.repeat(600)}.é`, decision: 'deny', reasonCodes: ['SECRET_DETECTED'], decisionMs: 7.25 },
        { tool: 'crm.lookup_customer', decision: 'deny', reasonCodes: ['A_CODE', 'B_CODE'], decisionMs: 99999.999 },
      ];
      const planted: Array<(typeof cases)[number] & { id: string }> = [];
      for (const c of cases) planted.push({ id: await plantAction(org.tenant.id, a.id, at, c), ...c });
      const listed = await list(org.client, 'event_type=gateway.decision&limit=50');
      expect(listed).toHaveLength(cases.length);
      for (const p of planted) {
        const built = telemetryEvents.decision({
          at,
          agentId: a.id,
          correlationId: `planted-${p.id}`,
          actionId: p.id,
          tool: p.tool,
          operation: 'invoke',
          decision: p.decision,
          reasonCodes: p.reasonCodes,
          latencyMs: p.decisionMs,
          source: 'gateway',
          redeemed: false,
        });
        expect(listed.find((e) => e.id === p.id), p.tool.slice(0, 40)).toEqual({
          id: p.id,
          event_type: built.eventType,
          severity: built.severity,
          occurred_at: at.toISOString(),
          agent_id: a.id,
          correlation_id: built.correlationId,
          summary: built.summary,
          attributes: built.attributes,
        });
      }
      expect(listed.find((e) => e.id === planted[5]!.id)!.summary).toHaveLength(500);
      // Each filter sees the projected columns: severity, q on the summary, correlation ID.
      expect((await list(org.client, 'severity=high')).map((e) => e.id).sort()).toEqual([planted[4]!.id, planted[5]!.id].sort());
      expect((await list(org.client, 'q=b_code')).map((e) => e.id)).toEqual([planted[6]!.id]);
      expect((await list(org.client, `correlation_id=planted-${planted[2]!.id}`)).map((e) => e.severity)).toEqual(['low']);
      expect((await list(org.client, 'event_type=policy.published'))).toEqual([]);
    });

    it('gateway.decision: concurrent submissions, group-committed, each get their own event', async () => {
      const results = await Promise.all(Array.from({ length: 12 }, () => submit(agent.token, lookup)));
      const ids = new Set(results.map((r) => r.json().action.id as string));
      const events = (await list(admin.client, 'event_type=gateway.decision&limit=200')).filter((e) => ids.has(e.attributes.action_id));
      expect(events).toHaveLength(12);
    });

    it('gateway.decision: the decision on resubmission with an approval token is an event of its own (redeemed)', async () => {
      const approver = await addMember(t.app, admin.client, ['approver']);
      const k = key();
      const send = (body: Record<string, unknown>) =>
        t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': k }, payload: body });
      const held = (await send(payment(50))).json();
      const decided = await approver.client.post(api(`/approvals/${held.approval.id}/decision`), { decision: 'approve', reason: 'fine by me' });
      expect(decided.statusCode, decided.body).toBe(200);
      const status = await t.app.inject({ url: api(`/actions/gateway/${held.action.id}`), headers: { authorization: `Bearer ${agent.token}` } });
      const redeemed = await send({ ...payment(50), approval_token: status.json().approval.approval_token });
      expect(redeemed.json().decision.decision).toBe('allow');
      const events = (await list(admin.client, 'event_type=gateway.decision&limit=200')).filter((e) => e.attributes.action_id === held.action.id);
      expect(events.map((e) => [e.attributes.decision, e.attributes.redeemed]).sort()).toEqual([
        ['allow', true],
        ['require_approval', false],
      ]);
      expect(events.find((e) => e.attributes.redeemed)!.summary).toContain('after approval');
      // The first decision keeps what it was (id, reason codes, latency), though the action row now holds the second.
      const firstEvent = events.find((e) => !e.attributes.redeemed)!;
      expect(firstEvent).toMatchObject({ id: held.action.id, attributes: { reason_codes: held.decision.reason_codes } });
      expect(firstEvent.attributes.latency_ms).toBeGreaterThan(0);
      // Both are telemetry rows now, written by the redemption: the action row is no longer read as an event.
      expect((await loggedFor([held.action.id])).map((r) => r.attributes.redeemed).sort()).toEqual([false, true]);
    });

    it('identity.token_issued and identity.token_refused: exchanges, a wrong secret, and a suspended agent', async () => {
      const issued = await list(admin.client, `event_type=identity.token_issued&agent_id=${agent.id}`);
      expect(issued[0]).toMatchObject({ severity: 'info', agent_id: agent.id, attributes: { client_id: agent.clientId } });
      expect(issued[0]!.summary).toContain(agent.clientId);

      const wrong = await exchange(agent.clientId, 'tgs_not-the-secret');
      expect(wrong.statusCode).toBe(401);
      // Written once the answer is on its way.
      const refused = await eventually('the refusal', async () => (await list(admin.client, 'event_type=identity.token_refused'))[0]);
      expect(refused).toMatchObject({
        severity: 'medium',
        agent_id: agent.id,
        correlation_id: wrong.headers['x-correlation-id'],
        attributes: { reason: 'wrong_secret', error_code: 'invalid_client', client_id: agent.clientId },
      });
      // An unknown client ID belongs to no organisation: nothing is written anywhere.
      expect((await exchange('tgc_000000000000000000000000', 'tgs_x')).statusCode).toBe(401);
    });

    it('agent.containment: suspend (and the exchange it refuses), restore, gateway access', async () => {
      const suspended = await admin.client.post(api(`/agents/${agent.id}/suspend`), { reason: 'investigating a leak', confirm: true }, { 'x-correlation-id': 'corr-suspend-0001' });
      expect(suspended.statusCode, suspended.body).toBe(200);
      const [event] = await list(admin.client, 'correlation_id=corr-suspend-0001');
      expect(event).toMatchObject({
        event_type: 'agent.containment',
        severity: 'high',
        agent_id: agent.id,
        summary: 'suspend: Telemetry agent (investigating a leak)',
        attributes: { action: 'suspend', reason: 'investigating a leak', actor_id: admin.userId, status: { from: 'active', to: 'suspended' } },
      });
      // The pending approval of the earlier test was cancelled with it: counted, not listed.
      expect(event!.attributes.approvals_cancelled).toBeGreaterThanOrEqual(1);

      expect((await exchange(agent.clientId, agent.secret)).statusCode).toBe(401);
      const refusal = await eventually('the suspended refusal', async () =>
        (await list(admin.client, 'event_type=identity.token_refused&severity=high'))[0],
      );
      expect(refusal.attributes).toMatchObject({ reason: 'agent_suspended', error_code: 'session_revoked' });

      // A second apart, so that newest-first is one order.
      clock.advance(1);
      expect((await admin.client.post(api(`/agents/${agent.id}/restore`), { reason: 'all clear now', confirm: true })).statusCode).toBe(200);
      clock.advance(1);
      const off = await admin.client.post(api(`/agents/${agent.id}/gateway-access`), { reason: 'maintenance window', confirm: true, enabled: false });
      expect(off.statusCode, off.body).toBe(200);
      clock.advance(1);
      expect((await admin.client.post(api(`/agents/${agent.id}/gateway-access`), { reason: 'maintenance over', confirm: true, enabled: true })).statusCode).toBe(200);
      const containment = await list(admin.client, `event_type=agent.containment&agent_id=${agent.id}`);
      expect(containment.map((e) => [e.attributes.action, e.severity])).toEqual([
        ['gateway_access', 'low'],
        ['gateway_access', 'medium'],
        ['restore', 'low'],
        ['suspend', 'high'],
      ]);
      agent.token = (await exchange(agent.clientId, agent.secret)).json().access_token;
    });

    it('agent.containment: deny-class rules and their lifting', async () => {
      const added = await admin.client.post(api('/actions/deny-class'), { reason: 'freeze payments', confirm: true, privilege_class: 'financial' });
      expect(added.statusCode, added.body).toBe(200);
      clock.advance(1);
      const lifted = await admin.client.post(api('/actions/deny-class/lift'), { rule_id: added.json().rule_id, reason: 'freeze over', confirm: true });
      expect(lifted.statusCode, lifted.body).toBe(200);
      const events = (await list(admin.client, 'event_type=agent.containment&q=financial tools')).map((e) => [e.attributes.action, e.severity, e.agent_id]);
      expect(events).toEqual([
        ['deny_class_lifted', 'low', null],
        ['deny_class', 'medium', null],
      ]);
    });

    it('discovery.run: a mock discovery run, at its end, with its counters', async () => {
      const integration = (await admin.client.post(api('/integrations'), { kind: 'mcp', name: 'Mock MCP estate' })).json();
      const run = (await admin.client.post(api(`/connectors/${integration.connector.id}/run`), {})).json();
      const event = await eventually('the run event', async () => (await list(admin.client, 'event_type=discovery.run'))[0]);
      expect(event).toMatchObject({
        agent_id: null,
        attributes: { run_id: run.id, integration_id: integration.id, adapter: 'mock.mcp', status: 'succeeded', error_message: null },
      });
      expect(event.attributes.counters.mcp_servers_added).toBeGreaterThan(0);
      // It opened findings (untrusted servers): worth a look, so low rather than info.
      expect(event.severity).toBe(event.attributes.counters.findings_opened > 0 ? 'low' : 'info');
      expect(event.summary).toMatch(/^discovery run succeeded on mock\.mcp: /);
      const runs = (await admin.client.get(api(`/connectors/${integration.connector.id}/runs`))).json().items;
      expect(runs[0].status).toBe('succeeded');
    });

    it('mcp_server.trust_changed: a person quarantines and approves a server', async () => {
      const server = (await admin.client.post(api('/mcp-servers'), { name: 'Billing MCP', endpoint: 'https://billing.example.com/mcp' })).json();
      for (const [trust, reason] of [
        ['quarantined', 'suspicious tool list'],
        ['approved', 'reviewed by security'],
      ]) {
        clock.advance(1);
        const res = await admin.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: trust, reason });
        expect(res.statusCode, res.body).toBe(200);
      }
      const events = await list(admin.client, 'event_type=mcp_server.trust_changed&q=Billing MCP');
      expect(events.map((e) => [e.severity, e.attributes.trust_state, e.attributes.source])).toEqual([
        ['low', { from: 'quarantined', to: 'approved' }, 'person'],
        ['high', { from: 'unknown', to: 'quarantined' }, 'person'],
      ]);
      expect(events[1]!.summary).toBe('MCP server Billing MCP trust unknown → quarantined (suspicious tool list)');
      expect(events[1]!.attributes.mcp_server_id).toBe(server.id);
    });

    it('policy.published: a second person publishes a draft', async () => {
      const author = await addMember(t.app, admin.client, ['agent_developer']);
      const rules = [{ id: 'no-export', effect: 'deny', reason_code: 'EXPORT_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'crm.export_all' }] }];
      const policy = (await author.client.post(api('/policies'), { key: 'freeze-export', name: 'Freeze export', rules })).json();
      const published = await admin.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, { 'if-match': '"1"' });
      expect(published.statusCode, published.body).toBe(200);
      const [event] = await list(admin.client, 'event_type=policy.published');
      expect(event).toMatchObject({
        severity: 'low',
        agent_id: null,
        summary: 'policy freeze-export version 1 published',
        correlation_id: published.headers['x-correlation-id'],
        attributes: { policy_id: policy.id, key: 'freeze-export', number: 1, previous_published_version: null, actor_id: admin.userId },
      });
    });

    it('every catalogued type was written by the tests above', async () => {
      const seen = new Set((await list(admin.client, 'limit=200')).map((e) => e.event_type));
      for (const type of TELEMETRY_EVENT_TYPES) expect(seen, type).toContain(type);
    });

    it('docs/telemetry.md and the OpenAPI description list every catalogued type', async () => {
      const docs = readFileSync(path.join(ROOT, 'docs', 'telemetry.md'), 'utf8');
      const openapi = (await t.app.inject({ url: api('/openapi.json') })).json();
      const description = openapi.paths['/telemetry'].get.description as string;
      for (const type of TELEMETRY_EVENT_TYPES) {
        expect(docs, type).toContain(`| \`${type}\` |`);
        expect(description, type).toContain(`\`${type}\``);
      }
    });
  });

  describe('GET /telemetry: filters and paging', () => {
    it('lists newest first and finds each event with each filter, alone and combined', async () => {
      const all = await list(admin.client, 'limit=200');
      expect(all.length).toBeGreaterThan(20);
      const order = all.map((e) => `${e.occurred_at} ${e.id}`);
      expect(order).toEqual([...order].sort().reverse());

      for (const type of TELEMETRY_EVENT_TYPES) {
        const items = await list(admin.client, `event_type=${type}&limit=200`);
        expect(items.length, type).toBe(all.filter((e) => e.event_type === type).length);
      }
      for (const severity of ['info', 'low', 'medium', 'high', 'critical']) {
        const items = await list(admin.client, `severity=${severity}&limit=200`);
        expect(items.map((e) => e.id), severity).toEqual(all.filter((e) => e.severity === severity).map((e) => e.id));
      }
      const forAgent = await list(admin.client, `agent_id=${agent.id}&limit=200`);
      expect(forAgent.map((e) => e.id)).toEqual(all.filter((e) => e.agent_id === agent.id).map((e) => e.id));
      expect(await list(admin.client, `agent_id=${randomUUID()}`)).toEqual([]);

      // q: a substring of the summary, any letter case, wildcards taken literally.
      expect((await list(admin.client, 'q=SECRET_detected')).map((e) => e.attributes.decision)).toEqual(['deny']);
      expect(await list(admin.client, 'q=%25')).toEqual([]);
      expect(await list(admin.client, 'q=_')).not.toEqual([]); // summaries contain underscores (reason codes)
      const combined = await list(admin.client, `event_type=gateway.decision&severity=medium&agent_id=${agent.id}&q=constraint`);
      expect(combined.map((e) => e.attributes.reason_codes)).toEqual([['PERMISSION_CONSTRAINT_EXCEEDED']]);
      expect(await list(admin.client, 'correlation_id=corr-allow-0001&event_type=gateway.decision')).toHaveLength(1);
    });

    it('filters by time: since inclusive, until exclusive', async () => {
      const before = clock.now().toISOString();
      const earlier = await list(admin.client, 'limit=200');
      clock.advance(HOUR);
      const at = clock.now().toISOString();
      const iso = (ms: number) => encodeURIComponent(new Date(ms).toISOString());
      const res = await admin.client.patch(api(`/mcp-servers/${earlier.find((e) => e.event_type === 'mcp_server.trust_changed')!.attributes.mcp_server_id}`), {
        trust_state: 'unsigned',
        reason: 'signature missing',
      });
      expect(res.statusCode).toBe(200);
      expect((await list(admin.client, `since=${encodeURIComponent(at)}`)).map((e) => e.attributes.trust_state?.to)).toEqual(['unsigned']);
      expect((await list(admin.client, `until=${encodeURIComponent(at)}&limit=200`)).map((e) => e.id)).toEqual(earlier.map((e) => e.id));
      expect(await list(admin.client, `since=${iso(Date.parse(before) + 1)}&until=${encodeURIComponent(at)}`)).toEqual([]);
      const window = await list(admin.client, `since=${encodeURIComponent(before)}&until=${iso(Date.parse(at) + 1)}&limit=200`);
      expect(window[0]!.occurred_at).toBe(at);
      expect(window.length).toBe(1 + earlier.filter((e) => e.occurred_at === before).length);
      expect(window.length).toBeGreaterThan(1);
    });

    it('pages with limit and cursor, default 100, every event once; a bad or borrowed cursor answers 422 invalid_cursor', async () => {
      const all = await list(admin.client, 'limit=200');
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await admin.client.get(api(`/telemetry?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
        expect(res.statusCode).toBe(200);
        const page = res.json();
        expect(page.items.length).toBeLessThanOrEqual(7);
        seen.push(...page.items.map((e: Event) => e.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(seen).toEqual(all.map((e) => e.id));

      // Default limit 100: more events than that exist after a burst.
      // (The clock moved an hour since the agent's token was issued: a fresh one.)
      agent.token = (await exchange(agent.clientId, agent.secret)).json().access_token;
      const burst = await Promise.all(Array.from({ length: 90 }, () => submit(agent.token, lookup)));
      expect(burst.every((r) => r.statusCode === 200)).toBe(true);
      const first = (await admin.client.get(api('/telemetry'))).json();
      expect(first.items).toHaveLength(100);
      expect(first.next_cursor).toEqual(expect.any(String));

      const bad = await admin.client.get(api('/telemetry?cursor=garbage'));
      expect(bad.statusCode).toBe(422);
      expect(bad.json().error.code).toBe('invalid_cursor');
      const audit = (await admin.client.get(api('/audit?limit=1'))).json().next_cursor as string;
      expect((await admin.client.get(api(`/telemetry?cursor=${encodeURIComponent(audit)}`))).json().error.code).toBe('invalid_cursor');
      // Another organisation's cursor is not this list's.
      expect((await other.client.get(api(`/telemetry?cursor=${encodeURIComponent(first.next_cursor)}`))).json().error.code).toBe('invalid_cursor');
    });

    it('answers 422 in the envelope for bad input', async () => {
      expectValidation(await admin.client.get(api('/telemetry?severity=urgent')), 'query.severity');
      expectValidation(await admin.client.get(api('/telemetry?agent_id=not-a-uuid')), 'query.agent_id');
      expectValidation(await admin.client.get(api('/telemetry?since=yesterday')), 'query.since');
      expectValidation(await admin.client.get(api('/telemetry?until=2026-13-01T00:00:00Z')), 'query.until');
      expectValidation(await admin.client.get(api('/telemetry?since=2026-11-23T10:00:00Z&until=2026-11-23T10:00:00Z')), 'query.until');
      expectValidation(await admin.client.get(api('/telemetry?limit=0')), 'query.limit');
      expectValidation(await admin.client.get(api('/telemetry?limit=201')), 'query.limit');
      expectValidation(await admin.client.get(api(`/telemetry?q=${'x'.repeat(201)}`)), 'query.q');
      expectValidation(await admin.client.get(api(`/telemetry?event_type=${'x'.repeat(81)}`)), 'query.event_type');
      expectValidation(await admin.client.get(api('/telemetry/stats?hours=0')), 'query.hours');
      expectValidation(await admin.client.get(api('/telemetry/stats?hours=721')), 'query.hours');
      expectValidation(await admin.client.get(api('/telemetry/stats?hours=1.5')), 'query.hours');
    });
  });

  describe('access', () => {
    it('403 forbidden for a role without telemetry:read, 401 without a session', async () => {
      const viewer = await addMember(t.app, admin.client, ['viewer']);
      for (const url of ['/telemetry', '/telemetry/stats']) {
        const res = await viewer.client.get(api(url));
        expect(res.statusCode).toBe(403);
        expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'telemetry:read' } });
        expect((await t.app.inject({ url: api(url) })).statusCode).toBe(401);
      }
      // agent_developer and auditor hold it.
      const developer = await addMember(t.app, admin.client, ['agent_developer']);
      expect((await developer.client.get(api('/telemetry?limit=1'))).statusCode).toBe(200);
    });

    it('another organisation sees none of these events, not even by agent, correlation ID or in its stats', async () => {
      expect(await list(other.client, 'limit=200')).toEqual([]);
      expect(await list(other.client, `agent_id=${agent.id}`)).toEqual([]);
      expect(await list(other.client, 'correlation_id=corr-suspend-0001')).toEqual([]);
      const stats = (await other.client.get(api('/telemetry/stats?hours=720'))).json();
      expect(stats.totals.events).toBe(0);
    });
  });

  describe('GET /telemetry/stats', () => {
    it('counts per hour by type and severity, decisions by outcome, latency p50/p95, hours without events included', async () => {
      // An organisation of its own, so the counts are exact: two hours of traffic, then a quiet hour.
      const org = await onboardAdmin(t.app, 'Stats Org');
      await setPlan(t, org.tenant.id, 'enterprise');
      clock.advance(HOUR); // a fresh hour
      const hour0 = new Date(Math.floor(clock.now().getTime() / (HOUR * 1000)) * HOUR * 1000);
      const a = await newAgent(org.client, 'Stats agent'); // token_issued: info
      const lookupTool = (await org.client.get(api('/tools'))).json().items.find((x: { tool_key: string }) => x.tool_key === 'crm.lookup_customer');
      await org.client.post(api(`/agents/${a.id}/permissions`), { target_kind: 'tool', target_id: lookupTool.id, actions: ['invoke'] });
      for (const body of [lookup, lookup, lookup, { ...lookup, tool: 'crm.export_all' }]) expect((await submit(a.token, body)).statusCode).toBe(200);
      clock.advance(HOUR);
      const fresh = (await exchange(a.clientId, a.secret)).json().access_token as string; // token_issued
      for (const body of [{ ...lookup, tool: 'email.send_message' }, lookup]) expect((await submit(fresh, body)).statusCode).toBe(200);
      clock.advance(HOUR); // the current hour is quiet

      const res = await org.client.get(api('/telemetry/stats?hours=4'));
      expect(res.statusCode, res.body).toBe(200);
      const stats = res.json();
      expect(stats.hours).toBe(4);
      expect(stats.series.map((s: { hour: string }) => s.hour)).toEqual(
        [-1, 0, 1, 2].map((h) => new Date(hour0.getTime() + h * HOUR * 1000).toISOString()),
      );
      expect(stats.since).toBe(stats.series[0].hour);
      expect(stats.until).toBe(new Date(hour0.getTime() + 3 * HOUR * 1000).toISOString());
      const [quietBefore, h0, h1, quietNow] = stats.series;
      for (const quiet of [quietBefore, quietNow]) {
        expect(quiet).toMatchObject({ events: 0, decisions: { allow: 0, deny: 0, require_approval: 0 }, decision_latency_ms: { p50: null, p95: null } });
      }
      expect(h0).toMatchObject({
        events: 5,
        by_severity: { info: 4, low: 0, medium: 1, high: 0, critical: 0 },
        decisions: { allow: 3, deny: 1, require_approval: 0 },
      });
      expect(h0.by_type).toMatchObject({ 'gateway.decision': 4, 'identity.token_issued': 1, 'policy.published': 0 });
      expect(Object.keys(h0.by_type).sort()).toEqual([...TELEMETRY_EVENT_TYPES].sort());
      expect(h1).toMatchObject({ events: 3, decisions: { allow: 1, deny: 1, require_approval: 0 }, by_severity: { info: 2, medium: 1 } });
      expect(stats.totals).toMatchObject({ events: 8, decisions: { allow: 4, deny: 2, require_approval: 0 } });
      for (const l of [h0.decision_latency_ms, h1.decision_latency_ms, stats.totals.decision_latency_ms]) {
        expect(l.p50).toBeGreaterThan(0);
        expect(l.p95).toBeGreaterThanOrEqual(l.p50);
      }
      // The percentiles are those of the events' own latency_ms.
      const latencies = (await list(org.client, 'event_type=gateway.decision'))
        .filter((e) => Date.parse(e.occurred_at) >= hour0.getTime() + HOUR * 1000)
        .map((e) => e.attributes.latency_ms as number)
        .sort((x, y) => x - y);
      expect(h1.decision_latency_ms.p50).toBeCloseTo((latencies[0]! + latencies[1]!) / 2, 2);

      // Default 24 hours, the last one the current.
      const day = (await org.client.get(api('/telemetry/stats'))).json();
      expect(day.series).toHaveLength(24);
      expect(day.totals.events).toBe(8);
    });
  });

  describe('retention', () => {
    const days = (n: number) => new Date(clock.now().getTime() - n * 86_400_000);
    /** Events written as they would be, at chosen times, in both organisations. */
    const plant = (orgId: string, at: Date, n: number, marker: string) =>
      owner((c) =>
        c.query(
          `insert into telemetry_events (org_id, occurred_at, id, event_type, severity, correlation_id, summary)
           select $1, $2, gen_random_uuid(), 'policy.published', 'low', $3, 'planted' from generate_series(1, $4)`,
          [orgId, at, marker, n],
        ),
      );
    const count = (marker: string) => owner(async (c) => Number((await c.query('select count(*) from telemetry_events where correlation_id = $1', [marker])).rows[0].count));

    it('a decision read from its action row is answered only within TELEMETRY_RETENTION_DAYS, in lists and stats', async () => {
      const org = await onboardAdmin(t.app, 'Retention Org');
      const a = (await org.client.post(api('/agents'), { name: 'Retention agent' })).json();
      const decision = { tool: 'crm.lookup_customer', decision: 'allow', reasonCodes: ['PERMISSION_GRANTED'], decisionMs: 2 };
      const old = await plantAction(org.tenant.id, a.id, days(30.01), decision);
      const kept = await plantAction(org.tenant.id, a.id, days(29.9), decision);
      const before = await plantAction(org.tenant.id, a.id, days(1), { ...decision, decisionMs: null }); // decided before migration 0013
      expect((await list(org.client, 'limit=50')).map((e) => e.id)).toEqual([kept]);
      const stats = (await org.client.get(api('/telemetry/stats?hours=720'))).json();
      expect(stats.totals).toMatchObject({ events: 1, decisions: { allow: 1 }, decision_latency_ms: { p50: 2, p95: 2 } });
      expect([old, before]).not.toContain(kept);
    });

    it('runs as the telemetry.retention job in the worker, scheduled every 10 minutes; the runtime role cannot delete events itself', async () => {
      await plant(other.tenant.id, days(40), 3, 'old-d');
      const schedule = await owner(async (c) => (await c.query(`select cron, timezone from pgboss.schedule where name = 'telemetry.retention'`)).rows[0]);
      expect(schedule).toEqual({ cron: '*/10 * * * *', timezone: 'UTC' });
      expect(await t.app.deps.jobs.send('telemetry.retention', {})).toEqual(expect.any(String));
      await eventually('the job to sweep', async () => ((await count('old-d')) === 0 ? true : undefined));
      // From here on the sweeps are the test's own: no scheduled one runs between its steps.
      await owner((c) => c.query(`delete from pgboss.schedule where name = 'telemetry.retention'`));
      const runtime = new pg.Client({ connectionString: t.runtimeUrl });
      await runtime.connect();
      try {
        await expect(runtime.query('delete from telemetry_events')).rejects.toThrow(/permission denied/);
      } finally {
        await runtime.end();
      }
    });
    it('deletes only events older than TELEMETRY_RETENTION_DAYS, every organisation, in batches', async () => {
      expect(t.config.telemetryRetentionDays).toBe(30);
      const total = await owner(async (c) => Number((await c.query('select count(*) from telemetry_events')).rows[0].count));
      await plant(admin.tenant.id, days(45), 5, 'old-a');
      await plant(other.tenant.id, days(31), 4, 'old-b');
      await plant(admin.tenant.id, days(29), 3, 'recent-a');
      await plant(other.tenant.id, days(1), 2, 'recent-b');
      const swept = await sweepTelemetry({ db: t.database.db, clock, retentionDays: 30 }, { batch: 2, pauseMs: 0, budgetMs: 60_000 });
      expect(swept).toMatchObject({ deleted: 9, complete: true });
      expect([await count('old-a'), await count('old-b'), await count('recent-a'), await count('recent-b')]).toEqual([0, 0, 3, 2]);
      expect(await owner(async (c) => Number((await c.query('select count(*) from telemetry_events')).rows[0].count))).toBe(total + 5);
      // Again: nothing left to delete.
      expect((await sweepTelemetry({ db: t.database.db, clock, retentionDays: 30 })).deleted).toBe(0);
      // A sweep that runs out of budget stops, and the next carries on.
      await plant(admin.tenant.id, days(60), 5, 'old-c');
      expect(await sweepTelemetry({ db: t.database.db, clock, retentionDays: 30 }, { batch: 2, pauseMs: 0, budgetMs: 0 })).toMatchObject({ deleted: 2, complete: false });
      expect(await count('old-c')).toBe(3);
    });

  });
});
