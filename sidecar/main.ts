import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { GatewayClient } from '../client/index.js';
import { CircuitBreaker } from './breaker.js';
import { McpProxy, type ToolsListMode, type Upstream } from './mcp-proxy.js';
import { SidecarMetrics, startMetricsServer } from './metrics.js';
import { SidecarListenError, startSidecarServer } from './server.js';
import { PermissionsCache, Tollgate } from './tollgate.js';

export class SidecarConfigError extends Error {}

export interface SidecarConfig {
  apiUrl: string;
  identityDir: string;
  port: number;
  /** A Unix domain socket to listen on besides the loopback port (null: none). */
  socket: string | null;
  upstreams: Upstream[];
  approvalWaitSeconds: number;
  /** One decision as a whole (token exchange, request, retry); the approval wait is apart. */
  decisionTimeoutMs: number;
  /** Consecutive failures of Tollgate that open the circuit breaker. */
  breakerFailures: number;
  /** How long the agent's effective permissions are kept for `tools/list` (0: read every time). */
  toolsCacheSeconds: number;
  toolsList: ToolsListMode;
  /** The metrics listener's port (0: any free one); null: no metrics listener. */
  metricsPort: number | null;
  logLevel: string;
}

const NAME = /^[A-Za-z0-9._-]{1,100}$/;
/** sun_path holds 108 bytes on Linux, the terminating NUL included. */
const MAX_SOCKET_PATH = 107;
/** While the breaker is open, the API's readiness is read this often. */
const PROBE_INTERVAL_MS = 1000;

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  const v = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) throw new SidecarConfigError(`${name} must be a whole number from ${min} to ${max}`);
  return v;
}

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
  const socket = socketPathOf(env.TOLLGATE_SIDECAR_SOCKET);
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
  const toolsList = env.TOLLGATE_TOOLS_LIST ?? 'filtered';
  if (toolsList !== 'filtered' && toolsList !== 'passthrough') throw new SidecarConfigError('TOLLGATE_TOOLS_LIST must be filtered or passthrough');
  const metrics = env.TOLLGATE_SIDECAR_METRICS_PORT ?? '15090';
  const metricsPort = metrics === 'off' ? null : Number(metrics);
  if (metricsPort !== null && (metrics === '' || !Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65_535)) {
    throw new SidecarConfigError('TOLLGATE_SIDECAR_METRICS_PORT must be a port number, 0 (any free port) or off');
  }
  return {
    apiUrl,
    identityDir,
    port,
    socket,
    upstreams,
    approvalWaitSeconds: wait,
    decisionTimeoutMs: integer(env, 'TOLLGATE_DECISION_TIMEOUT_MS', 2000, 100, 60_000),
    breakerFailures: integer(env, 'TOLLGATE_BREAKER_FAILURES', 5, 1, 1000),
    toolsCacheSeconds: integer(env, 'TOLLGATE_TOOLS_CACHE_SECONDS', 10, 0, 3600),
    toolsList,
    metricsPort,
    logLevel: env.LOG_LEVEL ?? 'info',
  };
}

/** TOLLGATE_SIDECAR_SOCKET: an absolute path short enough for a socket, in a directory that exists. */
function socketPathOf(raw: string | undefined): string | null {
  if (raw === undefined || raw === '') return null;
  if (!path.isAbsolute(raw)) throw new SidecarConfigError('TOLLGATE_SIDECAR_SOCKET must be an absolute path');
  if (Buffer.byteLength(raw) > MAX_SOCKET_PATH) throw new SidecarConfigError(`TOLLGATE_SIDECAR_SOCKET must be at most ${MAX_SOCKET_PATH} bytes (a Unix socket's limit)`);
  const dir = path.dirname(raw);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw new SidecarConfigError(`TOLLGATE_SIDECAR_SOCKET: the directory ${dir} does not exist (mount the pod's shared volume there)`);
  return raw;
}

/** Starts the sidecar; the credentials are read from the mounted files at every token exchange. */
export async function startSidecar(config: SidecarConfig) {
  const log = pino({ level: config.logLevel, base: { component: 'sidecar' } });
  const read = (f: string) => readFileSync(path.join(config.identityDir, f), 'utf8').trim();
  const timeoutSeconds = config.decisionTimeoutMs / 1000;
  const gateway = new GatewayClient({
    baseUrl: config.apiUrl,
    credentials: () => ({ clientId: read('client-id'), clientSecret: read('client-secret') }),
    // No single request, and no decision as a whole, outlasts the decision timeout.
    timeoutSeconds,
    connectTimeoutSeconds: Math.min(5, timeoutSeconds),
    decisionTimeoutSeconds: timeoutSeconds,
  });
  const metrics = new SidecarMetrics();
  const breaker = new CircuitBreaker({
    threshold: config.breakerFailures,
    // A ready API answers its readiness check in milliseconds: a second is ample, and quick to conclude.
    probe: () => gateway.ready(Math.min(1, timeoutSeconds)),
    probeIntervalMs: PROBE_INTERVAL_MS,
    log,
    onTransition: (to) => metrics.breaker(to),
  });
  // A decision takes milliseconds; one still waiting after a quarter of the timeout (at most 500 ms) has the
  // API's readiness read, which ends (at most a second later) before the timeout on a hung API.
  const tollgate = new Tollgate(gateway, breaker, Math.min(500, config.decisionTimeoutMs / 4));
  const permissions = new PermissionsCache(tollgate, config.toolsCacheSeconds * 1000);
  const proxy = new McpProxy(config.upstreams, {
    tollgate,
    permissions,
    metrics,
    log,
    approvalWaitSeconds: config.approvalWaitSeconds,
    toolsList: config.toolsList,
  });
  let server;
  try {
    server = await startSidecarServer({ tollgate, permissions, proxy, metrics, port: config.port, socket: config.socket, log });
  } catch (err) {
    await proxy.close();
    await gateway.close();
    if (err instanceof SidecarListenError) throw new SidecarConfigError(err.message);
    throw err;
  }
  const metricsServer = config.metricsPort === null ? null : await startMetricsServer(metrics, config.metricsPort);
  log.info(
    {
      port: server.port,
      socket: server.socket,
      metrics_port: metricsServer?.port ?? null,
      upstreams: config.upstreams.map((u) => u.name),
      decision_timeout_ms: config.decisionTimeoutMs,
      breaker_failures: config.breakerFailures,
      tools_list: config.toolsList,
    },
    'sidecar listening on loopback',
  );
  return {
    port: server.port,
    socket: server.socket,
    metricsPort: metricsServer?.port ?? null,
    async stop() {
      breaker.stop();
      await server.close();
      await metricsServer?.close();
      await proxy.close();
      await gateway.close();
    },
  };
}
