import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startPaymentsMcpServer } from '../test/support/mcp-server.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { adminSession, benchDatabase } from './support.js';

/** Milliseconds one call takes, refused or not. */
async function timedCall(client: Client): Promise<number> {
  const t = process.hrtime.bigint();
  try {
    await client.callTool({ name: 'lookup', arguments: { payee: 'ACME' } });
  } catch {
    // refused: what is measured here
  }
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/**
 * bench/breaker: `tollgate sidecar` in front of `tollgate api` on PostgreSQL and a real MCP server; one agent
 * calls a tool through the MCP proxy in a loop. The API is stopped with SIGSTOP (hung, not dead): how many of
 * the first calls cost the decision timeout (TOLLGATE_DECISION_TIMEOUT_MS, default 2 s; target: one), how fast
 * the next 1,000 are refused by the open breaker (target: <= 50 ms each), and, after SIGCONT, how soon calls
 * succeed again.
 */
export async function benchBreaker(opts: { refusals: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  const mcp = await startPaymentsMcpServer();
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-breaker-'));
  let api: ReturnType<typeof spawnTollgate> | undefined;
  let sidecar: ReturnType<typeof spawnTollgate> | undefined;
  let client: Client | undefined;
  try {
    const port = await freePort();
    api = spawnTollgate(['api'], { PORT: String(port), DATABASE_URL: runtimeUrl, LOG_LEVEL: 'warn', ALLOW_PRIVATE_ENDPOINTS: 'true' });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call } = await adminSession(base, cluster.adminUrl('tollgate'), 'Bench breaker');
    const server = await call('POST', '/mcp-servers', { name: 'payments', endpoint: mcp.url });
    const tool = await call('POST', '/tools', { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' });
    const agent = await call('POST', '/agents', { name: 'Bench breaker agent' });
    await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: tool.id, actions: ['invoke'] });
    const identity = await call('POST', `/agents/${agent.id}/identities`);
    writeFileSync(path.join(dir, 'client-id'), identity.client_id);
    writeFileSync(path.join(dir, 'client-secret'), identity.client_secret);
    const sidecarPort = await freePort();
    sidecar = spawnTollgate(['sidecar'], {
      TOLLGATE_API_URL: base,
      TOLLGATE_IDENTITY_DIR: dir,
      TOLLGATE_SIDECAR_PORT: String(sidecarPort),
      TOLLGATE_SIDECAR_METRICS_PORT: 'off',
      TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: mcp.url, toolPrefix: 'payments' }]),
      LOG_LEVEL: 'error',
    });
    await waitForHttp(`http://127.0.0.1:${sidecarPort}/healthz`, 30_000, sidecar);
    client = new Client({ name: 'bench-agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${sidecarPort}/mcp/payments`)));
    for (let i = 0; i < 50; i++) await client.callTool({ name: 'lookup', arguments: { payee: 'warm' } });

    api.kill('SIGSTOP');
    const first: number[] = [];
    for (let i = 0; i < 10; i++) first.push(await timedCall(client));
    const refused: number[] = [];
    for (let i = 0; i < opts.refusals; i++) refused.push(await timedCall(client));
    refused.sort((a, b) => a - b);
    api.kill('SIGCONT');
    const resumed = Date.now();
    for (;;) {
      try {
        await client.callTool({ name: 'lookup', arguments: { payee: 'back' } });
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    const pct = (q: number) => Number(refused[Math.min(refused.length - 1, Math.floor(q * refused.length))]!.toFixed(2));
    return [
      { what: 'of the first 10 calls after SIGSTOP, those that waited for the timeout (target 1)', value: first.filter((ms) => ms > 1000).length },
      { what: 'the first call after SIGSTOP, ms', value: Number(first[0]!.toFixed(0)) },
      { what: `the next ${opts.refusals} calls, refused by the open breaker: p50 ms`, value: pct(0.5) },
      { what: 'same, p99 ms (target <= 50)', value: pct(0.99) },
      { what: 'same, max ms', value: Number(refused.at(-1)!.toFixed(2)) },
      { what: 'after SIGCONT, a call succeeds again within, ms', value: Date.now() - resumed },
    ];
  } finally {
    if (api?.exitCode === null) api.kill('SIGCONT');
    await client?.close().catch(() => undefined);
    await stop(sidecar);
    await stop(api);
    await mcp.close();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
