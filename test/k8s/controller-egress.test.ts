import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';
import { loopbackServingCert, startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, installCrds, kubectlFor, kubectlRaw } from '../support/kubectl.js';
import { freePort } from '../support/postgres-cluster.js';
import { cachedBuild, ROOT, spawnTollgate, stop } from '../support/processes.js';

/**
 * The per-pod egress NetworkPolicy on a real API server: the webhook labels each injected pod with its
 * own tollgate.dev/pod-id, and the controller (a process) makes a policy that selects that pod alone and
 * allows egress to the Tollgate API (an in-cluster Service, resolved to its pods and target port), DNS,
 * and the MCP upstreams the pod declares (a Service by its short name, a selector-less Service through
 * its EndpointSlice, an IP). The controller runs as the chart's ServiceAccount with the chart's RBAC
 * (helm template of templates/rbac.yaml), so a permission the chart lacks fails here. This API server
 * runs no kube-controller-manager, so no garbage collector:
 * the test checks the owner reference the collector would act on, and that the controller itself deletes
 * the policy of a pod that is gone.
 */

type Json = Record<string, any>;

describe('egress NetworkPolicy per injected pod, on a real Kubernetes API server', () => {
  let cluster: KubeCluster;
  let kubectl: (...args: string[]) => Promise<string>;
  let t: TestApp;
  let controller: ReturnType<typeof spawnTollgate>;
  const namespace = 'agents';
  const exec = promisify(execFile);

  /**
   * A kubeconfig for the chart's controller ServiceAccount (release `tg` in namespace `tollgate`), bound by
   * the chart's own ClusterRoles and leader-election Role, with a token from the TokenRequest API.
   */
  const chartIdentity = async (): Promise<string> => {
    const helm = path.join(await cachedBuild('build-helm.sh'), 'helm');
    const home = mkdtempSync(path.join(tmpdir(), 'tollgate-helm-'));
    try {
      const { stdout } = await exec(helm, ['template', 'tg', path.join(ROOT, 'charts', 'tollgate'), '--namespace', 'tollgate',
        '--show-only', 'templates/rbac.yaml', '--show-only', 'templates/serviceaccounts.yaml'], {
        env: { ...process.env, KUBECONFIG: '', HELM_CONFIG_HOME: path.join(home, 'config'), HELM_CACHE_HOME: path.join(home, 'cache'), HELM_DATA_HOME: path.join(home, 'data') },
      });
      await kubectlRaw(cluster, ['apply', '-f', '-'], stdout);
      const account = parseAllDocuments(stdout).map((d) => d.toJS() as Json).find((o) => o?.kind === 'ServiceAccount' && o.metadata.name.endsWith('-controller'))!;
      const token = (await kubectl('create', 'token', account.metadata.name, '-n', 'tollgate', '--duration', '2h')).trim();
      const file = path.join(cluster.dir, 'controller-kubeconfig');
      writeFileSync(file, JSON.stringify({
        apiVersion: 'v1', kind: 'Config',
        clusters: [{ name: 'test', cluster: { server: cluster.server, 'certificate-authority-data': Buffer.from(cluster.caPem).toString('base64') } }],
        users: [{ name: 'controller', user: { token } }],
        contexts: [{ name: 'test', context: { cluster: 'test', user: 'controller' } }],
        'current-context': 'test',
      }), { mode: 0o600 });
      return file;
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  };

  const create = async (obj: Json) => JSON.parse((await kubectlRaw(cluster, ['create', '-o', 'json', '-f', '-'], JSON.stringify(obj))).stdout) as Json;
  const getJson = async (...args: string[]) => JSON.parse(await kubectl('get', ...args, '-o', 'json')) as Json;
  const policyOf = async (pod: string) => getJson('networkpolicy', `tollgate-egress-${pod}`, '-n', namespace);
  const upstreams = JSON.stringify([
    { name: 'payments', url: 'http://payments-mcp:9000/mcp', toolPrefix: 'payments' },
    { name: 'legacy', url: 'http://legacy-mcp.tools.svc.cluster.local/mcp', toolPrefix: 'legacy' },
    { name: 'partner', url: 'https://10.20.30.40:8443/mcp', toolPrefix: 'partner' },
    { name: 'ghost', url: 'http://ghost-mcp:7000/mcp', toolPrefix: 'ghost' },
  ]);
  const agentPod = (annotations: Record<string, string> = {}) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'payments-worker-',
      namespace,
      labels: { 'tollgate.dev/inject': 'true', app: 'payments-worker' },
      annotations: { 'tollgate.dev/agent': 'egress-agent', 'tollgate.dev/mcp-upstreams': upstreams, ...annotations },
    },
    spec: { containers: [{ name: 'agent', image: 'example.com/payments-agent:1' }] },
  });

  beforeAll(async () => {
    cluster = await startKube();
    kubectl = kubectlFor(cluster);
    await installCrds(cluster);
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const apiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    const admin = await onboardAdmin(t.app);
    const sa = await admin.client.post(api('/service-accounts'), { name: 'kubernetes-controller' });
    expect(sa.statusCode).toBe(201);

    // What the policies resolve: the API's Service (named port), an upstream Service of the pods'
    // namespace, and a selector-less one whose endpoints are listed by hand (no controller makes them here).
    for (const ns of [namespace, 'tollgate', 'tools']) await kubectl('create', 'namespace', ns);
    await create({
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'tollgate-api', namespace: 'tollgate' },
      spec: { selector: { 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/component': 'api' }, ports: [{ port: 8080, targetPort: 'http' }] },
    });
    await create({
      apiVersion: 'v1', kind: 'Service', metadata: { name: 'payments-mcp', namespace },
      spec: { selector: { app: 'payments-mcp' }, ports: [{ name: 'mcp', port: 9000, targetPort: 8000 }] },
    });
    await create({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'legacy-mcp', namespace: 'tools' }, spec: { ports: [{ name: 'web', port: 80, targetPort: 8080 }] } });
    await create({
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
      metadata: { name: 'legacy-mcp-1', namespace: 'tools', labels: { 'kubernetes.io/service-name': 'legacy-mcp' } },
      addressType: 'IPv4', endpoints: [{ addresses: ['10.1.2.3'] }, { addresses: ['10.1.2.4'] }], ports: [{ name: 'web', port: 8080, protocol: 'TCP' }],
    });

    const certDir = path.join(cluster.dir, 'webhook-tls');
    await loopbackServingCert(cluster, certDir);
    const webhookPort = await freePort();
    const kubeconfig = await chartIdentity();
    controller = spawnTollgate(['controller'], {
      KUBECONFIG: kubeconfig,
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_CLIENT_ID: sa.json().client_id,
      TOLLGATE_CLIENT_SECRET: sa.json().client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'tollgate', // where the chart's leader-election Role is
      TOLLGATE_LEASE_SECONDS: '3',
      TOLLGATE_RESYNC_SECONDS: '300', // repairs below come from the watches, not the resync
      TOLLGATE_METRICS_PORT: 'off',
      TOLLGATE_WEBHOOK_CERT_DIR: certDir,
      TOLLGATE_WEBHOOK_PORT: String(webhookPort),
      TOLLGATE_SIDECAR_IMAGE: 'registry.example.com/tollgate:test',
      // The API as the agent pods reach it: through its Service (the chart's value).
      TOLLGATE_SIDECAR_API_URL: 'http://tollgate-api.tollgate.svc.cluster.local:8080',
      POD_NAME: 'controller-egress',
      LOG_LEVEL: 'info',
    });

    const agent = parse(readFileSync(path.join(ROOT, 'examples', 'agent.yaml'), 'utf8')) as Json;
    agent.metadata = { name: 'egress-agent', namespace };
    Object.assign(agent.spec, { environment: 'development', tools: [], delegations: [] });
    await kubectlRaw(cluster, ['apply', '-f', '-'], JSON.stringify(agent));
    await eventually(async () => {
      const a = await getJson('agents.tollgate.dev', 'egress-agent', '-n', namespace);
      return a.status?.conditions?.find((c: Json) => c.type === 'Ready')?.status === 'True';
    }, 30_000, 'the Agent Ready');
    await kubectlRaw(cluster, ['apply', '-f', '-'], JSON.stringify({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'tollgate-sidecar-injector' },
      webhooks: [{
        name: 'inject.tollgate.dev',
        clientConfig: { url: `https://127.0.0.1:${webhookPort}/mutate-v1-pod`, caBundle: Buffer.from(cluster.caPem).toString('base64') },
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        objectSelector: { matchLabels: { 'tollgate.dev/inject': 'true' } },
        failurePolicy: 'Fail', sideEffects: 'None', admissionReviewVersions: ['v1'], reinvocationPolicy: 'IfNeeded', timeoutSeconds: 10,
      }],
    }));
  }, 30 * 60_000);

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`--- controller\n${controller?.output().split('\n').slice(-60).join('\n')}`));
  });

  afterAll(async () => {
    await stop(controller);
    await t?.close();
    await cluster?.stop();
  }, 60_000);

  /** A pod created through the webhook (retried while the configuration reaches the admission chain). */
  const injected = async (annotations: Record<string, string> = {}) => {
    const pod = await eventually(async () => {
      const p = await create(agentPod(annotations));
      if (!p.spec.initContainers?.length) {
        await kubectl('delete', 'pod', p.metadata.name, '-n', namespace);
        return undefined;
      }
      return p;
    }, 15_000, 'a pod injected');
    return pod;
  };

  let first: Json;

  it('gives an injected pod a policy that selects it alone and allows only the API, DNS and its declared upstreams', async () => {
    first = await injected();
    const podId = first.metadata.labels['tollgate.dev/pod-id'] as string;
    expect(podId).toMatch(/^[0-9a-f-]{36}$/); // the admission request's uid: the pod had no name yet (generateName)
    expect(first.spec.initContainers[0].ports).toEqual([{ name: 'tg-metrics', containerPort: 15090, protocol: 'TCP' }]);
    expect(first.spec.initContainers[0].env).toContainEqual({ name: 'TOLLGATE_SIDECAR_METRICS_PORT', value: '15090' });

    const policy = await eventually(() => policyOf(first.metadata.name), 15_000, 'the policy');
    expect(policy.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'tollgate-controller', 'tollgate.dev/pod-id': podId });
    expect(policy.metadata.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: first.metadata.name, uid: first.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    expect(policy.spec.podSelector).toEqual({ matchLabels: { 'tollgate.dev/pod-id': podId } });
    expect(policy.spec.policyTypes).toEqual(['Egress']);
    expect(policy.spec.ingress).toBeUndefined();
    const ns = (name: string) => ({ matchLabels: { 'kubernetes.io/metadata.name': name } });
    expect(policy.spec.egress).toEqual([
      // The API's Service: its pods, on the target port (policies apply after the Service's translation).
      { to: [{ namespaceSelector: ns('tollgate'), podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/component': 'api' } } }], ports: [{ protocol: 'TCP', port: 'http' }] },
      { to: [{ namespaceSelector: ns('kube-system'), podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }], ports: [{ protocol: 'UDP', port: 53 }, { protocol: 'TCP', port: 53 }] },
      { to: [{ namespaceSelector: ns(namespace), podSelector: { matchLabels: { app: 'payments-mcp' } } }], ports: [{ protocol: 'TCP', port: 8000 }] },
      { to: [{ ipBlock: { cidr: '10.1.2.3/32' } }, { ipBlock: { cidr: '10.1.2.4/32' } }], ports: [{ protocol: 'TCP', port: 8080 }] },
      { to: [{ ipBlock: { cidr: '10.20.30.40/32' } }], ports: [{ protocol: 'TCP', port: 8443 }] },
    ]);
    // The chart's RBAC let it do all of that: no refusal in its log.
    expect(controller.output()).not.toMatch(/system:serviceaccount:tollgate:[\w-]+\\?" cannot|may not watch/);
    // An upstream that resolves to nothing is left out, and said so.
    await eventually(() => /ghost-mcp does not exist/.test(controller.output()), 5_000, 'the missing upstream logged');

    // A second replica of the same template: its own id, its own policy, selecting it alone.
    const second = await injected();
    const secondId = second.metadata.labels['tollgate.dev/pod-id'];
    expect(secondId).not.toBe(podId);
    const secondPolicy = await eventually(() => policyOf(second.metadata.name), 15_000, 'the second policy');
    expect(secondPolicy.spec.podSelector.matchLabels).toEqual({ 'tollgate.dev/pod-id': secondId });
    const pods = (await getJson('pods', '-n', namespace, '-l', `tollgate.dev/pod-id=${secondId}`)).items as Json[];
    expect(pods.map((p) => p.metadata.name)).toEqual([second.metadata.name]);
  });

  it('puts back an edited policy and recreates a deleted one, from its watch', async () => {
    const name = `tollgate-egress-${first.metadata.name}`;
    const before = await policyOf(first.metadata.name);
    // Someone opens the pod to the whole internet.
    const patched = JSON.parse(await kubectl('patch', 'networkpolicy', name, '-n', namespace, '--type=json', '-o', 'json', '-p',
      JSON.stringify([{ op: 'add', path: '/spec/egress/-', value: { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] } }]))) as Json;
    expect(patched.spec.egress).toHaveLength(6);
    await eventually(async () => (await policyOf(first.metadata.name)).spec.egress.length === 5, 10_000, 'the edit put back');
    expect((await policyOf(first.metadata.name)).spec).toEqual(before.spec);
    const events = await getJson('events', '-n', namespace, '--field-selector', `involvedObject.name=${first.metadata.name},reason=EgressPolicyRestored`);
    expect(events.items.length).toBeGreaterThan(0);
    expect(events.items[0].message).toMatch(/changed outside Tollgate and was put back/);
    expect(events.items[0].reportingComponent).toBe('tollgate.dev/controller');

    await kubectl('delete', 'networkpolicy', name, '-n', namespace);
    const again = await eventually(() => policyOf(first.metadata.name), 10_000, 'the policy recreated');
    expect(again.spec).toEqual(before.spec);
    expect(again.metadata.uid).not.toBe(before.metadata.uid);
  });

  it('follows a changed upstream annotation', async () => {
    const only = JSON.stringify([{ name: 'partner', url: 'http://10.20.30.41:9443/mcp', toolPrefix: 'partner' }]);
    await kubectl('annotate', 'pod', first.metadata.name, '-n', namespace, '--overwrite', `tollgate.dev/mcp-upstreams=${only}`);
    const policy = await eventually(async () => {
      const p = await policyOf(first.metadata.name);
      return p.spec.egress.length === 3 ? p : undefined;
    }, 10_000, 'the policy updated');
    expect(policy.spec.egress[2]).toEqual({ to: [{ ipBlock: { cidr: '10.20.30.41/32' } }], ports: [{ protocol: 'TCP', port: 9443 }] });
  });

  it('relabels a pod that copies another pod\'s id, so that no policy selects two pods', async () => {
    // A pod created with the sidecar already in it (the webhook leaves it as it is) and a copied id.
    const copy = agentPod();
    copy.metadata.labels = { ...first.metadata.labels };
    (copy.spec as Json).initContainers = first.spec.initContainers;
    (copy.spec as Json).volumes = first.spec.volumes;
    // Made in a later second than the original: creation times are whole seconds, and the controller tells two
    // pods of the same second apart by name, which would make the original the copy half the time.
    const later = new Date(first.metadata.creationTimestamp).getTime() + 1000;
    if (Date.now() < later) await new Promise((resolve) => setTimeout(resolve, later - Date.now()));
    const created = await create(copy);
    expect(created.metadata.labels['tollgate.dev/pod-id']).toBe(first.metadata.labels['tollgate.dev/pod-id']);
    const relabelled = await eventually(async () => {
      const p = await getJson('pod', created.metadata.name, '-n', namespace);
      return p.metadata.labels['tollgate.dev/pod-id'] === p.metadata.uid ? p : undefined;
    }, 10_000, 'the copy relabelled with its uid');
    const policy = await eventually(() => policyOf(relabelled.metadata.name), 10_000, 'its policy');
    expect(policy.spec.podSelector.matchLabels).toEqual({ 'tollgate.dev/pod-id': relabelled.metadata.uid });
    // The original keeps its id and its policy.
    expect((await getJson('pod', first.metadata.name, '-n', namespace)).metadata.labels['tollgate.dev/pod-id']).toBe(first.metadata.labels['tollgate.dev/pod-id']);
  });

  it('removes the policy with its pod: the owner reference for the garbage collector, and the controller where none runs', async () => {
    const name = `tollgate-egress-${first.metadata.name}`;
    const policy = await policyOf(first.metadata.name);
    expect(policy.metadata.ownerReferences[0]).toMatchObject({ uid: first.metadata.uid, blockOwnerDeletion: true });
    // No kube-controller-manager here: nothing but the controller can delete it.
    const managers = await kubectl('get', 'lease', '-n', 'kube-system', '-o', 'name').catch(() => '');
    expect(managers).not.toMatch(/kube-controller-manager/);
    await kubectl('delete', 'pod', first.metadata.name, '-n', namespace, '--wait=true');
    await eventually(async () => {
      try {
        await kubectl('get', 'networkpolicy', name, '-n', namespace);
        return false;
      } catch (err) {
        return /NotFound/.test(String(err));
      }
    }, 10_000, 'the policy deleted');
    await eventually(() => /egress policy deleted: its pod is gone/.test(controller.output()), 5_000, 'logged');
    // The other pods keep theirs.
    const left = (await getJson('networkpolicies', '-n', namespace)).items as Json[];
    expect(left.length).toBe(2);
  });
});
