import { createHash } from 'node:crypto';
import type { Agent } from 'node:http';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';

/**
 * The controller's KubeConfig: the file that KUBECONFIG names when set (tests, a developer's laptop),
 * else the pod's service account. No fallback to ~/.kube/config: a controller that silently talks to
 * whatever cluster the shell points at is worse than one that fails to start.
 */
export function loadKubeConfig(env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new KubeConfig();
  const file = env.KUBECONFIG?.split(':').find(Boolean);
  if (file) kc.loadFromFile(file);
  else kc.loadFromCluster();
  reuseConnections(kc);
  return kc;
}

type AgentOptions = Record<string, unknown> & { keepAlive?: boolean };
type AgentFactory = (cluster: { server?: string } | null, options: AgentOptions) => Agent;

/**
 * client-node 1.x makes a new https.Agent for every request, so every call opens a TCP connection and
 * does a TLS handshake (in the controller benchmark a third of the controller's CPU went to TLS
 * contexts). Here the agent is kept per TLS setting (server, CA, client certificate and key, server
 * name), with keep-alive, as client-go keeps its transport; a rotated certificate gets a new agent.
 */
function reuseConnections(kc: KubeConfig): void {
  const target = kc as unknown as { createAgent: AgentFactory };
  const make = target.createAgent.bind(kc);
  const agents = new Map<string, Agent>();
  target.createAgent = (cluster, options) => {
    const digest = createHash('sha256');
    for (const k of ['ca', 'cert', 'key', 'pfx', 'servername', 'rejectUnauthorized']) digest.update(`${k}=${String(options[k] ?? '')};`);
    const key = `${cluster?.server ?? ''}|${digest.digest('hex')}`;
    let agent = agents.get(key);
    if (!agent) {
      agent = make(cluster, { ...options, keepAlive: true });
      agents.set(key, agent);
    }
    return agent;
  };
}

/** A resource to list and watch: `group` '' is the core API (/api/v1); `namespace` unset means every namespace. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
}

/** `namespace/name`, or `name` for a cluster-scoped object: the work queue's key, as client-go's. */
export function objectKey(obj: { metadata?: { name?: string; namespace?: string } }): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error('object has no metadata.name');
  return obj.metadata?.namespace ? `${obj.metadata.namespace}/${name}` : name;
}

export function splitKey(key: string): { namespace?: string; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

/** The HTTP status of a failed client-node call (ApiException.code, or a watch error's statusCode). */
export function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  const s = typeof e?.code === 'number' ? e.code : e?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

/** A leader-election identity unique per process: hostname (the pod name in a cluster) and pid. */
export function defaultIdentity(): string {
  return `${hostname()}_${process.pid}`;
}

/** Exponential backoff: base, 2×base, 4×base... capped at max, for the nth consecutive failure (1-based). */
export function backoff(failures: number, baseMs: number, maxMs: number): number {
  if (failures <= 0) return 0;
  return Math.min(baseMs * 2 ** Math.min(failures - 1, 52), maxMs);
}
