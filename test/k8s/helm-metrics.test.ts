import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { ApiMetrics } from '../../api/platform/metrics.js';
import { ControllerMetrics } from '../../controller/metrics.js';
import { SidecarMetrics } from '../../sidecar/metrics.js';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { kubectlRaw } from '../support/kubectl.js';
import { cachedBuild, ROOT } from '../support/processes.js';

/**
 * The chart's monitoring objects (docs/metrics.md): off by default; on, a ServiceMonitor for the API and one
 * for the controller (with the controller's metrics Service), a PodMonitor for the sidecars and the Grafana
 * dashboard's ConfigMap, checked field by field; the dashboard reads only metrics the code registers; and on
 * the real API server, with the Prometheus Operator's own CRDs (scripts/fetch-module-files.sh),
 * the rendered monitors pass `kubectl apply --dry-run=server` and broken ones are refused.
 */

const exec = promisify(execFile);
const CHART = path.join(ROOT, 'charts', 'tollgate');
const NS = 'tollgate-system';
const RELEASE = 'tg';
const FULL = 'tg-tollgate';
/** The operator release whose ServiceMonitor and PodMonitor CRDs the chart's monitors are validated against. */
const PROMETHEUS_OPERATOR = 'github.com/prometheus-operator/prometheus-operator@v0.85.0';
const MONITOR_CRDS = ['monitoring.coreos.com_servicemonitors.yaml', 'monitoring.coreos.com_podmonitors.yaml'];

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: Json;
}

let helmBin = '';
let helmHome = '';
let cluster: KubeCluster | undefined;
let crdDir = '';
let crdProblem = '';

async function helm(args: string[]): Promise<string> {
  try {
    const { stdout } = await exec(helmBin, args, {
      cwd: ROOT,
      timeout: 60_000,
      maxBuffer: 32 << 20,
      env: {
        ...process.env,
        KUBECONFIG: '',
        HELM_CONFIG_HOME: path.join(helmHome, 'config'),
        HELM_CACHE_HOME: path.join(helmHome, 'cache'),
        HELM_DATA_HOME: path.join(helmHome, 'data'),
      },
    });
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    throw new Error(`helm ${args.join(' ')}: ${[e.stdout, e.stderr].filter(Boolean).join('\n') || e.message}`);
  }
}

async function render(values: object = {}): Promise<K8sObject[]> {
  const file = path.join(helmHome, `values-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, stringify(values));
  const out = await helm(['template', RELEASE, CHART, '--namespace', NS, '--values', file]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}

const ON = {
  metrics: {
    serviceMonitor: { enabled: true, interval: '15s', scrapeTimeout: '5s', labels: { release: 'kube-prometheus-stack' }, namespace: 'monitoring' },
    podMonitor: { enabled: true, labels: { release: 'kube-prometheus-stack' }, namespaces: ['agents-a', 'agents-b'] },
    grafanaDashboard: { enabled: true, labels: { team: 'platform' }, annotations: { grafana_folder: 'Tollgate' }, namespace: 'grafana' },
  },
};

/** Every metric a registry holds, with its type (a histogram also answers as _bucket, _sum and _count). */
async function registered(registry: Registry): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  for (const m of await registry.getMetricsAsJSON()) {
    const type = String(m.type);
    names.set(m.name, type);
    if (type === 'histogram' || type === 'summary') for (const s of ['_bucket', '_sum', '_count']) names.set(`${m.name}${s}`, type);
  }
  return names;
}

/**
 * The metric names a PromQL expression reads: what is left once label matchers, ranges, grouping clauses and
 * strings are taken out, less functions, aggregations and keywords.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const words = [...bare.matchAll(/(?<![\w$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)].map((m) => m[1]!);
  const keywords = new Set(['by', 'without', 'or', 'and', 'unless', 'bool', 'on', 'ignoring', 'offset', 'inf', 'nan']);
  return words.filter((w) => !keywords.has(w.toLowerCase()));
}

describe('chart: metrics objects (docs/metrics.md)', () => {
  beforeAll(async () => {
    helmHome = mkdtempSync(path.join(tmpdir(), 'tollgate-helm-metrics-'));
    const kube = startKube();
    kube.catch(() => undefined);
    helmBin = process.env.HELM ?? path.join(await cachedBuild('build-helm.sh'), 'helm');
    try {
      crdDir = await cachedBuild('fetch-module-files.sh', [PROMETHEUS_OPERATOR, 'example/prometheus-operator-crd', ...MONITOR_CRDS]);
    } catch (err) {
      crdProblem = `the Prometheus Operator CRDs could not be fetched (scripts/fetch-module-files.sh): ${(err as Error).message}`;
    }
    cluster = await kube;
  }, 30 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
    if (helmHome) rmSync(helmHome, { recursive: true, force: true });
  }, 60_000);

  it('renders no monitor, dashboard or metrics Service by default; the controller declares its metrics port', async () => {
    const objects = await render();
    expect(objects.filter((o) => ['ServiceMonitor', 'PodMonitor'].includes(o.kind))).toEqual([]);
    expect(objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.labels?.grafana_dashboard)).toEqual([]);
    expect(objects.filter((o) => /metrics/.test(o.metadata.name))).toEqual([]);
    const c = find(objects, 'Deployment', `${FULL}-controller`).spec.template.spec.containers[0];
    expect(c.env).toContainEqual({ name: 'TOLLGATE_METRICS_PORT', value: '9090' });
    expect(c.ports).toContainEqual({ name: 'metrics', containerPort: 9090, protocol: 'TCP' });
    // Without the webhook the metrics port stays.
    const off = find(await render({ webhook: { enabled: false } }), 'Deployment', `${FULL}-controller`).spec.template.spec.containers[0];
    expect(off.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
  });

  it('renders the ServiceMonitors, the controller metrics Service, the PodMonitor and the dashboard when enabled', async () => {
    const objects = await render({ ...ON, metrics: { ...ON.metrics, controller: { port: 9191 } } });

    const api = find(objects, 'ServiceMonitor', `${FULL}-api`);
    expect(api.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(api.metadata.namespace).toBe('monitoring');
    expect(api.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack', 'app.kubernetes.io/component': 'api' });
    expect(api.spec.namespaceSelector).toEqual({ matchNames: [NS] });
    expect(api.spec.endpoints).toEqual([{ port: 'http', path: '/metrics', scheme: 'http', interval: '15s', scrapeTimeout: '5s' }]);
    // The selector picks the API Service, and only it.
    const apiService = find(objects, 'Service', `${FULL}-api`);
    const selects = (sel: Record<string, string>) => objects.filter((o) => o.kind === 'Service' && Object.entries(sel).every(([k, v]) => o.metadata.labels?.[k] === v));
    expect(selects(api.spec.selector.matchLabels).map((s) => s.metadata.name)).toEqual([apiService.metadata.name]);
    expect(apiService.spec.ports.map((p: { name: string }) => p.name)).toContain('http');

    const ctl = find(objects, 'ServiceMonitor', `${FULL}-controller`);
    expect(ctl.metadata.namespace).toBe('monitoring');
    expect(ctl.spec.namespaceSelector).toEqual({ matchNames: [NS] });
    expect(ctl.spec.endpoints).toEqual([{ port: 'metrics', path: '/metrics', scheme: 'http', interval: '15s', scrapeTimeout: '5s' }]);
    const metricsService = find(objects, 'Service', `${FULL}-controller-metrics`);
    expect(selects(ctl.spec.selector.matchLabels).map((s) => s.metadata.name)).toEqual([metricsService.metadata.name]);
    expect(metricsService.metadata.namespace).toBe(NS);
    expect(metricsService.spec.ports).toEqual([{ name: 'metrics', port: 9191, targetPort: 'metrics', protocol: 'TCP' }]);
    // The Service reaches the controller pods' container port of that name.
    const pod = find(objects, 'Deployment', `${FULL}-controller`).spec.template;
    expect(Object.entries(metricsService.spec.selector).every(([k, v]) => pod.metadata.labels[k] === v)).toBe(true);
    expect(pod.spec.containers[0].ports).toContainEqual({ name: 'metrics', containerPort: 9191, protocol: 'TCP' });
    expect(pod.spec.containers[0].env).toContainEqual({ name: 'TOLLGATE_METRICS_PORT', value: '9191' });

    const sidecars = find(objects, 'PodMonitor', `${FULL}-sidecars`);
    expect(sidecars.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(sidecars.metadata.namespace).toBe(NS);
    expect(sidecars.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
    expect(sidecars.spec.selector).toEqual({ matchLabels: { 'tollgate.dev/inject': 'true' } });
    expect(sidecars.spec.namespaceSelector).toEqual({ matchNames: ['agents-a', 'agents-b'] });
    expect(sidecars.spec.podMetricsEndpoints).toEqual([{ port: 'tg-metrics', path: '/metrics', scheme: 'http', interval: '30s', scrapeTimeout: '10s' }]);
    const anywhere = find(await render({ metrics: { podMonitor: { enabled: true } } }), 'PodMonitor', `${FULL}-sidecars`);
    expect(anywhere.spec.namespaceSelector).toEqual({ any: true });

    const dashboard = find(objects, 'ConfigMap', `${FULL}-dashboard`);
    expect(dashboard.metadata.namespace).toBe('grafana');
    expect(dashboard.metadata.labels).toMatchObject({ grafana_dashboard: '1', team: 'platform' });
    expect(dashboard.metadata.annotations).toEqual({ grafana_folder: 'Tollgate' });
    expect(Object.keys(dashboard.data)).toEqual(['tollgate.json']);
    expect(JSON.parse(dashboard.data['tollgate.json'])).toEqual(JSON.parse(readFileSync(path.join(CHART, 'dashboards', 'tollgate.json'), 'utf8')));
  });

  it('refuses bad monitoring values, naming them', async () => {
    await expect(render({ metrics: { serviceMonitor: { enabled: true, interval: 'often' } } })).rejects.toThrow(/\/metrics\/serviceMonitor\/interval/);
    await expect(render({ metrics: { podMonitor: { enabled: 'sometimes' } } })).rejects.toThrow(/\/metrics\/podMonitor\/enabled/);
    await expect(render({ metrics: { controller: { port: 0 } } })).rejects.toThrow(/\/metrics\/controller\/port/);
    await expect(render({ metrics: { grafanaDashboard: { enabeld: true } } })).rejects.toThrow(/enabeld/);
  });

  it('the dashboard: Grafana JSON on a ${datasource} variable, reading only metrics the API, the controller and the sidecar register', async () => {
    const dashboard = JSON.parse(readFileSync(path.join(CHART, 'dashboards', 'tollgate.json'), 'utf8'));
    expect(dashboard).toMatchObject({ uid: 'tollgate', title: 'Tollgate', schemaVersion: expect.any(Number) });
    expect(dashboard.templating.list).toContainEqual(expect.objectContaining({ name: 'datasource', type: 'datasource', query: 'prometheus' }));

    // What the code registers, read from the registries themselves: a renamed metric fails here.
    const api = new ApiMetrics({ pool: { totalCount: 0, idleCount: 0, waitingCount: 0, options: { max: 1 } } });
    api.collectProcessMetrics();
    const known = new Map([
      ...(await registered(api.registry)),
      ...(await registered(new ControllerMetrics().registry)),
      ...(await registered(new SidecarMetrics().registry)),
    ]);
    expect(known.get('tollgate_decision_duration_seconds')).toBe('histogram');
    expect(known.get('controller_runtime_reconcile_total')).toBe('counter');

    const panels = dashboard.panels.filter((p: { type: string }) => p.type !== 'row');
    const ids = dashboard.panels.map((p: { id: number }) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const used = new Set<string>();
    for (const p of panels) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets) {
        expect(t.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
        const names = metricNames(t.expr);
        expect(names.length, `${p.title}: ${t.expr}`).toBeGreaterThan(0);
        for (const n of names) {
          expect(known.has(n), `${p.title}: ${n} is registered by no code`).toBe(true);
          used.add(n.replace(/_(bucket|sum|count)$/, (s) => (known.get(n.slice(0, -s.length)) ? '' : s)));
        }
      }
    }
    // The panels the issue names: each family appears.
    for (const n of [
      'tollgate_decisions_total',
      'tollgate_decision_reasons_total',
      'tollgate_decision_duration_seconds',
      'tollgate_decision_batch_size',
      'tollgate_token_exchanges_total',
      'tollgate_rate_limit_refusals_total',
      'tollgate_db_pool_connections',
      'controller_runtime_reconcile_total',
      'controller_runtime_reconcile_errors_total',
      'controller_runtime_reconcile_time_seconds',
      'workqueue_depth',
      'tollgate_sidecar_calls_total',
      'tollgate_sidecar_added_latency_seconds',
      'tollgate_sidecar_breaker_state',
    ]) {
      expect(used, n).toContain(n);
    }
    // The parser is no rubber stamp.
    expect(metricNames('sum by (le) (rate(tollgate_decisions_totl{decision="deny"}[5m]))')).toEqual(['tollgate_decisions_totl']);
  });

  it('the monitors pass the Prometheus Operator CRDs on the real API server, and broken ones are refused', async (ctx) => {
    if (!crdDir) {
      console.warn(crdProblem);
      ctx.skip();
    }
    const kube = cluster!;
    const kubectl = (args: string[], input?: string) => kubectlRaw(kube, args, input);
    for (const f of MONITOR_CRDS) {
      await kubectl(['apply', '--server-side', '-f', path.join(crdDir, f)]);
    }
    await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/servicemonitors.monitoring.coreos.com', 'crd/podmonitors.monitoring.coreos.com']);
    for (const ns of [NS, 'monitoring']) await kubectl(['create', 'namespace', ns]);

    const monitors = (await render(ON)).filter((o) => ['ServiceMonitor', 'PodMonitor'].includes(o.kind));
    expect(monitors.map((m) => `${m.kind}/${m.metadata.name}`).sort()).toEqual([
      `PodMonitor/${FULL}-sidecars`,
      `ServiceMonitor/${FULL}-api`,
      `ServiceMonitor/${FULL}-controller`,
    ]);
    const manifest = monitors.map((m) => stringify(m)).join('---\n');
    const { stdout, stderr } = await kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], manifest);
    expect(stderr).toBe('');
    expect(stdout).toContain(`servicemonitor.monitoring.coreos.com/${FULL}-api created (server dry run)`);
    expect(stdout).toContain(`podmonitor.monitoring.coreos.com/${FULL}-sidecars created (server dry run)`);

    // The schema is really checked: a misspelt field and a scheme the operator does not know are refused.
    const api = structuredClone(monitors.find((m) => m.metadata.name === `${FULL}-api`)!);
    api.spec.endpoints[0].pathh = '/metrics';
    await expect(kubectl(['apply', '--dry-run=server', '--validate=strict', '-f', '-'], stringify(api))).rejects.toThrow(/unknown field.*pathh/);
    const pm = structuredClone(monitors.find((m) => m.kind === 'PodMonitor')!);
    pm.spec.podMetricsEndpoints[0].scheme = 'gopher';
    await expect(kubectl(['apply', '--dry-run=server', '-f', '-'], stringify(pm))).rejects.toThrow(/scheme/);
  });
});
