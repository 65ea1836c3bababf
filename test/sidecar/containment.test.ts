import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';
import { eventually } from '../support/kubectl.js';
import { startPaymentsMcpServer } from '../support/mcp-server.js';
import { stop } from '../support/processes.js';
import { callError, mcpClient, postJson, sample, scrape, startSidecarProcess, type SidecarProcess } from './support.js';

/**
 * The sidecar tells the truth about a contained agent (suspended, revoked, gateway access off): a refusal
 * with the reason, never "Tollgate could not decide"; `tools/list` shows only what the agent may call; the
 * metrics count what happened. Real API on PostgreSQL, `tollgate sidecar` processes, a real MCP server
 * recording every call it gets, the SDK's MCP client as the agent.
 */
describe('tollgate sidecar: containment, filtered tools/list, metrics', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let payments: Awaited<ReturnType<typeof startPaymentsMcpServer>>;
  let filtered: SidecarProcess;
  let passthrough: SidecarProcess;
  let agentId: string;
  let otherId: string;
  let lookupId: string;
  const clients: Client[] = [];
  const confirm = { reason: 'sidecar containment test', confirm: true };
  const upstreams = (url: string) => JSON.stringify([{ name: 'payments', url, toolPrefix: 'payments' }]);
  const agentOf = async (base: string) => {
    const c = await mcpClient(base, 'payments');
    clients.push(c);
    return c;
  };
  const listed = async (c: Client) => (await c.listTools()).tools.map((x) => x.name).sort();
  const contain = async (id: string, op: string, body: Record<string, unknown> = {}) => {
    const res = await admin.client.post(api(`/agents/${id}/${op}`), { ...confirm, ...body });
    expect(res.statusCode).toBe(200);
  };
  const lookupAction = { tool: 'payments.lookup', target: 'mcp://payments/lookup', parameters: { payee: 'acme' } };

  beforeAll(async () => {
    t = await startTestApp({ env: { ALLOW_PRIVATE_ENDPOINTS: 'true', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const apiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    admin = await onboardAdmin(t.app);
    payments = await startPaymentsMcpServer();
    const server = (await admin.client.post(api('/mcp-servers'), { name: 'payments', endpoint: payments.url })).json();
    const tool = async (body: Record<string, unknown>) => (await admin.client.post(api('/tools'), { mcp_server_id: server.id, ...body })).json().id as string;
    lookupId = await tool({ tool_key: 'payments.lookup', name: 'Look up a payee', privilege_class: 'read' });
    await tool({ tool_key: 'payments.transfer', name: 'Transfer funds', privilege_class: 'financial' });
    // Two agents, each bound to lookup only: one behind a filtering sidecar, one behind a pass-through one.
    const agent = async (name: string) => {
      const a = (await admin.client.post(api('/agents'), { name })).json();
      const bound = await admin.client.post(api(`/agents/${a.id}/permissions`), { target_kind: 'tool', target_id: lookupId, actions: ['invoke'] });
      expect(bound.statusCode).toBe(201);
      return { id: a.id as string, identity: (await admin.client.post(api(`/agents/${a.id}/identities`))).json() };
    };
    const first = await agent('Filtered agent');
    const second = await agent('Pass-through agent');
    agentId = first.id;
    otherId = second.id;
    [filtered, passthrough] = await Promise.all([
      startSidecarProcess(apiUrl, first.identity, { TOLLGATE_MCP_UPSTREAMS: upstreams(payments.url), TOLLGATE_TOOLS_CACHE_SECONDS: '1' }),
      startSidecarProcess(apiUrl, second.identity, { TOLLGATE_MCP_UPSTREAMS: upstreams(payments.url), TOLLGATE_TOOLS_LIST: 'passthrough' }),
    ]);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    for (const s of [filtered, passthrough]) {
      await stop(s);
      if (s) rmSync(s.dir, { recursive: true, force: true });
    }
    await payments?.close();
    await t?.close().catch(() => undefined);
  });

  it('lists only the bound tool; a blocked tool disappears after the cache time and comes back when unblocked', async () => {
    const agent = await agentOf(filtered.base);
    expect(await listed(agent)).toEqual(['lookup']);
    const block = (blocked: boolean) => admin.client.post(api(`/tools/${lookupId}/block`), { blocked, ...confirm });
    expect((await block(true)).statusCode).toBe(200);
    await eventually(async () => (await listed(agent)).length === 0, 10_000, 'the blocked tool gone from tools/list');
    expect((await block(false)).statusCode).toBe(200);
    await eventually(async () => (await listed(agent)).includes('lookup'), 10_000, 'the unblocked tool back in tools/list');
  });

  it('passes tools/list through unfiltered when TOLLGATE_TOOLS_LIST=passthrough', async () => {
    expect(await listed(await agentOf(passthrough.base))).toEqual(['lookup', 'transfer']);
  });

  it('a suspended agent: -32001 AGENT_SUSPENDED, nothing forwarded, 403 agent_contained, an empty tools/list, logged as a refusal; restored, it works again', async () => {
    const agent = await agentOf(filtered.base);
    await agent.callTool({ name: 'lookup', arguments: { payee: 'warm-up' } }); // a token is cached
    const before = payments.calls.length;
    await contain(agentId, 'suspend');

    const err = await callError(agent.callTool({ name: 'lookup', arguments: { payee: 'acme' } }));
    expect(err.code).toBe(-32001);
    expect(err.data).toMatchObject({ decision: 'deny', contained: true, reason_codes: ['AGENT_SUSPENDED'] });
    expect(err.message).toMatch(/contained/);

    const action = await postJson(`${filtered.base}/v1/actions`, lookupAction);
    expect(action.status).toBe(403);
    expect(action.body.error).toMatchObject({ code: 'agent_contained', details: { reason_codes: ['AGENT_SUSPENDED'] } });
    const authorise = await postJson(`${filtered.base}/v1/actions/authorise`, lookupAction);
    expect(authorise.status).toBe(403);
    expect(authorise.body.error).toMatchObject({ code: 'agent_contained', details: { reason_codes: ['AGENT_SUSPENDED'] } });
    // The refusal dropped the cached permissions: the list is empty at once, not after the cache time.
    expect(await listed(agent)).toEqual([]);
    expect(payments.calls.length).toBe(before);

    const logs = filtered.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string });
    expect(logs.filter((l) => /contained/.test(l.msg)).map((l) => l.level)).toContain(30);
    expect(logs.filter((l) => /unavailable/i.test(l.msg))).toEqual([]);

    await contain(agentId, 'restore');
    await eventually(async () => (await listed(agent)).includes('lookup'), 10_000, 'the list back after restore');
    const result = await agent.callTool({ name: 'lookup', arguments: { payee: 'restored' } });
    expect(result.content).toEqual([{ type: 'text', text: 'payee restored: ACME Supplies Ltd' }]);
    expect(payments.calls.slice(before)).toEqual([{ name: 'lookup', args: { payee: 'restored' } }]);
  });

  it('gateway access off: -32001 GATEWAY_ACCESS_DISABLED from the decision, 403 agent_contained; on again, it works', async () => {
    const agent = await agentOf(filtered.base);
    const before = payments.calls.length;
    await contain(agentId, 'gateway-access', { enabled: false });
    const err = await callError(agent.callTool({ name: 'lookup', arguments: { payee: 'acme' } }));
    expect(err.code).toBe(-32001);
    expect(err.data).toMatchObject({ decision: 'deny', contained: true, reason_codes: ['GATEWAY_ACCESS_DISABLED'] });
    // The token still stands, so Tollgate decided and recorded it: the refusal names the action.
    expect((err.data as { action_id: string }).action_id).toMatch(/^[0-9a-f-]{36}$/);
    const action = await postJson(`${filtered.base}/v1/actions`, lookupAction);
    expect(action.status).toBe(403);
    expect(action.body.error).toMatchObject({ code: 'agent_contained', details: { reason_codes: ['GATEWAY_ACCESS_DISABLED'], result: { decision: 'deny' } } });
    expect(await listed(agent)).toEqual([]);
    expect(payments.calls.length).toBe(before);

    await contain(agentId, 'gateway-access', { enabled: true });
    await eventually(async () => (await listed(agent)).includes('lookup'), 10_000, 'the list back');
    await agent.callTool({ name: 'lookup', arguments: { payee: 'again' } });
    expect(payments.calls.length).toBe(before + 1);
  });

  it('a revoked agent: -32001 IDENTITY_REVOKED (its identities are revoked with it), nothing forwarded, 403 agent_contained', async () => {
    const agent = await agentOf(passthrough.base);
    await agent.callTool({ name: 'lookup', arguments: { payee: 'warm-up' } });
    const before = payments.calls.length;
    await contain(otherId, 'revoke');
    const err = await callError(agent.callTool({ name: 'lookup', arguments: { payee: 'acme' } }));
    expect(err.code).toBe(-32001);
    expect(err.data).toMatchObject({ decision: 'deny', contained: true, reason_codes: ['IDENTITY_REVOKED'] });
    const action = await postJson(`${passthrough.base}/v1/actions`, lookupAction);
    expect(action.status).toBe(403);
    expect(action.body.error).toMatchObject({ code: 'agent_contained', details: { reason_codes: ['IDENTITY_REVOKED'] } });
    expect(payments.calls.length).toBe(before);
  });

  it('serves /metrics on a listener of its own: the counters move with the calls made', async () => {
    const agent = await agentOf(filtered.base);
    const before = await scrape(filtered.metricsPort);
    await agent.callTool({ name: 'lookup', arguments: { payee: 'one' } });
    await agent.callTool({ name: 'lookup', arguments: { payee: 'two' } });
    await callError(agent.callTool({ name: 'transfer', arguments: { amount: 1, currency: 'EUR', payee: 'acme' } }));
    await agent.listTools();
    expect((await postJson(`${filtered.base}/v1/actions`, lookupAction)).status).toBe(200);
    expect((await postJson(`${filtered.base}/v1/actions`, { target: 1 })).status).toBe(400);
    const after = await scrape(filtered.metricsPort);

    const delta = (name: string, labels: Record<string, string>) => sample(after, name, labels) - sample(before, name, labels);
    const calls = 'tollgate_sidecar_calls_total';
    expect({
      mcpAllow: delta(calls, { kind: 'mcp_call', outcome: 'allow' }),
      mcpDeny: delta(calls, { kind: 'mcp_call', outcome: 'deny' }),
      listAllow: delta(calls, { kind: 'mcp_list', outcome: 'allow' }),
      actionAllow: delta(calls, { kind: 'action', outcome: 'allow' }),
      actionBad: delta(calls, { kind: 'action', outcome: 'bad_request' }),
      mcpUnavailable: delta(calls, { kind: 'mcp_call', outcome: 'unavailable' }),
      mcpObserved: delta('tollgate_sidecar_added_latency_seconds_count', { kind: 'mcp_call' }),
      actionObserved: delta('tollgate_sidecar_added_latency_seconds_count', { kind: 'action' }),
    }).toEqual({ mcpAllow: 2, mcpDeny: 1, listAllow: 1, actionAllow: 1, actionBad: 1, mcpUnavailable: 0, mcpObserved: 3, actionObserved: 2 });
    // What the earlier tests did is counted too: contained refusals, on both kinds.
    expect(sample(after, calls, { kind: 'mcp_call', outcome: 'contained' })).toBeGreaterThanOrEqual(2);
    expect(sample(after, calls, { kind: 'action', outcome: 'contained' })).toBeGreaterThanOrEqual(2);
    expect(sample(after, 'tollgate_sidecar_breaker_state')).toBe(0);
    expect(after.has('process_cpu_user_seconds_total')).toBe(true);

    // Only GET /metrics: nothing of the agent-facing interface is reachable there.
    expect((await fetch(`http://127.0.0.1:${filtered.metricsPort}/v1/actions`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${filtered.metricsPort}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});
