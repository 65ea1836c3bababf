import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpError } from '@modelcontextprotocol/sdk/types.js';
import { eventually } from '../support/kubectl.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, waitForHttp } from '../support/processes.js';

export type SidecarProcess = ReturnType<typeof spawnTollgate> & { base: string; metricsPort: number; dir: string };

/** A directory holding a workload identity as the Secret mounts it. */
export function identityDir(identity: { client_id: string; client_secret: string }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-sidecar-'));
  writeFileSync(path.join(dir, 'client-id'), `${identity.client_id}\n`);
  writeFileSync(path.join(dir, 'client-secret'), `${identity.client_secret}\n`);
  return dir;
}

/** `tollgate sidecar` as a process, its metrics on a free port read back from its start-up log line. */
export async function startSidecarProcess(apiUrl: string, identity: { client_id: string; client_secret: string }, env: Record<string, string> = {}): Promise<SidecarProcess> {
  const dir = identityDir(identity);
  const port = await freePort();
  const child = spawnTollgate(['sidecar'], {
    TOLLGATE_API_URL: apiUrl,
    TOLLGATE_IDENTITY_DIR: dir,
    TOLLGATE_SIDECAR_PORT: String(port),
    TOLLGATE_SIDECAR_METRICS_PORT: '0',
    ...env,
  });
  const base = `http://127.0.0.1:${port}`;
  await waitForHttp(`${base}/healthz`, 30_000, child);
  const metricsPort = await eventually(async () => {
    const line = child
      .output()
      .split('\n')
      .find((l) => l.includes('sidecar listening on loopback'));
    return line ? (JSON.parse(line).metrics_port as number) : undefined;
  }, 10_000, 'the start-up line');
  return Object.assign(child, { base, metricsPort, dir });
}

/** The samples of a Prometheus text exposition: `name{a="x",b="y"}` → value (labels sorted by name). */
export async function scrape(metricsPort: number): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const samples = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => `${k}="${v}"`).sort();
    samples.set(labels.length ? `${m[1]}{${labels.join(',')}}` : m[1]!, Number(m[3]));
  }
  return samples;
}

/** A sample's value, 0 when absent (a counter not yet incremented). */
export const sample = (samples: Map<string, number>, name: string, labels: Record<string, string> = {}) => {
  const keys = Object.keys(labels).sort();
  const key = keys.length ? `${name}{${keys.map((k) => `${k}="${labels[k]}"`).join(',')}}` : name;
  return samples.get(key) ?? 0;
};

/** The SDK's MCP client, as an agent would use it, against one upstream of the sidecar. */
export async function mcpClient(base: string, upstream: string): Promise<Client> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp/${upstream}`)));
  return client;
}

/** The error a call failed with; throws when it succeeded. */
export async function callError(p: Promise<unknown>): Promise<McpError> {
  try {
    await p;
  } catch (err) {
    return err as McpError;
  }
  throw new Error('the call succeeded');
}

/** A POST of JSON to the sidecar: status and body. */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; ms: number }> {
  const started = Date.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json(), ms: Date.now() - started };
}
