import { createHash } from 'node:crypto';
import type { V1Container, V1EnvVar, V1Pod, V1VolumeMount } from '@kubernetes/client-node';
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
/**
 * The volume the sidecar's Unix socket lives in (an emptyDir in memory): mounted read-write in the
 * sidecar, read-only in the agent's containers (connecting to a socket needs no write access to its
 * filesystem), and by no other pod.
 */
export const SOCKET_VOLUME = 'tollgate-sidecar-socket';
export const SOCKET_DIR = '/var/run/tollgate/sidecar';
/** The sidecar's Unix socket: a cheaper hop than the loopback port (docs/sidecar.md, Cost). */
export const SIDECAR_SOCKET = `${SOCKET_DIR}/sidecar.sock`;
/**
 * V8's young generation capped at 1 MB a semi-space (16 MB by default): the sidecar's garbage is small and
 * short-lived, and the cap kept its idle RSS 2.5 MB and its RSS under load about 40 MB lower at no CPU cost
 * measured (docs/sidecar.md, Footprint). bench/sidecar.ts runs the sidecar with these same options.
 */
export const SIDECAR_NODE_OPTIONS = '--max-semi-space-size=1';
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
    { name: 'TOLLGATE_SIDECAR_SOCKET', value: SIDECAR_SOCKET },
    { name: 'TOLLGATE_AGENT', value: agent },
    { name: 'TOLLGATE_SIDECAR_METRICS_PORT', value: String(SIDECAR_METRICS_PORT) },
    { name: 'NODE_OPTIONS', value: SIDECAR_NODE_OPTIONS },
  ];
  if (mcpUpstreams) env.push({ name: 'TOLLGATE_MCP_UPSTREAMS', value: mcpUpstreams });
  return {
    name: SIDECAR_NAME,
    image: settings.image,
    args: ['sidecar'],
    restartPolicy: 'Always',
    env,
    ports: [{ name: 'tg-metrics', containerPort: SIDECAR_METRICS_PORT, protocol: 'TCP' }],
    volumeMounts: [
      { name: IDENTITY_VOLUME, mountPath: IDENTITY_DIR, readOnly: true },
      { name: SOCKET_VOLUME, mountPath: SOCKET_DIR },
    ],
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
  const volumes = [
    { name: IDENTITY_VOLUME, secret: { secretName: agent.status.identitySecret, defaultMode: 0o444 } },
    // Memory-backed: the socket is the only file in it.
    { name: SOCKET_VOLUME, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
  ];
  if (spec.volumes?.length) for (const v of volumes) add('/spec/volumes/-', v);
  else add('/spec/volumes', volumes);
  // The agent's containers learn where the gateway is: the socket (the shared volume mounted read-only) or,
  // for an agent that cannot use one, the loopback port.
  const gateway: V1EnvVar[] = [
    { name: 'TOLLGATE_GATEWAY_URL', value: `http://127.0.0.1:${SIDECAR_PORT}` },
    { name: 'TOLLGATE_MCP_URL', value: `http://127.0.0.1:${SIDECAR_PORT}/mcp/` },
    { name: 'TOLLGATE_SIDECAR_SOCKET', value: SIDECAR_SOCKET },
  ];
  const mount: V1VolumeMount = { name: SOCKET_VOLUME, mountPath: SOCKET_DIR, readOnly: true };
  spec.containers.forEach((c, i) => {
    // A container that mounts something of its own at the socket's directory keeps it, and the loopback port.
    const mountsOwn = (c.volumeMounts ?? []).some((m) => m.mountPath === SOCKET_DIR || m.name === SOCKET_VOLUME);
    const taken = new Set((c.env ?? []).map((e) => e.name));
    const missing = gateway.filter((e) => !taken.has(e.name) && !(mountsOwn && e.name === 'TOLLGATE_SIDECAR_SOCKET'));
    if (!c.env) {
      if (missing.length) add(`/spec/containers/${i}/env`, missing);
    } else for (const e of missing) add(`/spec/containers/${i}/env/-`, e);
    if (mountsOwn) return;
    if (c.volumeMounts) add(`/spec/containers/${i}/volumeMounts/-`, mount);
    else add(`/spec/containers/${i}/volumeMounts`, [mount]);
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
