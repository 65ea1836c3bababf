import { createHash } from 'node:crypto';
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';
import type { AgentStatus } from '../kinds.js';

export const INJECT_LABEL = 'tollgate.dev/inject';
export const AGENT_ANNOTATION = 'tollgate.dev/agent';
/** Optional pod annotation: the MCP servers the sidecar proxies, JSON `[{"name", "url", "toolPrefix"}]`. */
export const MCP_ANNOTATION = 'tollgate.dev/mcp-upstreams';
export const SIDECAR_NAME = 'tollgate-sidecar';
export const IDENTITY_VOLUME = 'tollgate-identity';
export const IDENTITY_DIR = '/var/run/tollgate/identity';
/** Where the sidecar listens, on the pod's loopback. */
export const SIDECAR_PORT = 15080;
/** The sidecar's Prometheus metrics (GET /metrics), on the pod's address so that Prometheus can scrape it. */
export const SIDECAR_METRICS_PORT = 15090;
/**
 * The label that tells one injected pod from every other: the controller's per-pod egress NetworkPolicy
 * selects it (a pod has no name, with generateName, nor uid at admission, so the webhook makes one).
 */
export const POD_ID_LABEL = 'tollgate.dev/pod-id';

export interface InjectionSettings {
  /** The sidecar's image (the tollgate image; the sidecar runs `tollgate sidecar`). */
  image: string;
  /** The central API as the agent pods reach it. */
  apiUrl: string;
}

/** What the webhook knows of the Agent a pod names (undefined: no such Agent). */
export interface AgentView {
  status?: AgentStatus;
  metadata?: { deletionTimestamp?: unknown; generation?: number };
}

export type PatchOp = { op: 'add'; path: string; value: unknown };
export type Injection = { allowed: true; patch: PatchOp[] } | { allowed: false; message: string };

/** JSON Pointer escaping of one path segment (RFC 6901). */
const segment = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The sidecar a pod gets: a native sidecar (an init container with restartPolicy Always, so it starts
 * before the agent's containers and stops after them), on the pod's loopback only, with the Agent's
 * identity Secret mounted read-only (the one container that mounts it), small requests and a
 * restrictive security context.
 */
export function sidecarContainer(settings: InjectionSettings, agent: string, mcpUpstreams?: string): V1Container {
  const env: V1EnvVar[] = [
    { name: 'TOLLGATE_API_URL', value: settings.apiUrl },
    { name: 'TOLLGATE_IDENTITY_DIR', value: IDENTITY_DIR },
    { name: 'TOLLGATE_SIDECAR_PORT', value: String(SIDECAR_PORT) },
    { name: 'TOLLGATE_AGENT', value: agent },
    { name: 'TOLLGATE_SIDECAR_METRICS_PORT', value: String(SIDECAR_METRICS_PORT) },
  ];
  if (mcpUpstreams) env.push({ name: 'TOLLGATE_MCP_UPSTREAMS', value: mcpUpstreams });
  return {
    name: SIDECAR_NAME,
    image: settings.image,
    args: ['sidecar'],
    restartPolicy: 'Always',
    env,
    ports: [{ name: 'tg-metrics', containerPort: SIDECAR_METRICS_PORT, protocol: 'TCP' }],
    volumeMounts: [{ name: IDENTITY_VOLUME, mountPath: IDENTITY_DIR, readOnly: true }],
    resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}

/**
 * The admission answer for a pod that asks for the sidecar: a JSON patch adding it (nothing when it is
 * there already: the webhook is idempotent, e.g. on a reinvocation), or a refusal saying what is wrong.
 * Pure: the Agent is looked up by the caller, and the pod's id (the tollgate.dev/pod-id label) comes from
 * the caller too: the webhook passes the admission request's uid, unique per request. Without one, a
 * digest of the submitted pod stands in (the golden files); it is not unique across a Deployment's
 * replicas, which the controller then relabels with their uids.
 */
export function injectSidecar(pod: V1Pod, agent: AgentView | undefined, settings: InjectionSettings, podId?: string): Injection {
  const labels = pod.metadata?.labels ?? {};
  if (labels[INJECT_LABEL] !== 'true') return { allowed: true, patch: [] };
  const spec = pod.spec;
  if (!spec) return { allowed: false, message: 'the pod has no spec' };
  if ((spec.initContainers ?? []).some((c) => c.name === SIDECAR_NAME)) return { allowed: true, patch: [] };

  const name = pod.metadata?.annotations?.[AGENT_ANNOTATION];
  if (!name) {
    return {
      allowed: false,
      message: `the label ${INJECT_LABEL}=true needs the annotation ${AGENT_ANNOTATION} naming an Agent of this namespace`,
    };
  }
  if (!agent) return { allowed: false, message: `Agent ${name} does not exist in this namespace: apply it before the pods that run it` };
  if (agent.metadata?.deletionTimestamp) return { allowed: false, message: `Agent ${name} is being deleted` };
  const ready = agent.status?.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'True' || !agent.status?.identitySecret) {
    const why = ready ? `${ready.reason}: ${ready.message}` : 'the controller has not reconciled it yet';
    return { allowed: false, message: `Agent ${name} is not Ready (${why})` };
  }
  const mcp = pod.metadata?.annotations?.[MCP_ANNOTATION];
  if (mcp !== undefined && !validUpstreams(mcp)) {
    return { allowed: false, message: `the annotation ${MCP_ANNOTATION} must be a JSON list of {"name", "url", "toolPrefix"}` };
  }

  const patch: PatchOp[] = [];
  const add = (path: string, value: unknown) => patch.push({ op: 'add', path, value });
  const sidecar = sidecarContainer(settings, name, mcp);
  // A native sidecar goes first, so it is up before any other init container calls out.
  if (spec.initContainers?.length) add('/spec/initContainers/0', sidecar);
  else add('/spec/initContainers', [sidecar]);
  const volume = { name: IDENTITY_VOLUME, secret: { secretName: agent.status.identitySecret, defaultMode: 0o444 } };
  if (spec.volumes?.length) add('/spec/volumes/-', volume);
  else add('/spec/volumes', [volume]);
  // The agent's containers learn where the gateway is.
  const gateway: V1EnvVar[] = [
    { name: 'TOLLGATE_GATEWAY_URL', value: `http://127.0.0.1:${SIDECAR_PORT}` },
    { name: 'TOLLGATE_MCP_URL', value: `http://127.0.0.1:${SIDECAR_PORT}/mcp/` },
  ];
  spec.containers.forEach((c, i) => {
    const taken = new Set((c.env ?? []).map((e) => e.name));
    const missing = gateway.filter((e) => !taken.has(e.name));
    if (!c.env) {
      if (missing.length) add(`/spec/containers/${i}/env`, missing);
    } else for (const e of missing) add(`/spec/containers/${i}/env/-`, e);
  });
  add(`/metadata/annotations/${segment('tollgate.dev/injected')}`, SIDECAR_NAME);
  // Set even when the pod brings one: a copied id would put two pods under one policy.
  add(`/metadata/labels/${segment(POD_ID_LABEL)}`, podId ?? createHash('sha256').update(JSON.stringify(pod)).digest('hex').slice(0, 32));
  return { allowed: true, patch };
}

function validUpstreams(raw: string): boolean {
  try {
    const list = JSON.parse(raw) as unknown;
    return (
      Array.isArray(list) &&
      list.every(
        (u: unknown) =>
          typeof u === 'object' &&
          u !== null &&
          typeof (u as { name?: unknown }).name === 'string' &&
          typeof (u as { url?: unknown }).url === 'string' &&
          typeof (u as { toolPrefix?: unknown }).toolPrefix === 'string',
      )
    );
  } catch {
    return false;
  }
}
