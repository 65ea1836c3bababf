import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decide } from '../../api/modules/gateway/engine/decide.js';
import { effectivePermissions } from '../../api/modules/gateway/engine/tool-permissions.js';
import type { AgentView, BindingView, Snapshot, ToolView } from '../../api/modules/gateway/engine/types.js';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Permissions = { agent_id: string; contained: boolean; reason_codes: string[]; tools: { tool: string; constrained: boolean; privilege_class: string }[] };

/**
 * `GET /gateway/permissions` (an extension): the calling agent's containment state and the tools it may
 * invoke, for the sidecar's filtered tools/list. It must agree with the decisions `POST /actions` makes.
 */
describe('GET /gateway/permissions', () => {
  let t: TestApp;
  let a: Admin;
  let b: Admin;
  const confirm = { reason: 'sidecar permission test', confirm: true };

  async function agentWithToken(admin: Admin, name: string) {
    const agent = (await admin.client.post(api('/agents'), { name })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const exchange = () =>
      t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      });
    const token = (await exchange()).json().access_token as string;
    return { id: agent.id as string, token, exchange };
  }
  const permissions = (token: string) => t.app.inject({ url: api('/gateway/permissions'), headers: { authorization: `Bearer ${token}` } });
  const listed = async (token: string) => {
    const res = await permissions(token);
    expect(res.statusCode).toBe(200);
    return res.json() as Permissions;
  };
  const tool = async (admin: Admin, body: Record<string, unknown>) => {
    const res = await admin.client.post(api('/tools'), body);
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; tool_key: string };
  };
  const bind = async (admin: Admin, agentId: string, toolId: string, constraints: Record<string, unknown> = {}) => {
    const res = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'], constraints });
    expect(res.statusCode).toBe(201);
  };

  let server: { id: string };
  let agent: Awaited<ReturnType<typeof agentWithToken>>;
  const keys = { read: 'mcpperm.read', transfer: 'mcpperm.transfer', unbound: 'mcpperm.unbound', scoped: 'mcpperm.scoped', blocked: 'mcpperm.blocked' };

  beforeAll(async () => {
    t = await startTestApp({ env: { TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    a = await onboardAdmin(t.app, 'Alpha');
    b = await onboardAdmin(t.app, 'Beta');
    server = (await a.client.post(api('/mcp-servers'), { name: 'payments', endpoint: 'https://mcp.example.com/payments' })).json();
    const read = await tool(a, { tool_key: keys.read, name: 'Read', mcp_server_id: server.id, privilege_class: 'read' });
    const transfer = await tool(a, { tool_key: keys.transfer, name: 'Transfer', mcp_server_id: server.id, privilege_class: 'financial' });
    await tool(a, { tool_key: keys.unbound, name: 'Unbound', mcp_server_id: server.id, privilege_class: 'read' });
    const scoped = await tool(a, { tool_key: keys.scoped, name: 'Scoped', mcp_server_id: server.id, privilege_class: 'read' });
    const blocked = await tool(a, { tool_key: keys.blocked, name: 'Blocked', mcp_server_id: server.id, privilege_class: 'read' });
    agent = await agentWithToken(a, 'Listing agent');
    for (const x of [read, transfer, blocked]) await bind(a, agent.id, x.id);
    await bind(a, agent.id, scoped.id, { allowed_targets: ['mcp://payments/scoped'] });
    const res = await a.client.post(api(`/tools/${blocked.id}/block`), { blocked: true, ...confirm });
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => t?.close());

  it('lists the bound tools the agent may invoke: not unbound, not blocked, not privileged on an unreviewed server', async () => {
    const body = await listed(agent.token);
    expect(body).toMatchObject({ agent_id: agent.id, contained: false, reason_codes: [] });
    const mine = body.tools.filter((x) => x.tool.startsWith('mcpperm.'));
    expect(mine.map((x) => x.tool).sort()).toEqual([keys.read, keys.scoped]);
    // A binding with constraints allows some calls: listed, and marked.
    expect(mine.find((x) => x.tool === keys.scoped)).toMatchObject({ constrained: true });
    expect(mine.find((x) => x.tool === keys.read)).toMatchObject({ constrained: false, privilege_class: 'read' });
  });

  it('lists a privileged tool once its server is approved, as the decision allows it then', async () => {
    const approve = await a.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: 'approved', reason: 'security review done' });
    expect(approve.statusCode).toBe(200);
    try {
      expect((await listed(agent.token)).tools.map((x) => x.tool)).toContain(keys.transfer);
    } finally {
      await a.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: 'unknown', reason: 'back to unreviewed' });
    }
    expect((await listed(agent.token)).tools.map((x) => x.tool)).not.toContain(keys.transfer);
  });

  it('agrees with POST /actions: every tool of the organisation listed exactly when a call to it is not refused on the registry', async () => {
    const body = await listed(agent.token);
    const all = (await a.client.get(api('/tools'))).json().items as { tool_key: string }[];
    let n = 0;
    for (const { tool_key } of all) {
      const res = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': `perm-${++n}-${Date.now()}` },
        payload: { tool: tool_key, operation: 'invoke', target: `mcp://payments/${tool_key.split('.')[1]}`, parameters: {} },
      });
      expect(res.statusCode).toBe(200);
      const decided = res.json().decision.decision as string;
      const isListed = body.tools.some((x) => x.tool === tool_key);
      expect({ tool_key, listed: isListed }).toEqual({ tool_key, listed: decided !== 'deny' });
    }
  });

  it('answers an agent token only: a session cookie is refused', async () => {
    const res = await a.client.get(api('/gateway/permissions'));
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe('unauthenticated');
    const none = await t.app.inject({ url: api('/gateway/permissions') });
    expect(none.statusCode).toBe(401);
  });

  it("shows another organisation's agent only its own organisation's tools and its own bindings", async () => {
    const own = await tool(b, { tool_key: 'betaonly.read', name: 'Beta read', privilege_class: 'read' });
    const other = await agentWithToken(b, 'Beta agent');
    await bind(b, other.id, own.id);
    const body = await listed(other.token);
    expect(body.agent_id).toBe(other.id);
    expect(body.tools.map((x) => x.tool)).toEqual(['betaonly.read']);
    // And Alpha's agent does not see Beta's tool.
    expect((await listed(agent.token)).tools.map((x) => x.tool)).not.toContain('betaonly.read');
  });

  it('a contained agent: gateway access off lists nothing, with its reason; a suspended one cannot authenticate and the exchange says why', async () => {
    const other = await agentWithToken(a, 'Contained agent');
    const read = (await a.client.get(api('/tools'))).json().items.find((x: { tool_key: string }) => x.tool_key === keys.read);
    await bind(a, other.id, read.id);
    expect((await listed(other.token)).tools.map((x) => x.tool)).toContain(keys.read);

    const off = await a.client.post(api(`/agents/${other.id}/gateway-access`), { enabled: false, ...confirm });
    expect(off.statusCode).toBe(200);
    expect(await listed(other.token)).toMatchObject({ contained: true, reason_codes: ['GATEWAY_ACCESS_DISABLED'], tools: [] });
    await a.client.post(api(`/agents/${other.id}/gateway-access`), { enabled: true, ...confirm });

    expect((await a.client.post(api(`/agents/${other.id}/suspend`), confirm)).statusCode).toBe(200);
    const refused = await permissions(other.token);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe('session_revoked');
    const exchange = await other.exchange();
    expect(exchange.statusCode).toBe(401);
    expect(exchange.json().error).toMatchObject({ code: 'session_revoked', details: { reason: 'agent_suspended' } });

    expect((await a.client.post(api(`/agents/${other.id}/revoke`), confirm)).statusCode).toBe(200);
    const revoked = await other.exchange();
    expect(revoked.json().error).toMatchObject({ code: 'identity_revoked', details: { reason: 'identity_revoked' } });
  });
});

describe('GET /gateway/permissions: the gateway rate limit', () => {
  it("spends the agent's gateway budget, shared with POST /actions: past it, 429 rate_limited in the spec's envelope", async () => {
    const t = await startTestApp({ env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '3' } });
    try {
      const admin = await onboardAdmin(t.app);
      const agent = (await admin.client.post(api('/agents'), { name: 'Busy agent' })).json();
      const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
      const token = (
        await t.app.inject({
          method: 'POST',
          url: api('/identities/token'),
          payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
        })
      ).json().access_token as string;
      const read = () => t.app.inject({ url: api('/gateway/permissions'), headers: { authorization: `Bearer ${token}` } });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await read()).statusCode);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await read();
      expect(refused.json().error.code).toBe('rate_limited');
      // The budget is the agent's, as for submissions: a submission is refused too now.
      const submission = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'busy-agent-0001' },
        payload: { tool: 'crm.lookup_customer', target: 'crm://customers/42' },
      });
      expect(submission.statusCode).toBe(429);
    } finally {
      await t.close();
    }
  });
});

describe('effectivePermissions: the engine steps on a probe call, the same answer as decide()', () => {
  const now = '2026-11-26T00:00:00.000Z';
  const agent: AgentView = { id: 'agent-1', status: 'active', gatewayAccess: true, environment: 'production', criticality: 'high', dataClassification: 'internal' };
  const tool = (key: string, over: Partial<ToolView> = {}): ToolView => ({
    id: `id-${key}`,
    key,
    privilegeClass: 'read',
    approvalClass: 'none',
    blocked: false,
    mcpServerId: 'srv-ok',
    definitionHash: 'h1',
    ...over,
  });
  const binding = (targetId: string, over: Partial<BindingView> = {}): BindingView => ({
    id: `b-${targetId}`,
    targetKind: 'tool',
    targetId,
    actions: ['invoke'],
    constraints: {},
    expiresAt: null,
    identityId: null,
    ...over,
  });
  const tools = [
    tool('t.plain'),
    tool('t.expired'),
    tool('t.other_identity'),
    tool('t.server_wide', { mcpServerId: 'srv-wide' }),
    tool('t.repinned', { definitionHash: 'h2' }),
    tool('t.write_quarantined', { privilegeClass: 'write', mcpServerId: 'srv-bad' }),
    tool('t.write_approved', { privilegeClass: 'write' }),
    tool('t.destructive_denied_class', { privilegeClass: 'destructive' }),
    tool('t.read_only_binding'),
    tool('t.dual_approval', { approvalClass: 'dual' }),
    tool('t.amount_capped'),
  ];
  const snapshot: Snapshot = {
    tools: Object.fromEntries(tools.map((x) => [x.key, x])),
    mcpServers: { 'srv-ok': { trustState: 'approved' }, 'srv-bad': { trustState: 'quarantined' }, 'srv-wide': { trustState: 'unknown' } },
    bindings: [
      binding('id-t.plain'),
      binding('id-t.expired', { expiresAt: '2026-11-25T00:00:00.000Z' }),
      binding('id-t.other_identity', { identityId: 'identity-2' }),
      { ...binding('srv-wide'), targetKind: 'mcp_server' },
      binding('id-t.repinned', { pinnedDefinitionHash: 'h1' }),
      binding('id-t.write_quarantined'),
      binding('id-t.write_approved'),
      binding('id-t.destructive_denied_class'),
      binding('id-t.read_only_binding', { actions: ['read'] }),
      binding('id-t.dual_approval'),
      binding('id-t.amount_capped', { constraints: { max_amount: 10 } }),
    ],
    delegations: [],
    denyClassRules: [{ id: 'DC-1', privilegeClass: 'destructive', agentId: 'agent-1' }],
    rules: [],
  };

  it('lists exactly the tools a call with no arguments is not denied on', () => {
    const listed = effectivePermissions(agent, 'identity-1', snapshot, now).tools.map((x) => x.tool.key);
    expect(listed).toEqual(['t.amount_capped', 't.dual_approval', 't.plain', 't.server_wide', 't.write_approved']);
    for (const x of tools) {
      const d = decide({ agent, identityId: 'identity-1', action: { tool: x.key, operation: 'invoke', target: '', parameters: {} }, now }, snapshot);
      expect({ tool: x.key, listed: listed.includes(x.key) }).toEqual({ tool: x.key, listed: d.decision !== 'deny' });
    }
  });

  it('keeps a tool whose binding needs arguments the probe lacks, marked constrained', () => {
    const constrained = { ...snapshot, bindings: [binding('id-t.plain', { constraints: { allowed_targets: ['mcp://x/*'] } })] };
    expect(effectivePermissions(agent, 'identity-1', constrained, now).tools.map((x) => [x.tool.key, x.constrained])).toEqual([['t.plain', true]]);
  });

  it.each([
    [{ status: 'suspended' as const }, ['AGENT_SUSPENDED']],
    [{ status: 'revoked' as const }, ['AGENT_REVOKED']],
    [{ gatewayAccess: false }, ['GATEWAY_ACCESS_DISABLED']],
  ])('a contained agent (%o) may call nothing: %o', (change, codes) => {
    expect(effectivePermissions({ ...agent, ...change }, 'identity-1', snapshot, now)).toEqual({ contained: true, reasonCodes: codes, tools: [] });
  });
});
