import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { GatewayClient } from '../client/index.js';
import { McpProxy, type Upstream } from './mcp-proxy.js';
import { startSidecarServer } from './server.js';

export class SidecarConfigError extends Error {}

export interface SidecarConfig {
  apiUrl: string;
  identityDir: string;
  port: number;
  upstreams: Upstream[];
  approvalWaitSeconds: number;
  logLevel: string;
}

const NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** The sidecar's settings, from the environment the injection webhook sets (docs/sidecar.md). */
export function sidecarConfig(env: NodeJS.ProcessEnv): SidecarConfig {
  const apiUrl = env.TOLLGATE_API_URL;
  if (!apiUrl || !/^https?:\/\//.test(apiUrl)) throw new SidecarConfigError('set TOLLGATE_API_URL to the central API (http or https)');
  const identityDir = env.TOLLGATE_IDENTITY_DIR;
  if (!identityDir) throw new SidecarConfigError('set TOLLGATE_IDENTITY_DIR to the directory holding client-id and client-secret');
  for (const f of ['client-id', 'client-secret']) {
    if (!existsSync(path.join(identityDir, f))) throw new SidecarConfigError(`TOLLGATE_IDENTITY_DIR has no ${f}`);
  }
  const port = Number(env.TOLLGATE_SIDECAR_PORT ?? 15080);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new SidecarConfigError('TOLLGATE_SIDECAR_PORT must be a port number');
  const wait = Number(env.TOLLGATE_APPROVAL_WAIT_SECONDS ?? 0);
  if (!Number.isFinite(wait) || wait < 0 || wait > 900) throw new SidecarConfigError('TOLLGATE_APPROVAL_WAIT_SECONDS must be 0 to 900');
  let upstreams: Upstream[] = [];
  if (env.TOLLGATE_MCP_UPSTREAMS) {
    try {
      upstreams = JSON.parse(env.TOLLGATE_MCP_UPSTREAMS) as Upstream[];
    } catch {
      throw new SidecarConfigError('TOLLGATE_MCP_UPSTREAMS must be JSON: [{"name", "url", "toolPrefix"}]');
    }
    const ok =
      Array.isArray(upstreams) &&
      upstreams.every((u) => NAME.test(u?.name ?? '') && NAME.test(u?.toolPrefix ?? '') && /^https?:\/\//.test(u?.url ?? '')) &&
      new Set(upstreams.map((u) => u.name)).size === upstreams.length;
    if (!ok) throw new SidecarConfigError('TOLLGATE_MCP_UPSTREAMS: each upstream needs a unique name, an http(s) url and a toolPrefix');
  }
  return { apiUrl, identityDir, port, upstreams, approvalWaitSeconds: wait, logLevel: env.LOG_LEVEL ?? 'info' };
}

/** Starts the sidecar; the credentials are read from the mounted files at every token exchange. */
export async function startSidecar(config: SidecarConfig) {
  const log = pino({ level: config.logLevel, base: { component: 'sidecar' } });
  const read = (f: string) => readFileSync(path.join(config.identityDir, f), 'utf8').trim();
  const gateway = new GatewayClient({
    baseUrl: config.apiUrl,
    credentials: () => ({ clientId: read('client-id'), clientSecret: read('client-secret') }),
  });
  const proxy = new McpProxy(config.upstreams, gateway, log, config.approvalWaitSeconds);
  const server = await startSidecarServer({ gateway, proxy, port: config.port, log });
  log.info({ port: server.port, upstreams: config.upstreams.map((u) => u.name) }, 'sidecar listening on loopback');
  return {
    port: server.port,
    async stop() {
      await server.close();
      await proxy.close();
      await gateway.close();
    },
  };
}
