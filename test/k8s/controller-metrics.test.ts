import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, installCrds, kubectlFor, kubectlRaw } from '../support/kubectl.js';
import { ROOT, spawnTollgate, stop } from '../support/processes.js';

/**
 * The controller started before its CRDs exist (the order a newcomer gets wrong), on a real API server:
 * it says so once, at info, waits, and reconciles once `kubectl apply -f crds/` is done, without a
 * restart and without a warning. Then its Prometheus metrics, scraped from GET /metrics: the
 * controller-runtime and client-go names, per kind, moving as objects are reconciled, fail and wait.
 */

type Json = Record<string, any>;

/** The value of one sample of a Prometheus text exposition; undefined when it is not there. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

describe('the controller before its CRDs, and its metrics, on a real Kubernetes API server', () => {
  let cluster: KubeCluster;
  let kubectl: (...args: string[]) => Promise<string>;
  let t: TestApp;
  let slug: string;
  let controller: ReturnType<typeof spawnTollgate>;
  let metricsUrl: string;
  let controllerApiUrl: string;
  let credentials: { client_id: string; client_secret: string };

  const scrape = async () => {
    const res = await fetch(metricsUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };
  const apply = async (o: Json) => kubectlRaw(cluster, ['apply', '-f', '-'], JSON.stringify(o));
  const example = (name: string) => parse(readFileSync(path.join(ROOT, 'examples', `${name}.yaml`), 'utf8')) as Json;
  const devAgent = (name: string) => {
    const a = example('agent');
    a.metadata = { name, namespace: 'default' };
    Object.assign(a.spec, { environment: 'development', tools: [], delegations: [] });
    return a;
  };
  const ready = async (kind: string, name: string) =>
    (JSON.parse(await kubectl('get', `${kind}.tollgate.dev`, name, '-o', 'json')) as Json).status?.conditions?.find((c: Json) => c.type === 'Ready');

  beforeAll(async () => {
    cluster = await startKube();
    kubectl = kubectlFor(cluster);
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const admin = await onboardAdmin(t.app); // the developer plan: production agents are refused
    slug = admin.tenant.slug;
    const sa = await admin.client.post(api('/service-accounts'), { name: 'kubernetes-controller', roles: ['controller', 'auditor'] });
    expect(sa.statusCode).toBe(201);
    credentials = sa.json();
    controllerApiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    controller = spawnTollgate(['controller'], {
      KUBECONFIG: cluster.kubeconfigPath,
      TOLLGATE_API_URL: controllerApiUrl,
      TOLLGATE_CLIENT_ID: credentials.client_id,
      TOLLGATE_CLIENT_SECRET: credentials.client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_LEASE_SECONDS: '3',
      TOLLGATE_METRICS_PORT: '0',
      POD_NAME: 'controller-metrics',
      LOG_LEVEL: 'info',
    });
    const port = await eventually(() => /"port":(\d+),"path":"\/metrics","msg":"metrics: serving"/.exec(controller.output())?.[1], 20_000, 'metrics serving');
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
  }, 30 * 60_000);

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`--- controller\n${controller?.output().split('\n').slice(-60).join('\n')}`));
  });

  afterAll(async () => {
    await stop(controller);
    await t?.close();
    await cluster?.stop();
  }, 60_000);

  it('waits for its CRDs with one info line, then reconciles without a restart and without a warning', async () => {
    await eventually(() => /waiting for the tollgate\.dev CRDs \(kubectl apply -f crds\/\)/.test(controller.output()), 20_000, 'the waiting line');
    // Leading already (the Lease needs no CRD), but no work queue yet.
    const before = await scrape();
    expect(sample(before, 'leader_election_master_status', { name: `tollgate-controller-${slug}` })).toBe(1);
    expect(sample(before, 'workqueue_depth', { name: 'agent' })).toBeUndefined();
    await new Promise((r) => setTimeout(r, 3500)); // a few of its looks (1 s, 2 s...)

    await installCrds(cluster);
    await apply(devAgent('after-crds'));
    await eventually(async () => (await ready('agents', 'after-crds'))?.status === 'True', 30_000, 'reconciled after the CRDs');

    const log = controller.output().split('\n').filter(Boolean);
    expect(controller.exitCode).toBeNull(); // the same process
    expect(log.filter((l) => l.includes('waiting for the tollgate.dev CRDs'))).toHaveLength(1);
    expect(log.some((l) => l.includes('the tollgate.dev CRDs are installed: starting'))).toBe(true);
    // A 404 status as a word: the organisation's slug holds the test's pid, which may contain the digits 404.
    expect(log.filter((l) => /\b404\b|Unknown API Status Code/.test(l))).toEqual([]);
    expect(log.filter((l) => /"level":(40|50|60)/.test(l))).toEqual([]);
  });

  it('serves the controller-runtime metrics on GET /metrics, per kind, and they move', async () => {
    let text = await scrape();
    for (const name of ['agent', 'tool', 'mcpserver', 'policy', 'egress']) {
      expect(sample(text, 'workqueue_depth', { name }), name).toBeDefined();
      expect(sample(text, 'workqueue_adds_total', { name }), name).toBeDefined();
      expect(sample(text, 'workqueue_retries_total', { name }), name).toBeDefined();
      expect(sample(text, 'workqueue_unfinished_work_seconds', { name }), name).toBeDefined();
      expect(sample(text, 'workqueue_longest_running_processor_seconds', { name }), name).toBeDefined();
      expect(sample(text, 'controller_runtime_max_concurrent_reconciles', { controller: name }), name).toBe(4);
      expect(sample(text, 'controller_runtime_active_workers', { controller: name }), name).toBe(0);
      for (const result of ['success', 'error', 'requeue', 'requeue_after']) {
        expect(sample(text, 'controller_runtime_reconcile_total', { controller: name, result }), `${name} ${result}`).toBeDefined();
      }
    }
    const success = sample(text, 'controller_runtime_reconcile_total', { controller: 'agent', result: 'success' })!;
    expect(success).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'controller_runtime_reconcile_time_seconds_count', { controller: 'agent' })).toBeGreaterThanOrEqual(success);
    expect(sample(text, 'workqueue_adds_total', { name: 'agent' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'workqueue_queue_duration_seconds_count', { name: 'agent' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'workqueue_work_duration_seconds_count', { name: 'agent' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'leader_election_master_status', { name: `tollgate-controller-${slug}` })).toBe(1);
    expect(sample(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_heap_size_used_bytes')).toBeGreaterThan(0);

    // Another Agent: one more success.
    await apply(devAgent('second-agent'));
    await eventually(async () => (await ready('agents', 'second-agent'))?.status === 'True', 15_000, 'second Ready');
    text = await scrape();
    expect(sample(text, 'controller_runtime_reconcile_total', { controller: 'agent', result: 'success' })).toBeGreaterThan(success);

    // A production Agent on the developer plan: the API refuses it, the reconcile fails and is retried.
    const errors = sample(text, 'controller_runtime_reconcile_errors_total', { controller: 'agent' })!;
    const prod = example('agent');
    prod.metadata = { name: 'refused-agent', namespace: 'default' };
    Object.assign(prod.spec, { tools: [], delegations: [] });
    await apply(prod);
    await eventually(async () => (await ready('agents', 'refused-agent'))?.reason === 'RegistryRefused', 15_000, 'refused');
    await eventually(async () => {
      const now = await scrape();
      return (
        sample(now, 'controller_runtime_reconcile_errors_total', { controller: 'agent' })! > errors &&
        sample(now, 'controller_runtime_reconcile_total', { controller: 'agent', result: 'error' })! > errors &&
        sample(now, 'workqueue_retries_total', { name: 'agent' })! >= 1
      );
    }, 10_000, 'the error counted');

    // A Tool whose MCPServer is not there: the reconcile waits (RequeueAfter).
    await apply(example('tool'));
    await eventually(async () => (await ready('tools', 'payments-transfer'))?.reason === 'MCPServerNotReady', 15_000, 'waiting');
    await eventually(async () => sample(await scrape(), 'controller_runtime_reconcile_total', { controller: 'tool', result: 'requeue_after' })! >= 1, 10_000, 'requeue_after counted');

    const other = await fetch(metricsUrl.replace('/metrics', '/other'));
    expect(other.status).toBe(404);
  });

  it('refuses a bad metrics, egress or poll setting at start, naming it (exit 78)', async () => {
    const refuse = async (env: Record<string, string>, message: RegExp) => {
      const child = spawnTollgate(['controller'], {
        KUBECONFIG: cluster.kubeconfigPath,
        TOLLGATE_API_URL: 'http://127.0.0.1:9',
        TOLLGATE_CLIENT_ID: 'tgsa_x',
        TOLLGATE_CLIENT_SECRET: 'not-used',
        ...env,
      });
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code, child.output()).toBe(78);
      expect(child.output()).toMatch(message);
    };
    // Each started, refused and exited before it touches the cluster or the API.
    await refuse({ TOLLGATE_METRICS_PORT: 'metrics' }, /TOLLGATE_METRICS_PORT must be a port \(0 for any free one\) or off/);
    await refuse({ TOLLGATE_EGRESS_POLICY: 'yes' }, /TOLLGATE_EGRESS_POLICY must be true or false/);
    await refuse({ TOLLGATE_EGRESS_DNS: 'kube-system' }, /TOLLGATE_EGRESS_DNS "kube-system" is neither <namespace>\/<label>=<value> nor a CIDR/);
    await refuse({ TOLLGATE_STATUS_POLL_SECONDS: '0' }, /TOLLGATE_STATUS_POLL_SECONDS must be an integer from 1 to 3600/);
  }, 120_000); // a process start each

  it('keeps running without metrics when its metrics port is taken', async () => {
    const port = Number(new URL(metricsUrl).port);
    const child = spawnTollgate(['controller'], {
      KUBECONFIG: cluster.kubeconfigPath,
      TOLLGATE_API_URL: controllerApiUrl,
      TOLLGATE_CLIENT_ID: credentials.client_id,
      TOLLGATE_CLIENT_SECRET: credentials.client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_METRICS_PORT: String(port), // the first controller's
      TOLLGATE_EGRESS_POLICY: 'false',
      POD_NAME: 'controller-standby',
    });
    try {
      await eventually(() => /controller starting/.test(child.output()), 20_000, 'the second controller started');
      expect(child.output()).toMatch(/"level":50.*"msg":"metrics: cannot listen; serving none \(set TOLLGATE_METRICS_PORT\)"/);
      expect(child.output()).toMatch(/egress policies: off \(TOLLGATE_EGRESS_POLICY=false\)/);
      expect(child.exitCode).toBeNull();
      // A standby: the first one still holds the Lease and serves the metrics.
      expect(sample(await scrape(), 'leader_election_master_status', { name: `tollgate-controller-${slug}` })).toBe(1);
    } finally {
      await stop(child);
    }
    expect(child.exitCode).toBe(0);
  });
});
