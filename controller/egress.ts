import { createHash } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import {
  CoreV1Api,
  DiscoveryV1Api,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1NetworkPolicy,
  type V1NetworkPolicyEgressRule,
  type V1NetworkPolicyPeer,
  type V1Pod,
  type V1Service,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Informer, type EventType } from './informers.js';
import { objectKey, statusOf, type ResourceRef } from './kube.js';
import type { ControllerMetrics } from './metrics.js';
import type { ObjectWriter } from './objects.js';
import { WorkQueue } from './queue.js';
import { sameJson } from './resources.js';
import { INJECT_LABEL, MCP_ANNOTATION, POD_ID_LABEL } from './webhook/inject.js';

/** The pods that ask for the sidecar; the controller gives each an egress NetworkPolicy of its own. */
export const PODS: ResourceRef = { group: '', version: 'v1', plural: 'pods' };
export const NETWORK_POLICIES: ResourceRef = { group: 'networking.k8s.io', version: 'v1', plural: 'networkpolicies' };
const MANAGED_BY = 'app.kubernetes.io/managed-by';
const MANAGER = 'tollgate-controller';
/** The policies the controller made (and watches, to put back an edited or deleted one). */
export const EGRESS_POLICY_SELECTOR = `${MANAGED_BY}=${MANAGER},${POD_ID_LABEL}`;
/** Annotation on a policy: the name of its pod (a label value could not hold every pod name). */
export const POD_ANNOTATION = 'tollgate.dev/pod';
/** Annotation on a policy: a digest of what it was made from, to tell an edit (drift) from a new input. */
export const INPUTS_ANNOTATION = 'tollgate.dev/egress-inputs';
const NAMESPACE_NAME = 'kubernetes.io/metadata.name';

/** `tollgate-egress-<pod>`, shortened with a digest when the pod's name is near the 253-character limit. */
export function egressPolicyName(podName: string): string {
  const name = `tollgate-egress-${podName}`;
  if (name.length <= 253) return name;
  const digest = createHash('sha256').update(podName).digest('hex').slice(0, 10);
  return `${name.slice(0, 242).replace(/[-.]+$/, '')}-${digest}`;
}

/** The DNS servers agent pods may reach: pods of a namespace by one label, or an address block. */
export type DnsPeer = { namespace: string; podLabels: Record<string, string> } | { cidr: string };

/**
 * TOLLGATE_EGRESS_DNS: comma-separated entries, each `<namespace>/<label>=<value>` (the DNS pods) or a
 * CIDR (NodeLocal DNSCache's link-local address, a resolver outside the cluster). Throws on a bad entry.
 */
export function parseDnsPeers(raw: string): DnsPeer[] {
  const peers = raw
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)
    .map((entry): DnsPeer => {
      const pods = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([A-Za-z0-9./_-]+)=([A-Za-z0-9._-]*)$/.exec(entry);
      if (pods) return { namespace: pods[1]!, podLabels: { [pods[3]!]: pods[4]! } };
      const [ip, bits, extra] = entry.split('/');
      const family = isIP(ip ?? '');
      const max = family === 6 ? 128 : 32;
      if (family && extra === undefined && (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= max))) {
        return { cidr: bits === undefined ? `${ip}/${max}` : entry };
      }
      throw new Error(`"${entry}" is neither <namespace>/<label>=<value> nor a CIDR`);
    });
  if (!peers.length) throw new Error('names no DNS server');
  return peers;
}

export interface EgressSettings {
  /** The central API as agent pods reach it (the sidecar's TOLLGATE_API_URL). */
  apiUrl: string;
  dns: DnsPeer[];
}

/** What resolving a destination needs from the cluster and the resolver (a dependency: tests see the real ones). */
export interface Directory {
  service(namespace: string, name: string): Promise<V1Service | undefined>;
  /** The addresses and ports of a Service without a selector (its EndpointSlices). */
  endpoints(namespace: string, name: string): Promise<{ addresses: string[]; ports: { name?: string; port: number }[] }>;
  lookupHost(host: string): Promise<string[]>;
}

export function clusterDirectory(kc: KubeConfig): Directory {
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  // Services change rarely and every pod of an agent names the same ones: 30 s of staleness is cheap.
  const cache = new Map<string, { at: number; service: V1Service | undefined }>();
  return {
    async service(namespace, name) {
      const key = `${namespace}/${name}`;
      const hit = cache.get(key);
      if (hit && Date.now() - hit.at < 30_000) return hit.service;
      let service: V1Service | undefined;
      try {
        service = await core.readNamespacedService({ namespace, name });
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
      }
      cache.set(key, { at: Date.now(), service });
      return service;
    },
    async endpoints(namespace, name) {
      const slices = await discovery.listNamespacedEndpointSlice({ namespace, labelSelector: `kubernetes.io/service-name=${name}` });
      const addresses = slices.items.flatMap((s) => s.endpoints.flatMap((e) => (e.conditions?.ready === false ? [] : e.addresses)));
      const ports = slices.items.flatMap((s) => (s.ports ?? []).filter((p) => p.port).map((p) => ({ name: p.name, port: p.port! })));
      return { addresses: [...new Set(addresses)], ports };
    },
    async lookupHost(host) {
      return (await dnsLookup(host, { all: true })).map((a) => a.address);
    },
  };
}

/** One destination: the rule allowing it, or why it could not be allowed. */
export type Resolved = { rule: V1NetworkPolicyEgressRule; what: string } | { problem: string };

const ipBlock = (address: string): V1NetworkPolicyPeer => ({ ipBlock: { cidr: `${address}/${isIP(address) === 6 ? 128 : 32}` } });

/**
 * The egress rule that lets a pod of `podNamespace` open connections to `url`'s host and port, as the
 * pod's network sees it:
 * - an in-cluster Service (`name`, `name.namespace`, `name.namespace.svc[.<cluster domain>]`): the pods its
 *   selector picks in its namespace, on the Service port's targetPort (NetworkPolicy applies after the
 *   Service's address translation, so the pods' port is what counts); a Service without a selector: the
 *   addresses of its EndpointSlices; an ExternalName Service: its external name, as below;
 * - an IP address: that address (/32 or /128);
 * - any other host name: the addresses it resolves to now, from the controller (NetworkPolicy has no host
 *   names); a host whose addresses change is reallowed at the next reconcile (the resync).
 */
export async function resolveDestination(url: string, podNamespace: string, dir: Directory): Promise<Resolved> {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { problem: `"${url}" is not a URL` };
  }
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  const tcp = (p: number | string) => ({ protocol: 'TCP', port: p });
  if (isIP(host)) return { rule: { to: [ipBlock(host)], ports: [tcp(port)] }, what: `${host}:${port}` };

  const labels = host.toLowerCase().split('.');
  const inCluster = labels.length === 1 || labels[2] === 'svc';
  const candidate =
    labels.length === 1
      ? { namespace: podNamespace, name: labels[0]! }
      : labels.length === 2 || labels[2] === 'svc'
        ? { namespace: labels[1]!, name: labels[0]! }
        : undefined;
  const service = candidate ? await dir.service(candidate.namespace, candidate.name) : undefined;
  if (service && candidate && service.spec?.type !== 'ExternalName') {
    const what = `Service ${candidate.namespace}/${candidate.name} port ${port}`;
    const sp = (service.spec?.ports ?? []).find((p) => p.port === port);
    if (!sp) return { problem: `${what}: the Service has no such port` };
    const selector = service.spec?.selector ?? {};
    if (Object.keys(selector).length) {
      const target = sp.targetPort ?? sp.port;
      return {
        rule: {
          to: [{ namespaceSelector: { matchLabels: { [NAMESPACE_NAME]: candidate.namespace } }, podSelector: { matchLabels: selector } }],
          ports: [tcp(/^\d+$/.test(String(target)) ? Number(target) : target)],
        },
        what,
      };
    }
    const eps = await dir.endpoints(candidate.namespace, candidate.name);
    const epPort = eps.ports.find((p) => p.name === sp.name) ?? (eps.ports.length === 1 ? eps.ports[0] : undefined);
    if (!eps.addresses.length || !epPort) return { problem: `${what}: a Service without a selector and without ready endpoints` };
    return { rule: { to: eps.addresses.map(ipBlock), ports: [tcp(epPort.port)] }, what };
  }
  if (inCluster && !service) return { problem: `Service ${candidate!.namespace}/${candidate!.name} does not exist` };
  const external = service?.spec?.externalName ?? host;
  try {
    const addresses = await dir.lookupHost(external);
    if (!addresses.length) return { problem: `${external} resolves to no address` };
    return { rule: { to: [...new Set(addresses)].sort().map(ipBlock), ports: [tcp(port)] }, what: `${external}:${port} (${addresses.length} address(es) now)` };
  } catch (err) {
    return { problem: `${external} does not resolve (${err instanceof Error ? err.message : String(err)})` };
  }
}

/** The MCP upstreams' URLs a pod declares (tollgate.dev/mcp-upstreams); a malformed annotation declares none. */
export function declaredUpstreams(pod: V1Pod): { urls: string[]; problem?: string } {
  const raw = pod.metadata?.annotations?.[MCP_ANNOTATION];
  if (raw === undefined) return { urls: [] };
  try {
    const list = JSON.parse(raw) as { url?: unknown }[];
    if (!Array.isArray(list) || !list.every((u) => typeof u?.url === 'string')) throw new Error();
    return { urls: list.map((u) => u.url as string) };
  } catch {
    return { urls: [], problem: `the annotation ${MCP_ANNOTATION} is not a JSON list of {"name", "url", "toolPrefix"}` };
  }
}

/** The egress rules a pod gets: the API, DNS, and each upstream it declares; with what could not be allowed. */
export async function egressRules(pod: V1Pod, settings: EgressSettings, dir: Directory): Promise<{ rules: V1NetworkPolicyEgressRule[]; allowed: string[]; problems: string[] }> {
  const namespace = pod.metadata!.namespace!;
  const rules: V1NetworkPolicyEgressRule[] = [];
  const allowed: string[] = [];
  const problems: string[] = [];
  const add = (r: Resolved, role: string) => {
    if ('problem' in r) problems.push(`${role}: ${r.problem}`);
    else if (!rules.some((x) => sameJson(x, r.rule))) {
      rules.push(r.rule);
      allowed.push(`${role} ${r.what}`);
    }
  };
  add(await resolveDestination(settings.apiUrl, namespace, dir), 'the Tollgate API');
  rules.push({
    to: settings.dns.map((d): V1NetworkPolicyPeer =>
      'cidr' in d
        ? { ipBlock: { cidr: d.cidr } }
        : { namespaceSelector: { matchLabels: { [NAMESPACE_NAME]: d.namespace } }, podSelector: { matchLabels: d.podLabels } },
    ),
    ports: [
      { protocol: 'UDP', port: 53 },
      { protocol: 'TCP', port: 53 },
    ],
  });
  allowed.push('DNS');
  const upstreams = declaredUpstreams(pod);
  if (upstreams.problem) problems.push(upstreams.problem);
  for (const url of upstreams.urls) add(await resolveDestination(url, namespace, dir), 'MCP upstream');
  return { rules, allowed, problems };
}

/** The policy of one pod: selects it alone (its tollgate.dev/pod-id), egress only, owned by the pod. */
export function egressPolicy(pod: V1Pod, rules: V1NetworkPolicyEgressRule[], inputs: string): V1NetworkPolicy {
  const { name, namespace, uid } = pod.metadata as { name: string; namespace: string; uid: string };
  const podId = pod.metadata!.labels![POD_ID_LABEL]!;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: egressPolicyName(name),
      namespace,
      labels: { [MANAGED_BY]: MANAGER, [POD_ID_LABEL]: podId },
      annotations: { [POD_ANNOTATION]: name, [INPUTS_ANNOTATION]: inputs },
      // The garbage collector deletes the policy with its pod; foreground deletion of the pod waits for it.
      ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name, uid, controller: true, blockOwnerDeletion: true }],
    },
    spec: { podSelector: { matchLabels: { [POD_ID_LABEL]: podId } }, policyTypes: ['Egress'], egress: rules },
  };
}

/** A digest of what a pod's policy is made from: its id, its declared upstreams, the API and DNS settings. */
function inputsDigest(pod: V1Pod, settings: EgressSettings): string {
  const parts = [pod.metadata?.labels?.[POD_ID_LABEL], pod.metadata?.annotations?.[MCP_ANNOTATION] ?? '', settings.apiUrl, JSON.stringify(settings.dns)];
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 16);
}

/** Whether the stored policy is the desired one (fields the API server fills in aside). */
function samePolicy(stored: V1NetworkPolicy, desired: V1NetworkPolicy): boolean {
  const owner = stored.metadata?.ownerReferences?.find((o) => o.kind === 'Pod');
  const want = desired.metadata!.ownerReferences![0]!;
  return (
    sameJson(stored.spec, desired.spec) &&
    owner?.uid === want.uid &&
    owner.blockOwnerDeletion === true &&
    Object.entries(desired.metadata!.labels!).every(([k, v]) => stored.metadata?.labels?.[k] === v) &&
    stored.metadata?.annotations?.[INPUTS_ANNOTATION] === desired.metadata!.annotations![INPUTS_ANNOTATION]
  );
}

/** A pod's metadata is all the controller keeps of it: the labels, annotations, uid and timestamps. */
const podMetadata = (p: V1Pod): V1Pod => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { ...p.metadata, managedFields: undefined },
});

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export interface EgressControllerOptions {
  kubeConfig: KubeConfig;
  settings: EgressSettings;
  /** Whether the controller manages a namespace (its organisation's). */
  manages(namespace: string): Promise<boolean>;
  writer: ObjectWriter;
  log: Logger;
  metrics: ControllerMetrics;
  workers: number;
  directory?: Directory;
}

/**
 * The per-pod egress NetworkPolicies: an informer on the pods labelled tollgate.dev/inject=true and one on
 * the policies it made, a work queue keyed by the pod. A reconcile makes the pod's policy what its pod
 * and the settings say (created when missing, replaced when edited, deleted when the pod is gone), and
 * gives a pod without a unique tollgate.dev/pod-id one (its uid).
 */
export class EgressController {
  readonly queue: WorkQueue;
  readonly pods: Informer<V1Pod>;
  readonly policies: Informer<V1NetworkPolicy>;
  private readonly net: NetworkingV1Api;
  private readonly core: CoreV1Api;
  private readonly dir: Directory;
  private refused = false;
  /** The problems last logged for each pod. */
  private readonly problems = new Map<string, string>();

  constructor(private readonly opts: EgressControllerOptions) {
    const { kubeConfig: kc, log } = opts;
    this.net = kc.makeApiClient(NetworkingV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.dir = opts.directory ?? clusterDirectory(kc);
    this.queue = new WorkQueue({
      metrics: opts.metrics.queue('egress'),
      onError: (key, err) => log.warn({ pod: key, err: describe(err) }, 'egress policy reconcile failed; retrying with backoff'),
    });
    opts.metrics.controller('egress', this.queue, opts.workers);
    const onError = (what: string) => (err: unknown) => {
      if (statusOf(err) === 403) {
        if (!this.refused) log.warn({ err: describe(err) }, `egress policies: the controller may not watch ${what} (RBAC: charts/tollgate/templates/rbac.yaml); no per-pod policy until it may`);
        this.refused = true;
        return;
      }
      log.warn({ err: describe(err) }, `watch of ${what} failed; resuming with backoff`);
    };
    this.pods = new Informer<V1Pod>(kc, PODS, {
      labelSelector: `${INJECT_LABEL}=true`,
      transform: podMetadata,
      handlers: [{ queue: this.queue, predicate: podChanged }],
      onError: onError('pods'),
    });
    this.policies = new Informer<V1NetworkPolicy>(kc, NETWORK_POLICIES, {
      labelSelector: EGRESS_POLICY_SELECTOR,
      // An edited or deleted policy brings its pod back at once; creation is the controller's own write.
      handlers: [{ queue: this.queue, predicate: (type) => type !== 'ADDED', keysOf: (p) => ownerKeys(p) }],
      onError: onError('networkpolicies'),
    });
  }

  start(): void {
    this.pods.start();
    this.policies.start();
  }

  hasSynced(): boolean {
    return this.pods.hasSynced() && this.policies.hasSynced();
  }

  /** Every injected pod, and the pod of every policy (one whose pod is gone is deleted). */
  resync(): void {
    for (const pod of this.pods.list()) this.queue.add(objectKey(pod));
    for (const policy of this.policies.list()) for (const key of ownerKeys(policy)) this.queue.add(key);
  }

  run(): Promise<void> {
    return this.queue.run(this.opts.workers, (key) => this.opts.metrics.reconcile('egress', () => this.reconcile(key)));
  }

  async stop(): Promise<void> {
    await this.queue.shutDown();
    await Promise.all([this.pods.stop(), this.policies.stop()]);
  }

  async reconcile(key: string): Promise<void> {
    const [namespace, name] = key.split('/') as [string, string];
    const policyName = egressPolicyName(name);
    const stored = this.policies.get(`${namespace}/${policyName}`);
    const pod = this.pods.get(key);
    if (!pod) {
      this.problems.delete(key);
      // The pod is gone (the garbage collector deletes its policy too; where none runs, this does).
      if (stored) await this.deletePolicy(namespace, policyName, stored);
      return;
    }
    if (!(await this.opts.manages(namespace))) return;
    const uid = pod.metadata!.uid!;
    const podId = pod.metadata?.labels?.[POD_ID_LABEL];
    const twin = podId
      ? this.pods.list().find((p) => p.metadata?.namespace === namespace && p.metadata?.uid !== uid && p.metadata?.labels?.[POD_ID_LABEL] === podId && older(p, pod))
      : undefined;
    if (!podId || twin) {
      // Injected before the webhook labelled pods, or a copy of another pod's labels: its own id, its uid.
      await this.core.patchNamespacedPod({ namespace, name, body: { metadata: { labels: { [POD_ID_LABEL]: uid } } } }, mergePatch);
      this.opts.log.info({ pod: key, previous: podId ?? null }, `egress: labelled the pod ${POD_ID_LABEL}=${uid}`);
      return; // its watch event brings it back with the label
    }
    const { rules, allowed, problems } = await egressRules(pod, this.opts.settings, this.dir);
    const desired = egressPolicy(pod, rules, inputsDigest(pod, this.opts.settings));
    // Said once per pod and set of problems, not at every resync.
    const said = JSON.stringify(problems);
    if (problems.length && this.problems.get(key) !== said) this.opts.log.warn({ pod: key, problems }, 'egress: destinations left out of the pod\'s policy');
    this.problems.set(key, said);
    if (!stored) {
      try {
        await this.net.createNamespacedNetworkPolicy({ namespace, body: desired });
        this.opts.log.info({ pod: key, policy: policyName, allowed }, 'egress policy created');
        return;
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
      }
      // Made meanwhile (the cache lags our own write after a restart): compare with the stored one.
      const fresh = await this.net.readNamespacedNetworkPolicy({ namespace, name: policyName });
      return this.replace(key, fresh, desired, allowed);
    }
    if (!samePolicy(stored, desired)) await this.replace(key, stored, desired, allowed);
  }

  private async replace(key: string, stored: V1NetworkPolicy, desired: V1NetworkPolicy, allowed: string[]): Promise<void> {
    if (samePolicy(stored, desired)) return;
    const { namespace, name } = desired.metadata as { namespace: string; name: string };
    const drift = stored.metadata?.annotations?.[INPUTS_ANNOTATION] === desired.metadata!.annotations![INPUTS_ANNOTATION];
    // metadata.resourceVersion guards the write: a change made meanwhile answers 409 and the queue retries.
    await this.net.replaceNamespacedNetworkPolicy({
      namespace,
      name,
      body: { ...desired, metadata: { ...desired.metadata, resourceVersion: stored.metadata?.resourceVersion } },
    });
    if (!drift) {
      this.opts.log.info({ pod: key, policy: name, allowed }, 'egress policy updated');
      return;
    }
    const message = `the egress NetworkPolicy ${name} was changed outside Tollgate and was put back`;
    this.opts.log.warn({ pod: key, policy: name }, 'egress policy restored');
    const pod = this.pods.get(key);
    if (pod) {
      await this.opts.writer.event(pod, 'Warning', 'EgressPolicyRestored', message).catch((e: unknown) =>
        this.opts.log.warn({ pod: key, err: describe(e) }, 'event write failed'),
      );
    }
  }

  private async deletePolicy(namespace: string, name: string, stored: V1NetworkPolicy): Promise<void> {
    try {
      await this.net.deleteNamespacedNetworkPolicy({
        namespace,
        name,
        // Only the policy the cache saw: one made meanwhile for a new pod of the same name stays.
        body: { preconditions: { uid: stored.metadata?.uid } },
      });
      this.opts.log.info({ policy: `${namespace}/${name}` }, 'egress policy deleted: its pod is gone');
    } catch (err) {
      if (statusOf(err) !== 404 && statusOf(err) !== 409) throw err;
    }
  }
}

/** The pod a policy belongs to, from its annotation (its owner reference names it too). */
function ownerKeys(p: V1NetworkPolicy): string[] {
  const pod = p.metadata?.annotations?.[POD_ANNOTATION] ?? p.metadata?.ownerReferences?.find((o) => o.kind === 'Pod')?.name;
  return pod && p.metadata?.namespace ? [`${p.metadata.namespace}/${pod}`] : [];
}

/** A pod's change matters to its policy when its labels, annotations or deletion change, not its status. */
function podChanged(type: EventType, pod: V1Pod, old: V1Pod | undefined): boolean {
  return (
    type !== 'MODIFIED' ||
    !sameJson(pod.metadata?.labels, old?.metadata?.labels) ||
    !sameJson(pod.metadata?.annotations, old?.metadata?.annotations) ||
    !!pod.metadata?.deletionTimestamp !== !!old?.metadata?.deletionTimestamp
  );
}

function older(a: V1Pod, b: V1Pod): boolean {
  const ta = new Date(a.metadata?.creationTimestamp ?? 0).getTime();
  const tb = new Date(b.metadata?.creationTimestamp ?? 0).getTime();
  return ta !== tb ? ta < tb : (a.metadata?.name ?? '') < (b.metadata?.name ?? '');
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
