import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, asOwner, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';
import { startPaymentsMcpServer } from '../support/mcp-server.js';
import { freePort } from '../support/postgres-cluster.js';
import { ROOT, spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { eventually } from '../support/kubectl.js';

/**
 * `tollgate sidecar` as its own process, with the agent's workload identity in files, in front of the
 * real central API on PostgreSQL and two real MCP servers: our own (the SDK's McpServer, recording the
 * calls it gets) and @modelcontextprotocol/server-everything; the agent is the SDK's MCP client.
 */
describe('tollgate sidecar', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let payments: Awaited<ReturnType<typeof startPaymentsMcpServer>>;
  let everything: ChildProcess | undefined;
  let sidecar: ReturnType<typeof spawnTollgate>;
  let base: string;
  let dir: string;
  const agents: Client[] = [];

  const post = async (body: unknown) => (await admin.client.post(api('/tools'), body as Record<string, unknown>)).json();
  const mcpClient = async (upstream: string) => {
    const client = new Client({ name: 'test-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp/${upstream}`)));
    agents.push(client);
    return client;
  };
  const callError = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (err) {
      return err as McpError;
    }
    throw new Error('the call succeeded');
  };

  beforeAll(async () => {
    // The MCP servers run beside the API on loopback, which only the development setting lets be registered.
    t = await startTestApp({ env: { ALLOW_PRIVATE_ENDPOINTS: 'true' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const apiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    admin = await onboardAdmin(t.app);
    payments = await startPaymentsMcpServer();
    const everythingPort = await freePort();
    everything = spawn(
      process.execPath,
      [path.join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'streamableHttp'],
      { env: { PATH: process.env.PATH ?? '', PORT: String(everythingPort) }, stdio: 'ignore' },
    );
    const everythingUrl = `http://127.0.0.1:${everythingPort}/mcp`;

    // The registry: both servers, their tools as Tollgate knows them, an agent bound to them.
    const server = (await admin.client.post(api('/mcp-servers'), { name: 'payments', endpoint: payments.url })).json();
    const other = (await admin.client.post(api('/mcp-servers'), { name: 'everything', endpoint: everythingUrl })).json();
    const lookup = await post({ tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' });
    // Financial, on a server nobody approved: the baseline rule POL-006 denies it.
    const transfer = await post({ tool_key: 'payments.transfer', name: 'Transfer funds', mcp_server_id: server.id, privilege_class: 'financial' });
    const echo = await post({ tool_key: 'everything.echo', name: 'Echo', mcp_server_id: other.id, privilege_class: 'read' });
    const agent = (await admin.client.post(api('/agents'), { name: 'Sidecar agent' })).json();
    const tools = (await admin.client.get(api('/tools'))).json().items as { id: string; tool_key: string }[];
    const crm = tools.find((x) => x.tool_key === 'crm.lookup_customer')!;
    for (const tool of [lookup, transfer, echo, crm]) {
      const bound = await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
      expect(bound.statusCode).toBe(201);
    }
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    dir = mkdtempSync(path.join(tmpdir(), 'tollgate-sidecar-'));
    writeFileSync(path.join(dir, 'client-id'), `${identity.client_id}\n`);
    writeFileSync(path.join(dir, 'client-secret'), `${identity.client_secret}\n`);

    const port = await freePort();
    sidecar = spawnTollgate(['sidecar'], {
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_IDENTITY_DIR: dir,
      TOLLGATE_SIDECAR_PORT: String(port),
      TOLLGATE_SIDECAR_METRICS_PORT: '0',
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([
        { name: 'payments', url: payments.url, toolPrefix: 'payments' },
        { name: 'everything', url: everythingUrl, toolPrefix: 'everything' },
      ]),
    });
    base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 30_000, sidecar);
    await eventually(async () => (await fetch(everythingUrl, { method: 'GET' }).then((r) => r.status).catch(() => 0)) > 0, 20_000, 'server-everything');
  }, 120_000);

  afterAll(async () => {
    for (const a of agents) await a.close().catch(() => undefined);
    await stop(sidecar);
    await stop(everything);
    await payments?.close();
    await t?.close().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists from each upstream only the tools the agent may call', async () => {
    // transfer is bound too, but financial on an unreviewed server: every call is denied (POL-006), so it is not listed.
    const pay = await mcpClient('payments');
    expect((await pay.listTools()).tools.map((x) => x.name)).toEqual(['lookup']);
    // server-everything has a dozen tools; only echo is registered and bound.
    const ev = await mcpClient('everything');
    expect((await ev.listTools()).tools.map((x) => x.name)).toEqual(['echo']);
  });

  it('forwards an allowed tools/call, submitted first as an action', async () => {
    const pay = await mcpClient('payments');
    const before = payments.calls.length;
    const result = await pay.callTool({ name: 'lookup', arguments: { payee: 'acme' } });
    expect(result.content).toEqual([{ type: 'text', text: 'payee acme: ACME Supplies Ltd' }]);
    expect(payments.calls.slice(before)).toEqual([{ name: 'lookup', args: { payee: 'acme' } }]);
    // Tollgate recorded the decision.
    const actions = (await admin.client.get(api('/actions'))).json().items as { tool_key?: string; tool?: string; decision?: string }[];
    expect(JSON.stringify(actions)).toContain('payments.lookup');

    const ev = await mcpClient('everything');
    const echoed = await ev.callTool({ name: 'echo', arguments: { message: 'hello through Tollgate' } });
    expect(JSON.stringify(echoed.content)).toContain('hello through Tollgate');
  });

  it('answers concurrent calls of several agents, whose JSON-RPC ids collide, each with its own result', async () => {
    // One MCP Server per upstream serves every HTTP request: the ids each client numbers from 0 must not mix.
    const a = await mcpClient('payments');
    const b = await mcpClient('payments');
    const c = await mcpClient('payments');
    const calls = [a, b, c].flatMap((client, i) =>
      [0, 1, 2].map(async (j) => {
        const payee = `payee-${i}-${j}`;
        const result = await client.callTool({ name: 'lookup', arguments: { payee } });
        return { payee, text: (result.content as { text: string }[])[0]!.text };
      }),
    );
    for (const { payee, text } of await Promise.all(calls)) expect(text).toBe(`payee ${payee}: ACME Supplies Ltd`);
  });

  it('turns a deny into a JSON-RPC error with the reason codes, and forwards nothing', async () => {
    const pay = await mcpClient('payments');
    const before = payments.calls.length;
    const err = await callError(pay.callTool({ name: 'transfer', arguments: { amount: 5000, currency: 'EUR', payee: 'acme' } }));
    expect(err).toBeInstanceOf(McpError);
    expect(err.code).toBe(-32001);
    expect(err.data).toMatchObject({ decision: 'deny', reason_codes: ['UNTRUSTED_MCP_PRIVILEGED_TOOL'] });
    // A tool Tollgate does not know is denied as well.
    const ev = await mcpClient('everything');
    const unknown = await callError(ev.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }));
    expect(unknown.code).toBe(-32001);
    expect((unknown.data as { reason_codes: string[] }).reason_codes).toContain('UNKNOWN_TOOL');
    expect(payments.calls.length).toBe(before);
  });

  it('serves the gateway client flow on POST /v1/actions, a result for every decision', async () => {
    const allowed = await fetch(`${base}/v1/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } }),
    });
    expect(allowed.status).toBe(200);
    const result = (await allowed.json()) as Record<string, unknown>;
    expect(result).toMatchObject({ decision: 'allow', state: 'executed', executed: true, needs_approval: false });
    expect(result.idempotency_key).toMatch(/^sdk-[0-9a-f]{32}$/);
    expect(result).not.toHaveProperty('raw');

    const denied = await fetch(`${base}/v1/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 'agent-key-0001' },
      body: JSON.stringify({ tool: 'payments.transfer', target: 'mcp://payments/transfer', parameters: { amount: 1 } }),
    });
    expect(denied.status).toBe(200);
    expect((await denied.json()) as object).toMatchObject({ decision: 'deny', reason_codes: ['UNTRUSTED_MCP_PRIVILEGED_TOOL'], idempotency_key: 'agent-key-0001' });

    const authorise = await fetch(`${base}/v1/actions/authorise`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'payments.transfer', target: 'mcp://payments/transfer', parameters: { amount: 1 } }),
    });
    expect(authorise.status).toBe(403);
    expect(((await authorise.json()) as { error: object }).error).toMatchObject({ code: 'action_denied', details: { decision: 'deny' } });

    const bad = await fetch(`${base}/v1/actions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"target": 1}' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
  });

  it("passes the agent's Tollgate-Session on to Tollgate, on the gateway client flow and through the MCP proxy", async () => {
    const viaFlow = await fetch(`${base}/v1/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'tollgate-session': 'sidecar-run-1' },
      body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/7', parameters: { customer_id: '7' } }),
    });
    expect(viaFlow.status).toBe(200);
    const client = new Client({ name: 'session-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp/payments`), { requestInit: { headers: { 'tollgate-session': 'sidecar-run-1' } } }));
    agents.push(client);
    await client.callTool({ name: 'lookup', arguments: { payee: 'acme' } });
    const facts = await asOwner(t, async (c) =>
      (await c.query(`select facts from agent_sessions where org_id = $1 and session_key = 'id:sidecar-run-1'`, [admin.tenant.id])).rows.map((r) => r.facts),
    );
    expect(facts).toEqual([expect.objectContaining({ calls: 2, tools: { 'crm.lookup_customer': 1, 'payments.lookup': 1 } })]);

    const badFlow = await fetch(`${base}/v1/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'tollgate-session': 'not a session' },
      body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/7' }),
    });
    expect(badFlow.status).toBe(400);
    expect(((await badFlow.json()) as { error: { message: string } }).error.message).toMatch(/Tollgate-Session/);
    const badMcp = await fetch(`${base}/mcp/payments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'tollgate-session': 'not a session' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'lookup', arguments: {} } }),
    });
    expect(badMcp.status).toBe(400);
  });

  it('answers only callers that address it as loopback', async () => {
    // fetch may not set Host; node:http may, as a DNS-rebinding page's browser effectively does.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${base}/healthz`, { headers: { host: 'attacker.example.com' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(421);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it('fails closed when the central API stops: nothing is forwarded and the agent gets a clear error', async () => {
    const pay = await mcpClient('payments');
    await pay.callTool({ name: 'lookup', arguments: { payee: 'warm-up' } }); // a token is cached
    const before = payments.calls.length;
    t.app.server.closeAllConnections();
    await new Promise<void>((resolve) => t.app.server.close(() => resolve()));

    const err = await callError(pay.callTool({ name: 'lookup', arguments: { payee: 'acme' } }));
    expect(err.code).toBe(-32003);
    expect(err.message).toMatch(/nothing was forwarded/);
    expect(payments.calls.length).toBe(before);

    const res = await fetch(`${base}/v1/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42' }),
    });
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('gateway_unavailable');
  });
});
