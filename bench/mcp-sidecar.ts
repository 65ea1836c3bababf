import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SIDECAR_NODE_OPTIONS } from '../controller/webhook/inject.js';
import { startPaymentsMcpServer } from '../test/support/mcp-server.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { adminSession, benchDatabase, boundAgent } from './support.js';

/**
 * What bench/mcp-proxy and bench/breaker stand on: `tollgate api` on a durable PostgreSQL, a real MCP server (the
 * SDK's) registered as `payments` with its `lookup` tool bound to one agent, that agent's token, and `tollgate
 * sidecar` with the agent's identity in front of both (its metrics on `metricsUrl`). `close()` stops everything (and
 * resumes a stopped API).
 */
export async function mcpSidecar(name: string, sidecarLogLevel = 'warn') {
  const { cluster, runtimeUrl } = await benchDatabase();
  const mcp = await startPaymentsMcpServer();
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-mcp-'));
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  let sidecar: ReturnType<typeof spawnBuiltTollgate> | undefined;
  const close = async () => {
    if (api?.exitCode === null) api.kill('SIGCONT');
    await stop(sidecar);
    await stop(api);
    await mcp.close();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], {
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
    const { call } = await adminSession(base, cluster.adminUrl('tollgate'), name);
    const server = await call('POST', '/mcp-servers', { name: 'payments', endpoint: mcp.url });
    const tool = await call('POST', '/tools', { tool_key: 'payments.lookup', name: 'Look up a payee', mcp_server_id: server.id, privilege_class: 'read' });
    const { token } = await boundAgent(base, call, tool.id, `${name} agent`, dir);
    const sidecarPort = await freePort();
    // Its metrics listener on, as in a pod: bench/mcp-proxy reads the sidecar's own account of its time there.
    const metricsPort = await freePort();
    // With the V8 options the injection webhook gives the sidecar in a pod.
    sidecar = spawnBuiltTollgate(
      ['sidecar'],
      {
        TOLLGATE_API_URL: base,
        TOLLGATE_IDENTITY_DIR: dir,
        TOLLGATE_SIDECAR_PORT: String(sidecarPort),
        TOLLGATE_SIDECAR_METRICS_PORT: String(metricsPort),
        TOLLGATE_MCP_UPSTREAMS: JSON.stringify([{ name: 'payments', url: mcp.url, toolPrefix: 'payments' }]),
        LOG_LEVEL: sidecarLogLevel,
      },
      SIDECAR_NODE_OPTIONS.split(' '),
    );
    await waitForHttp(`http://127.0.0.1:${sidecarPort}/healthz`, 30_000, sidecar);
    return {
      api,
      base,
      mcpUrl: mcp.url,
      token,
      sidecarUrl: `http://127.0.0.1:${sidecarPort}/mcp/payments`,
      metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
