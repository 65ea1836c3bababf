import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch, Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';
import { startPaymentsMcpServer } from '../support/mcp-server.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';
import { eventually } from '../support/kubectl.js';
import { identityDir } from './support.js';

/** Exit code and output of a process that is expected to stop by itself. */
async function exited(child: ReturnType<typeof spawnTollgate>): Promise<{ code: number | null; output: string }> {
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, output: child.output() };
}

/**
 * `tollgate sidecar` with TOLLGATE_SIDECAR_SOCKET (issue 20, point 4): the gateway client flow and the MCP proxy
 * over a Unix domain socket, beside the loopback port; the socket file's lifecycle (mode, a stale one removed,
 * a live one or a missing directory refused); and the MCP transport's HTTP rules, which the proxy now answers
 * itself instead of the SDK's server transport.
 */
describe('tollgate sidecar on a Unix domain socket', () => {
  let t: TestApp;
  let apiUrl: string;
  let payments: Awaited<ReturnType<typeof startPaymentsMcpServer>>;
  let identity: { client_id: string; client_secret: string };
  let sidecar: ReturnType<typeof spawnTollgate>;
  let base: string;
  const dirs: string[] = [];
  const socketDir = () => {
    const d = mkdtempSync(path.join(tmpdir(), 'tg-sock-'));
    dirs.push(d);
    return d;
  };
  let socket: string;
  let overSocket: Agent;

  const sidecarEnv = async (extra: Record<string, string>) => {
    const dir = identityDir(identity);
    dirs.push(dir);
    return {
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_IDENTITY_DIR: dir,
      TOLLGATE_SIDECAR_PORT: String(await freePort()),
      TOLLGATE_SIDECAR_METRICS_PORT: 'off',
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: payments.url, toolPrefix: 'payments' }]),
      ...extra,
    };
  };

  beforeAll(async () => {
    t = await startTestApp({ env: { ALLOW_PRIVATE_ENDPOINTS: 'true' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    apiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const admin = await onboardAdmin(t.app);
    payments = await startPaymentsMcpServer();
    const server = (await admin.client.post(api('/mcp-servers'), { name: 'payments', endpoint: payments.url })).json();
    const lookup = (await admin.client.post(api('/tools'), { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' })).json();
    const agent = (await admin.client.post(api('/agents'), { name: 'Socket agent' })).json();
    const tools = (await admin.client.get(api('/tools'))).json().items as { id: string; tool_key: string }[];
    for (const tool of [lookup, tools.find((x) => x.tool_key === 'crm.lookup_customer')!]) {
      expect((await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] })).statusCode).toBe(201);
    }
    identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();

    socket = path.join(socketDir(), 'sidecar.sock');
    const env = await sidecarEnv({ TOLLGATE_SIDECAR_SOCKET: socket });
    sidecar = spawnTollgate(['sidecar'], env);
    base = `http://127.0.0.1:${env.TOLLGATE_SIDECAR_PORT}`;
    await waitForHttp(`${base}/healthz`, 30_000, sidecar);
    overSocket = new Agent({ connect: { socketPath: socket } });
  }, 120_000);

  afterAll(async () => {
    await overSocket?.close();
    await stop(sidecar);
    await payments?.close();
    await t?.close().catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('listens on the socket, which any container of the pod may use, and on the loopback port', async () => {
    const stat = statSync(socket);
    expect(stat.isSocket()).toBe(true);
    expect(stat.mode & 0o777).toBe(0o666);
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
  });

  it('serves the gateway client flow over the socket, whatever Host the agent names', async () => {
    const pool = new Pool('http://localhost', { socketPath: socket });
    try {
      const res = await pool.request({
        method: 'POST',
        path: '/v1/actions',
        // No DNS rebinding through a Unix socket: the Host check is the loopback port's.
        headers: { host: 'tollgate-sidecar', 'content-type': 'application/json' },
        body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } }),
      });
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toMatchObject({ decision: 'allow', state: 'executed', executed: true });
    } finally {
      await pool.close();
    }
  });

  it('proxies MCP over the socket: the SDK client lists and calls, and the call is forwarded', async () => {
    const client = new Client({ name: 'socket-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL('http://localhost/mcp/payments'), {
        fetch: ((url: string | URL, init?: RequestInit) => undiciFetch(url, { ...(init as object), dispatcher: overSocket })) as unknown as typeof fetch,
      }),
    );
    try {
      expect((await client.listTools()).tools.map((x) => x.name)).toEqual(['lookup']);
      const before = payments.calls.length;
      const result = await client.callTool({ name: 'lookup', arguments: { payee: 'socket' } });
      expect(result.content).toEqual([{ type: 'text', text: 'payee socket: ACME Supplies Ltd' }]);
      expect(payments.calls.slice(before)).toEqual([{ name: 'lookup', args: { payee: 'socket' } }]);
    } finally {
      await client.close();
    }
  });

  it('removes a stale socket file left by a killed sidecar, and its own at stop', async () => {
    const stale = path.join(socketDir(), 'sidecar.sock');
    // A process killed while listening leaves its socket file behind (the pod's volume outlives the container).
    const holder = spawn(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(stale)}, () => console.log('up'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => holder.stdout!.once('data', () => resolve()));
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    expect(statSync(stale).isSocket()).toBe(true);

    const env = await sidecarEnv({ TOLLGATE_SIDECAR_SOCKET: stale });
    const child = spawnTollgate(['sidecar'], env);
    try {
      await waitForHttp(`http://127.0.0.1:${env.TOLLGATE_SIDECAR_PORT}/healthz`, 30_000, child);
      const pool = new Pool('http://localhost', { socketPath: stale });
      const res = await pool.request({ method: 'GET', path: '/healthz' });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      await pool.close();
    } finally {
      await stop(child);
    }
    expect(existsSync(stale)).toBe(false);
  });

  it('refuses to start, naming the setting, when the socket is in use, is not a socket, or its directory is missing', async () => {
    const inUse = await exited(spawnTollgate(['sidecar'], await sidecarEnv({ TOLLGATE_SIDECAR_SOCKET: socket })));
    expect(inUse.code).toBe(78);
    expect(inUse.output).toContain(`TOLLGATE_SIDECAR_SOCKET: another process is listening on ${socket}`);
    // The live sidecar's socket is untouched.
    expect(statSync(socket).isSocket()).toBe(true);

    const file = path.join(socketDir(), 'not-a-socket');
    writeFileSync(file, 'data');
    const notSocket = await exited(spawnTollgate(['sidecar'], await sidecarEnv({ TOLLGATE_SIDECAR_SOCKET: file })));
    expect(notSocket.code).toBe(78);
    expect(notSocket.output).toContain('is not a socket; not removing it');
    expect(existsSync(file)).toBe(true);

    const missing = await exited(spawnTollgate(['sidecar'], await sidecarEnv({ TOLLGATE_SIDECAR_SOCKET: '/nonexistent-tollgate-dir/sidecar.sock' })));
    expect(missing.code).toBe(78);
    expect(missing.output).toContain('TOLLGATE_SIDECAR_SOCKET: the directory /nonexistent-tollgate-dir does not exist');
  });

  describe("the MCP transport's HTTP rules, answered by the proxy itself", () => {
    const mcp = () => `${base}/mcp/payments`;
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const post = async (body: string, extra: Record<string, string> = {}) => {
      const res = await fetch(mcp(), { method: 'POST', headers: { ...headers, ...extra }, body });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
    };

    it('initialize: the version asked when supported, else the latest; tools only; no session', async () => {
      const init = (protocolVersion: string) => JSON.stringify({ jsonrpc: '2.0', id: 'i', method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: { name: 'x', version: '1' } } });
      const asked = await post(init('2025-03-26'));
      expect(asked.status).toBe(200);
      expect(asked.headers.get('mcp-session-id')).toBeNull();
      expect(asked.body).toEqual({
        jsonrpc: '2.0',
        id: 'i',
        result: { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'tollgate-sidecar/payments', version: '0.1.0' } },
      });
      expect((await post(init('1999-01-01'))).body.result.protocolVersion).toBe('2025-11-25');
    });

    it('notifications are accepted with 202; ping, a batch, and an unknown method answered as JSON-RPC', async () => {
      const note = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      expect(note.status).toBe(202);
      expect(note.body).toBeUndefined();
      const batch = await post(
        JSON.stringify([
          { jsonrpc: '2.0', id: 1, method: 'ping' },
          { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 0 } },
          { jsonrpc: '2.0', id: 2, method: 'resources/list' },
        ]),
      );
      expect(batch.status).toBe(200);
      expect(batch.body).toEqual([
        { jsonrpc: '2.0', id: 1, result: {} },
        { jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'Method not found' } },
      ]);
      const bad = await post(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { arguments: {} } }));
      expect(bad.body.error.code).toBe(-32602);
    });

    it('refuses what the streamable-HTTP transport refuses, with its status codes', async () => {
      expect((await post('{"jsonrpc":', {})).body).toEqual({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: Invalid JSON' }, id: null });
      expect((await post(JSON.stringify({ id: 1, method: 'ping' }))).status).toBe(400);
      expect((await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { accept: 'application/json' })).status).toBe(406);
      expect((await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { 'content-type': 'text/plain' })).status).toBe(415);
      const version = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }), { 'mcp-protocol-version': '1999-01-01' });
      expect(version.status).toBe(400);
      expect(version.body.error.message).toMatch(/Unsupported protocol version/);
      // Stateless: no standalone stream to GET, no session to DELETE.
      for (const method of ['GET', 'DELETE']) {
        const res = await fetch(mcp(), { method, headers: { accept: 'text/event-stream' } });
        expect(res.status).toBe(405);
        expect(res.headers.get('allow')).toBe('POST');
      }
    });

    it('answers a body over its limit (4 MiB for MCP, 1 MiB for /v1/actions) once it is read, on the same connection', async () => {
      // One connection for all three: the refusal must leave it usable, which a half-read body would not.
      const pool = new Pool(base, { connections: 1 });
      try {
        const big = (bytes: number) => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(bytes) } });
        const mcpTooLarge = await pool.request({ method: 'POST', path: '/mcp/payments', headers, body: big(4 * 1024 * 1024) });
        expect(mcpTooLarge.statusCode).toBe(413);
        expect(((await mcpTooLarge.body.json()) as { error: { code: number } }).error.code).toBe(-32000);
        const actionTooLarge = await pool.request({
          method: 'POST',
          path: '/v1/actions',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { pad: 'x'.repeat(1024 * 1024) } }),
        });
        expect(actionTooLarge.statusCode).toBe(400);
        expect(await actionTooLarge.body.json()).toMatchObject({ error: { code: 'validation_failed', message: 'the body is larger than 1 MiB' } });
        // A body in several chunks just under the limit is read whole.
        const ping = await pool.request({ method: 'POST', path: '/mcp/payments', headers, body: big(1024 * 1024) });
        expect(ping.statusCode).toBe(200);
        expect(await ping.body.json()).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
      } finally {
        await pool.close();
      }
    });

    it("passes the upstream's answer to a call it refuses to the agent as the upstream sent it", async () => {
      // The SDK's McpServer answers a call with arguments its schema refuses as a tool error or an
      // invalid-params error (depending on its version): either way, what reaches the agent is the upstream's.
      const res = await post(JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'lookup', arguments: { payee: 42 } } }));
      expect(res.status).toBe(200);
      const direct = await fetch(payments.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'lookup', arguments: { payee: 42 } } }),
      });
      expect(res.body).toEqual(await direct.json());
    });
  });

  it('the sidecar logs where it listens', async () => {
    const line = await eventually(async () => sidecar.output().split('\n').find((l) => l.includes('sidecar listening on loopback')), 10_000, 'the start-up line');
    expect(JSON.parse(line!).socket).toBe(socket);
  });
});
