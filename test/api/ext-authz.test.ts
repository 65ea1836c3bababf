import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, asOwner, onboardAdmin, publishRulesAsOwner, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Json = Record<string, any>;

/**
 * The MCP ext_authz check, driven with exactly the request an HTTP ext_authz client sends for the
 * configuration in docs/integrations.md: Envoy's `http_service` with `path_prefix:
 * /api/v1/access/v1/ext-authz/mcp/<prefix>` (the original method and path behind the prefix), the headers
 * it always sends (Host, Authorization, Content-Length) and the ones the snippet allows (content-type,
 * tollgate-session, mcp-session-id, mcp-protocol-version, x-envoy-auth-partial-body), and, with
 * `with_request_body`, the agent's JSON-RPC body as it sent it. Envoy allows only on 200.
 */
const CHECK = (prefix: string, upstreamPath = '/mcp') => api(`/access/v1/ext-authz/mcp/${prefix}${upstreamPath}`);

const call = (id: number | string, name: string, args: Json = {}) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });

describe('MCP ext_authz check (HTTP service mode)', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Admin;
  let tools: Record<string, { id: string }>;
  let me: { agentId: string; token: string };
  let keyN = 0;
  const key = () => `ext-authz-test-${Date.now()}-${++keyN}`;

  /** What Envoy sends: the original method, the prefixed path, the allowed headers, the body as the agent sent it. */
  const envoy = (
    prefix: string,
    body: unknown,
    opts: { bearer?: string | null; headers?: Record<string, string>; method?: 'POST' | 'GET' | 'DELETE' | 'PUT'; upstreamPath?: string; app?: TestApp } = {},
  ) => {
    const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
    const bearer = opts.bearer === undefined ? me.token : opts.bearer;
    return (opts.app ?? t).app.inject({
      method: opts.method ?? 'POST',
      url: CHECK(prefix, opts.upstreamPath),
      headers: {
        host: 'mcp.example.com',
        ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
        'content-length': String(Buffer.byteLength(text)),
        ...(text ? { 'content-type': 'application/json', 'x-envoy-auth-partial-body': 'false' } : {}),
        'mcp-protocol-version': '2025-06-18',
        'mcp-session-id': 'c0ffee00-mcp-session',
        ...opts.headers,
      },
      ...(text ? { payload: text } : {}),
    });
  };

  async function agentToken(client: Admin['client'], name: string) {
    const agent = (await client.post(api('/agents'), { name })).json();
    const identity = (await client.post(api(`/agents/${agent.id}/identities`))).json();
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    return { agentId: agent.id as string, token: res.json().access_token as string };
  }

  async function bind(client: Admin['client'], agent: string, toolKey: string, toolId = tools[toolKey]!.id, constraints: Json = {}) {
    const res = await client.post(api(`/agents/${agent}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'], constraints });
    expect(res.statusCode).toBe(201);
  }

  const actionCount = (agentId: string) =>
    asOwner(t, async (c) => Number((await c.query('select count(*) from action_requests where agent_id = $1', [agentId])).rows[0].count));

  const expectMalformed = (res: { statusCode: number; body: string; json(): any }, field: string) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.code).toBe('bad_request');
    expect(res.json().error.details.map((d: { field: string }) => d.field)).toContain(field);
    expect(res.json().error.message).toContain(res.json().error.details[0].field);
  };

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0', RATE_LIMIT_GATEWAY_PER_MINUTE: '10000' } });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
    me = await agentToken(admin.client, 'MCP agent behind Envoy');
    await bind(admin.client, me.agentId, 'crm.lookup_customer');
    await bind(admin.client, me.agentId, 'payments.create_payment', undefined, { max_amount: 500, currency: 'EUR' });
  });
  afterAll(async () => t.close());

  describe('a tools/call is a gateway decision', () => {
    it('allows a bound tool with 200, recorded as POST /actions records it (tool, operation, target, parameters, evidence)', async () => {
      const before = await actionCount(me.agentId);
      const res = await envoy('crm', call(7, 'lookup_customer', { customer_id: '42' }));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['tollgate-decision']).toBe('allow');
      const body = res.json();
      expect(body).toMatchObject({ decision: 'allow', decisions: [{ id: 7, tool: 'crm.lookup_customer', decision: 'allow', reason_codes: ['PERMISSION_GRANTED'] }] });
      const actionId = body.decisions[0].action.id;
      expect(res.headers['tollgate-action-ids']).toBe(actionId);
      expect(await actionCount(me.agentId)).toBe(before + 1);
      const action = (await admin.client.get(api(`/actions/${actionId}`))).json();
      expect(action).toMatchObject({
        agent_id: me.agentId,
        source: 'gateway',
        tool: 'crm.lookup_customer',
        operation: 'invoke',
        target: 'mcp://crm/lookup_customer',
        parameters: { customer_id: '42' },
        decision: 'allow',
        reason_codes: ['PERMISSION_GRANTED'],
      });
      expect(action.idempotency_key).toMatch(/^ext-authz-/);
      const kinds = (await admin.client.get(api(`/evidence?action_request_id=${actionId}`))).json().items.map((e: { event_type: string }) => e.event_type);
      expect(kinds).toContain('decision');
    });

    it('takes any upstream path behind the prefix, with or without a query string', async () => {
      for (const upstreamPath of ['/', '/v1/mcp', '/mcp?tenant=a']) {
        const res = await envoy('crm', call(1, 'lookup_customer'), { upstreamPath });
        expect(res.statusCode, `${upstreamPath}: ${res.body}`).toBe(200);
      }
    });

    it('denies an unbound tool with 403: the decision, reason codes and action in the body and headers Envoy passes to the client', async () => {
      const res = await envoy('email', call('a-1', 'send_message', { to: 'x@example.com' }));
      expect(res.statusCode).toBe(403);
      expect(res.headers['tollgate-decision']).toBe('deny');
      expect(res.headers['tollgate-reason-codes']).toBe('PERMISSION_NOT_GRANTED');
      const { error } = res.json();
      expect(error.code).toBe('forbidden');
      expect(error.message).toContain('email.send_message: deny (PERMISSION_NOT_GRANTED)');
      expect(error.details).toMatchObject({ decision: 'deny', decisions: [{ id: 'a-1', tool: 'email.send_message', decision: 'deny', approval: null }] });
      const actionId = error.details.decisions[0].action.id;
      expect(res.headers['tollgate-action-ids']).toBe(actionId);
      const action = (await admin.client.get(api(`/actions/${actionId}`))).json();
      expect(action).toMatchObject({ tool: 'email.send_message', target: 'mcp://email/send_message', decision: 'deny', reason_codes: ['PERMISSION_NOT_GRANTED'] });
    });

    it('refuses a call that needs approval with 403 and the approval opened for it', async () => {
      const res = await envoy('payments', call(3, 'create_payment', { amount: 200, currency: 'EUR', payee: 'acme' }));
      expect(res.statusCode).toBe(403);
      expect(res.headers['tollgate-decision']).toBe('require_approval');
      const { error } = res.json();
      expect(error.details).toMatchObject({
        decision: 'require_approval',
        decisions: [{ tool: 'payments.create_payment', decision: 'require_approval', approval: { status: 'pending', approvals_required: 1 } }],
      });
      const [d] = error.details.decisions;
      const action = (await admin.client.get(api(`/actions/${d.action.id}`))).json();
      expect(action).toMatchObject({ decision: 'require_approval', state: 'approval_required', parameters: { amount: 200, currency: 'EUR', payee: 'acme' } });
      const approval = (await admin.client.get(api(`/approvals/${d.approval.id}`))).json();
      expect(approval.status).toBe('pending');
    });

    it('runs an approved call once: the same call with the idempotency key and approval token in _meta, then never again', async () => {
      const approver = await addMember(t.app, admin.client, ['approver']);
      const args = { amount: 120, currency: 'EUR', payee: 'acme' };
      const first = await envoy('payments', call(1, 'create_payment', args));
      expect(first.statusCode).toBe(403);
      const [d] = first.json().error.details.decisions;
      expect(d).toMatchObject({ decision: 'require_approval', replayed: false, idempotency_key: expect.stringMatching(/^ext-authz-/) });
      // Before the approval is decided, the same key answers the pending decision again: still refused.
      const meta = { 'tollgate.dev/idempotency_key': d.idempotency_key };
      const pending = await envoy('payments', { ...call(2, 'create_payment', args), params: { name: 'create_payment', arguments: args, _meta: meta } });
      expect(pending.statusCode).toBe(403);
      expect(pending.json().error.details.decisions[0]).toMatchObject({ decision: 'require_approval', replayed: true, action: { id: d.action.id } });
      expect((await approver.client.post(api(`/approvals/${d.approval.id}/decision`), { decision: 'approve', reason: 'invoice checked' })).json().status).toBe('approved');
      const view = (await t.app.inject({ url: api(`/actions/gateway/${d.action.id}`), headers: { authorization: `Bearer ${me.token}` } })).json();
      const withToken = { ...meta, 'tollgate.dev/approval_token': view.approval.approval_token as string };
      const run = await envoy('payments', { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'create_payment', arguments: args, _meta: withToken } });
      expect(run.statusCode, run.body).toBe(200);
      expect(run.json().decisions[0]).toMatchObject({ decision: 'allow', reason_codes: ['PERMISSION_GRANTED', 'APPROVAL_GRANTED'], replayed: false, action: { id: d.action.id } });
      // The proxy would forward the call again: a replay of the allow is refused, and the token is spent.
      const again = await envoy('payments', { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'create_payment', arguments: args, _meta: withToken } });
      expect(again.statusCode).toBe(403);
      expect(again.headers['tollgate-decision']).toBe('deny');
      expect(again.headers['tollgate-reason-codes']).toBe('');
      expect(again.json().error.message).toContain('allowed once already');
      expect(again.json().error.details.decisions[0]).toMatchObject({ decision: 'allow', replayed: true });
      // Other arguments under the key: the gateway's idempotency conflict, passed on by the proxy.
      const other = await envoy('payments', { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'create_payment', arguments: { ...args, amount: 121 }, _meta: withToken } });
      expect(other.statusCode).toBe(409);
      expect(other.json().error.code).toBe('idempotency_conflict');
    });

    it('decides every tools/call of a batch: one refused call refuses the request, and every decision is recorded', async () => {
      const before = await actionCount(me.agentId);
      const res = await envoy('crm', [call(1, 'lookup_customer', { customer_id: '1' }), call(2, 'delete_customer', { customer_id: '1' }), { jsonrpc: '2.0', method: 'notifications/progress', params: {} }]);
      expect(res.statusCode).toBe(403);
      const { details } = res.json().error;
      expect(details.decisions.map((d: Json) => [d.id, d.tool, d.decision])).toEqual([
        [1, 'crm.lookup_customer', 'allow'],
        [2, 'crm.delete_customer', 'deny'],
      ]);
      expect(res.headers['tollgate-action-ids']).toBe(details.decisions.map((d: Json) => d.action.id).join(','));
      expect(await actionCount(me.agentId)).toBe(before + 2);
      const allowed = await envoy('crm', [call(1, 'lookup_customer'), call(2, 'lookup_customer', { customer_id: '2' })]);
      expect(allowed.statusCode).toBe(200);
      expect(allowed.json().decisions).toHaveLength(2);
    });

    it('decides a tools/call sent without an id (as a notification) too', async () => {
      const { id: _id, ...notification } = call(0, 'send_message');
      const res = await envoy('email', notification);
      expect(res.statusCode).toBe(403);
      expect(res.json().error.details.decisions).toMatchObject([{ id: null, decision: 'deny' }]);
    });

    it("puts the call in the agent's Tollgate-Session, the session POST /actions names", async () => {
      const rule = { id: 'R-1', effect: 'deny', reason_code: 'LOOKUPS_PER_SESSION', conditions: [{ field: 'session.same_tool_calls', op: 'gte', value: 2 }] };
      const policy = await publishRulesAsOwner(t, admin.tenant.id, 'pol-ext-session', [rule]);
      try {
        const session = `s-${key()}`;
        const inSession = () => envoy('crm', call(1, 'lookup_customer'), { headers: { 'tollgate-session': session } });
        expect((await inSession()).statusCode).toBe(200);
        const viaActions = await t.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${me.token}`, 'idempotency-key': key(), 'tollgate-session': session },
          payload: { tool: 'crm.lookup_customer', target: 'mcp://crm/lookup_customer' },
        });
        expect(viaActions.json().decision.decision).toBe('allow');
        const third = await inSession();
        expect(third.statusCode).toBe(403);
        expect(third.headers['tollgate-reason-codes']).toBe('LOOKUPS_PER_SESSION');
        // Another session starts afresh.
        expect((await envoy('crm', call(1, 'lookup_customer'), { headers: { 'tollgate-session': `s-${key()}` } })).statusCode).toBe(200);
      } finally {
        await policy.retire();
      }
    });
  });

  describe('MCP traffic that holds no tool call', () => {
    it('allows initialize, notifications, tools/list, ping and responses with 200, deciding and recording nothing', async () => {
      const before = await actionCount(me.agentId);
      const messages = [
        { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'agent', version: '1' } } },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
        { jsonrpc: '2.0', id: 2, method: 'ping' },
        { jsonrpc: '2.0', id: 'srv-1', result: { content: [] } },
        [{ jsonrpc: '2.0', id: 3, method: 'tools/list' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }],
      ];
      for (const m of messages) {
        const res = await envoy('crm', m);
        expect(res.statusCode, JSON.stringify(m)).toBe(200);
        expect(res.json()).toEqual({ decision: 'allow', decisions: [] });
      }
      expect(await actionCount(me.agentId)).toBe(before);
    });

    it("allows the agent's SSE stream (GET) and session end (DELETE) with a valid token; other methods answer 405", async () => {
      const before = await actionCount(me.agentId);
      for (const method of ['GET', 'DELETE'] as const) {
        const res = await envoy('crm', undefined, { method });
        expect(res.statusCode, method).toBe(200);
        expect(res.json()).toEqual({ decision: 'allow', decisions: [] });
        expect((await envoy('crm', undefined, { method, bearer: null })).statusCode).toBe(401);
      }
      const put = await envoy('crm', call(1, 'lookup_customer'), { method: 'PUT' });
      expect(put.statusCode).toBe(405);
      expect(await actionCount(me.agentId)).toBe(before);
    });
  });

  describe('refusals', () => {
    it('answers 400 naming the field for a body that is not a JSON-RPC message, decides nothing', async () => {
      const before = await actionCount(me.agentId);
      const cases: Array<[unknown, string, Record<string, string>?]> = [
        [{ hello: 'world' }, 'jsonrpc'],
        [{ jsonrpc: '1.0', id: 1, method: 'tools/call' }, 'jsonrpc'],
        [{ jsonrpc: '2.0', id: 1 }, 'body'],
        [[], 'body'],
        ['"tools/call"', 'body'],
        [Array.from({ length: 51 }, (_, i) => call(i, 'lookup_customer')), 'body'],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} }, 'params.name'],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'has space' } }, 'params.name'],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup_customer', arguments: 'all' } }, 'params.arguments'],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: ['lookup_customer'] }, 'params'],
        [[call(1, 'lookup_customer'), { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { arguments: {} } }], '1.params.name'],
        [call(1, 'lookup_customer'), 'header.x-envoy-auth-partial-body', { 'x-envoy-auth-partial-body': 'true' }],
        [call(1, 'lookup_customer'), 'header.tollgate-session', { 'tollgate-session': 'has spaces' }],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup_customer', _meta: { 'tollgate.dev/idempotency_key': 'short' } } }, 'params._meta.tollgate.dev/idempotency_key'],
        // A repeated key: JSON.parse keeps the last, an MCP server's parser may keep the first (a ping here, a call there).
        ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_message"},"method":"ping"}', 'method'],
        ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send_message"},"\\u006dethod":"ping"}', 'method'],
        ['[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lookup_customer","name":"send_message"}}]', '1.params.name'],
        [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup_customer', _meta: { 'tollgate.dev/approval_token': 'x' } } }, 'params._meta.tollgate.dev/approval_token'],
      ];
      for (const [body, field, headers] of cases) expectMalformed(await envoy('crm', body, { headers }), field);
      // No body: the proxy was not told to include it (Envoy's with_request_body).
      const empty = await envoy('crm', undefined);
      expectMalformed(empty, 'body');
      expect(empty.json().error.message).toContain('with_request_body');
      const notJson = await envoy('crm', '{"jsonrpc": ');
      expect(notJson.statusCode).toBe(400);
      expectMalformed(await envoy('bad prefix', call(1, 'x')), 'path.prefix');
      // Without its Content-Type (not in allowed_headers), or another one, the body is refused, never decided.
      expectMalformed(await envoy('crm', call(1, 'lookup_customer'), { headers: { 'content-type': '' } }), 'header.content-type');
      expectMalformed(await envoy('crm', call(1, 'lookup_customer'), { headers: { 'content-type': 'text/plain' } }), 'header.content-type');
      expect(await actionCount(me.agentId)).toBe(before);
    });

    it('answers 401 without the agent token, with a foreign or forged one, and for a person', async () => {
      const before = await actionCount(me.agentId);
      expect((await envoy('crm', call(1, 'lookup_customer'), { bearer: null })).statusCode).toBe(401);
      expect((await envoy('crm', call(1, 'lookup_customer'), { bearer: `${me.token.slice(0, -4)}AAAA` })).statusCode).toBe(401);
      // A token another Tollgate (another signing key) issued.
      const other = await startTestApp({ env: { TOKEN_SIGNING_SEED: 'f'.repeat(64) } });
      try {
        const otherAdmin = await onboardAdmin(other.app);
        const agent = (await otherAdmin.client.post(api('/agents'), { name: 'Elsewhere' })).json();
        const identity = (await otherAdmin.client.post(api(`/agents/${agent.id}/identities`))).json();
        const foreign = (
          await other.app.inject({
            method: 'POST',
            url: api('/identities/token'),
            payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
          })
        ).json().access_token as string;
        const res = await envoy('crm', call(1, 'lookup_customer'), { bearer: foreign });
        expect(res.statusCode).toBe(401);
        expect(res.json()).not.toHaveProperty('decisions');
      } finally {
        await other.close();
      }
      const person = await admin.client.post(CHECK('crm'), call(1, 'lookup_customer'));
      expect(person.statusCode).toBe(401);
      expect(await actionCount(me.agentId)).toBe(before);
    });

    it("decides another organisation's agent in its own organisation only", async () => {
      const otherAdmin = await onboardAdmin(t.app);
      await setPlan(t, otherAdmin.tenant.id, 'enterprise');
      const outsider = await agentToken(otherAdmin.client, 'Outsider');
      const res = await envoy('crm', call(1, 'lookup_customer'), { bearer: outsider.token });
      // Not bound in its organisation: denied there, and invisible here.
      expect(res.statusCode).toBe(403);
      const actionId = res.json().error.details.decisions[0].action.id;
      expect((await admin.client.get(api(`/actions/${actionId}`))).statusCode).toBe(404);
      expect((await otherAdmin.client.get(api(`/actions/${actionId}`))).json().agent_id).toBe(outsider.agentId);
    });

    it("counts each tools/call, and each GET or DELETE, on the agent's gateway budget shared with POST /actions", async () => {
      const small = await startTestApp({ share: t, clock, env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '4', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
      try {
        const agent = await agentToken(admin.client, 'Budgeted MCP agent');
        await bind(admin.client, agent.agentId, 'crm.lookup_customer');
        const opts = { bearer: agent.token, app: small };
        expect((await envoy('crm', call(1, 'lookup_customer'), opts)).statusCode).toBe(200);
        expect((await envoy('crm', [call(2, 'lookup_customer'), call(3, 'lookup_customer')], opts)).statusCode).toBe(200);
        // Messages with no tool call decide nothing and are not counted.
        expect((await envoy('crm', { jsonrpc: '2.0', id: 4, method: 'tools/list' }, opts)).statusCode).toBe(200);
        expect((await envoy('crm', undefined, { ...opts, method: 'GET' })).statusCode).toBe(200);
        const over = await envoy('crm', call(5, 'lookup_customer'), opts);
        expect(over.statusCode).toBe(429);
        expect(over.json().error.code).toBe('rate_limited');
        expect((await envoy('crm', undefined, { ...opts, method: 'GET' })).statusCode).toBe(429);
        const action = await small.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': key() },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/1' },
        });
        expect(action.statusCode).toBe(429);
      } finally {
        await small.close();
      }
    });
  });
});
