import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { ClientCredentials as Credentials } from '../client/tokens.js';
import { Controller } from './controller.js';
import { parseDnsPeers, type EgressSettings } from './egress.js';
import { loadKubeConfig } from './kube.js';
import { ControllerMetrics, startMetricsServer } from './metrics.js';
import { TollgateApi } from './tollgate-api.js';
import type { InjectionSettings } from './webhook/inject.js';
import { startWebhook } from './webhook/server.js';

const IN_CLUSTER_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export class ControllerConfigError extends Error {}

export interface ControllerConfig {
  apiUrl: string;
  /** Read again at every token exchange when it comes from files, so a rotated Secret is picked up. */
  credentials: Credentials | (() => Credentials);
  leaseNamespace: string;
  claimUnannotated: boolean;
  resyncMs: number;
  workers: number;
  leaseSeconds: number;
  logLevel: string;
  /** The leader-election identity: POD_NAME (the downward API) or the host name, with the pid. */
  identity: string;
  /** The sidecar-injection webhook; absent when TOLLGATE_WEBHOOK_CERT_DIR is not set. */
  webhook?: { certDir: string; port: number; settings: InjectionSettings };
  /** A NetworkPolicy per injected pod; absent when TOLLGATE_EGRESS_POLICY=false. */
  egress?: EgressSettings;
  statusPollMs: number;
  deniedIntervalMs: number;
  /** GET /metrics on this port (0: any free one); absent when TOLLGATE_METRICS_PORT=off. */
  metricsPort?: number;
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max) throw new ControllerConfigError(`${name} must be an integer from 1 to ${max}`);
  return n;
}

/**
 * The controller's settings, from the environment (docs/kubernetes.md lists them). The credential
 * comes from TOLLGATE_CREDENTIALS_DIR (a mounted Secret with the files client-id and client-secret)
 * or TOLLGATE_CLIENT_ID and TOLLGATE_CLIENT_SECRET.
 */
export function controllerConfig(env: NodeJS.ProcessEnv): ControllerConfig {
  const apiUrl = env.TOLLGATE_API_URL;
  if (!apiUrl) throw new ControllerConfigError('set TOLLGATE_API_URL to the central API, e.g. http://tollgate-api:8080');
  try {
    const u = new URL(apiUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error();
  } catch {
    throw new ControllerConfigError('TOLLGATE_API_URL must be an http or https URL');
  }
  let credentials: Credentials | (() => Credentials);
  const dir = env.TOLLGATE_CREDENTIALS_DIR;
  if (dir) {
    const read = (file: string) => {
      const p = path.join(dir, file);
      if (!existsSync(p)) throw new ControllerConfigError(`TOLLGATE_CREDENTIALS_DIR has no ${file}`);
      return readFileSync(p, 'utf8').trim();
    };
    credentials = () => ({ clientId: read('client-id'), clientSecret: read('client-secret') });
    credentials(); // both files must be there now
  } else if (env.TOLLGATE_CLIENT_ID && env.TOLLGATE_CLIENT_SECRET) {
    credentials = { clientId: env.TOLLGATE_CLIENT_ID, clientSecret: env.TOLLGATE_CLIENT_SECRET };
  } else {
    throw new ControllerConfigError(
      'set TOLLGATE_CREDENTIALS_DIR (files client-id, client-secret) or TOLLGATE_CLIENT_ID and TOLLGATE_CLIENT_SECRET: a service account of POST /service-accounts',
    );
  }
  const leaseNamespace =
    env.TOLLGATE_LEASE_NAMESPACE ??
    env.POD_NAMESPACE ??
    (existsSync(IN_CLUSTER_NAMESPACE) ? readFileSync(IN_CLUSTER_NAMESPACE, 'utf8').trim() : 'default');
  const claim = env.TOLLGATE_CLAIM_UNANNOTATED ?? 'true';
  if (claim !== 'true' && claim !== 'false') throw new ControllerConfigError('TOLLGATE_CLAIM_UNANNOTATED must be true or false');
  const sidecarApiUrl = env.TOLLGATE_SIDECAR_API_URL ?? apiUrl;
  const egressOn = env.TOLLGATE_EGRESS_POLICY ?? 'true';
  if (egressOn !== 'true' && egressOn !== 'false') throw new ControllerConfigError('TOLLGATE_EGRESS_POLICY must be true or false');
  let egress: EgressSettings | undefined;
  if (egressOn === 'true') {
    try {
      egress = { apiUrl: sidecarApiUrl, dns: parseDnsPeers(env.TOLLGATE_EGRESS_DNS ?? 'kube-system/k8s-app=kube-dns') };
    } catch (err) {
      throw new ControllerConfigError(`TOLLGATE_EGRESS_DNS ${(err as Error).message}`);
    }
  }
  const metrics = env.TOLLGATE_METRICS_PORT ?? '9090';
  let metricsPort: number | undefined;
  if (metrics !== 'off') {
    metricsPort = Number(metrics);
    if (metrics === '' || !Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65_535) {
      throw new ControllerConfigError('TOLLGATE_METRICS_PORT must be a port (0 for any free one) or off');
    }
  }
  let webhook: ControllerConfig['webhook'];
  if (env.TOLLGATE_WEBHOOK_CERT_DIR) {
    const image = env.TOLLGATE_SIDECAR_IMAGE;
    if (!image) throw new ControllerConfigError('set TOLLGATE_SIDECAR_IMAGE, the image the webhook injects as the sidecar');
    webhook = {
      certDir: env.TOLLGATE_WEBHOOK_CERT_DIR,
      port: positive(env, 'TOLLGATE_WEBHOOK_PORT', 9443, 65_535),
      settings: { image, apiUrl: sidecarApiUrl },
    };
  }
  return {
    webhook,
    egress,
    statusPollMs: positive(env, 'TOLLGATE_STATUS_POLL_SECONDS', 60, 3600) * 1000,
    deniedIntervalMs: positive(env, 'TOLLGATE_DENIED_EVENT_SECONDS', 300, 86_400) * 1000,
    metricsPort,
    apiUrl,
    credentials,
    leaseNamespace,
    claimUnannotated: claim === 'true',
    resyncMs: positive(env, 'TOLLGATE_RESYNC_SECONDS', 300, 86_400) * 1000,
    workers: positive(env, 'TOLLGATE_WORKERS', 4, 64),
    leaseSeconds: positive(env, 'TOLLGATE_LEASE_SECONDS', 15, 300),
    logLevel: env.LOG_LEVEL ?? 'info',
    identity: `${env.POD_NAME || hostname()}_${process.pid}`,
  };
}

/** Starts the webhook (when configured) and the controller; stop() on SIGTERM is the caller's. */
export async function startController(config: ControllerConfig): Promise<{ controller: Controller; stop(): Promise<void> }> {
  const log = pino({ level: config.logLevel, base: { component: 'controller' } });
  const api = new TollgateApi({ baseUrl: config.apiUrl, credentials: config.credentials });
  // Which organisation the credential stands for; fails fast on a wrong secret or an unreachable API.
  const tenant = await api.get<{ slug: string }>('/tenants/current');
  const lease = config.leaseSeconds * 1000;
  // Its own registry, here rather than a global: what one process serves is this controller's alone.
  const metrics = new ControllerMetrics();
  const controller = new Controller({
    kubeConfig: loadKubeConfig(),
    api,
    organisation: tenant.slug,
    claimUnannotated: config.claimUnannotated,
    leaseNamespace: config.leaseNamespace,
    identity: config.identity,
    workers: config.workers,
    resyncMs: config.resyncMs,
    lease: {
      leaseDurationSeconds: config.leaseSeconds,
      renewDeadlineMs: Math.round((lease * 2) / 3),
      renewPeriodMs: Math.round(lease / 3),
      retryPeriodMs: Math.max(200, Math.round(lease / 7)),
    },
    egress: config.egress,
    statusPollMs: config.statusPollMs,
    deniedIntervalMs: config.deniedIntervalMs,
    metrics,
    log,
  });
  if (!config.egress) log.info('egress policies: off (TOLLGATE_EGRESS_POLICY=false)');
  let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
  if (config.metricsPort === undefined) log.info('metrics: off (TOLLGATE_METRICS_PORT=off)');
  else {
    try {
      metricsServer = await startMetricsServer(metrics.registry, config.metricsPort);
      log.info({ port: metricsServer.port, path: '/metrics' }, 'metrics: serving');
    } catch (err) {
      // Reconciling matters more than being scraped: a taken port (two controllers on one host) is said, not fatal.
      log.error({ port: config.metricsPort, err: (err as Error).message }, 'metrics: cannot listen; serving none (set TOLLGATE_METRICS_PORT)');
    }
  }
  const webhook = config.webhook
    ? await startWebhook({ kubeConfig: loadKubeConfig(), log, ...config.webhook })
    : (log.info('webhook: off (no TOLLGATE_WEBHOOK_CERT_DIR)'), undefined);
  controller.start();
  return {
    controller,
    async stop() {
      await webhook?.close();
      await controller.stop();
      await metricsServer?.close();
    },
  };
}
