import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startPaymentsMcpServer } from '../test/support/mcp-server.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { adminSession, benchDatabase } from './support.js';

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const ms = (n: number) => Number(n.toFixed(2));

/** Times `n` sequential runs of `once` (after `warm` unmeasured ones), in milliseconds, sorted. */
async function timed(n: number, warm: number, once: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < warm; i++) await once();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    await once();
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return out.sort((a, b) => a - b);
}

/**
 * bench/mcp-proxy: one MCP `tools/call` (`lookup` of a real MCP server on the SDK), sequentially, straight to
 * the MCP server and through `tollgate sidecar`'s MCP proxy in front of the real API on PostgreSQL; beside them
 * the decision alone (`POST /api/v1/actions` of the same action with the agent's token). What the proxy adds
 * beyond the decision is its own share (issue 20's target: added <= the decision's own time + 0.5 ms).
 */
export async function benchMcpProxy(opts: { calls: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  const mcp = await startPaymentsMcpServer();
  let api: ReturnType<typeof spawnTollgate> | undefined;
  let sidecar: ReturnType<typeof spawnTollgate> | undefined;
  const clients: Client[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-mcp-'));
  try {
    const port = await freePort();
    api = spawnTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      LOG_LEVEL: 'warn',
      // The MCP server listens on loopback beside the API.
      ALLOW_PRIVATE_ENDPOINTS: 'true',
      RATE_LIMIT_GATEWAY_PER_MINUTE: '1000000',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
      RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call } = await adminSession(base, cluster.adminUrl('tollgate'), 'Bench MCP proxy');
    const server = await call('POST', '/mcp-servers', { name: 'payments', endpoint: mcp.url });
    const tool = await call('POST', '/tools', { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' });
    const agent = await call('POST', '/agents', { name: 'Bench MCP agent' });
    await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
    const identity = await call('POST', `/agents/${agent.id}/identities`);
    writeFileSync(path.join(dir, 'client-id'), identity.client_id);
    writeFileSync(path.join(dir, 'client-secret'), identity.client_secret);
    const token = (await (
      await fetch(`${base}/api/v1/identities/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
      })
    ).json()) as { access_token: string };

    const sidecarPort = await freePort();
    sidecar = spawnTollgate(['sidecar'], {
      TOLLGATE_API_URL: base,
      TOLLGATE_IDENTITY_DIR: dir,
      TOLLGATE_SIDECAR_PORT: String(sidecarPort),
      TOLLGATE_SIDECAR_METRICS_PORT: 'off',
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: mcp.url, toolPrefix: 'payments' }]),
      LOG_LEVEL: 'warn',
    });
    await waitForHttp(`http://127.0.0.1:${sidecarPort}/healthz`, 30_000, sidecar);

    const connect = async (url: string) => {
      const client = new Client({ name: 'bench-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(url)));
      clients.push(client);
      return client;
    };
    const straight = await connect(mcp.url);
    const proxied = await connect(`http://127.0.0.1:${sidecarPort}/mcp/payments`);
    const args = { name: 'lookup', arguments: { payee: 'ACME' } };
    const check = (r: unknown) => {
      if ((r as { isError?: boolean }).isError) throw new Error(`mcp-proxy bench: the call failed: ${JSON.stringify(r)}`);
    };
    const decision = JSON.stringify({ tool: 'payments.lookup', operation: 'invoke', target: 'mcp://payments/lookup', parameters: { payee: 'ACME' } });

    const warm = Math.min(200, opts.calls);
    const direct = await timed(opts.calls, warm, async () => check(await straight.callTool(args)));
    const through = await timed(opts.calls, warm, async () => check(await proxied.callTool(args)));
    const decide = await timed(opts.calls, warm, async () => {
      const res = await fetch(`${base}/api/v1/actions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token.access_token}`, 'idempotency-key': `bench-${randomUUID()}` },
        body: decision,
      });
      const body = (await res.json()) as { decision?: { decision?: string } };
      if (res.status !== 200 || body.decision?.decision !== 'allow') throw new Error(`mcp-proxy bench: ${res.status} ${JSON.stringify(body)}`);
    });
    const added50 = pct(through, 50) - pct(direct, 50);
    return [
      { path: 'straight to the MCP server', p50_ms: ms(pct(direct, 50)), p99_ms: ms(pct(direct, 99)) },
      { path: 'through tollgate sidecar', p50_ms: ms(pct(through, 50)), p99_ms: ms(pct(through, 99)) },
      { path: 'the decision alone (POST /actions)', p50_ms: ms(pct(decide, 50)), p99_ms: ms(pct(decide, 99)) },
      { path: 'added by the sidecar (p50)', p50_ms: ms(added50), p99_ms: ms(pct(through, 99) - pct(direct, 99)) },
      { path: "the proxy's own share (added - decision, p50)", p50_ms: ms(added50 - pct(decide, 50)), p99_ms: null },
    ];
  } finally {
    for (const c of clients) await c.close().catch(() => undefined);
    await stop(sidecar);
    await stop(api);
    await mcp.close();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
