import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, kubectlRaw } from '../support/kubectl.js';
import { cachedBuild, ROOT } from '../support/processes.js';

/**
 * examples/production/: PostgreSQL high availability with CloudNativePG. The operator's own `Cluster` CRD
 * (scripts/fetch-module-files.sh, from its Go module) is applied to a real API server, and the example's
 * manifests pass `kubectl apply --dry-run=server`, so the API server validates them against the real schema
 * (the operator's admission webhook does not run here). The Cluster, the runtime role's Secret and the chart
 * values name the same roles, database and Secrets; `helm template -f values-production.yaml` renders objects
 * that read the operator's Secrets and that the API server accepts.
 */

const exec = promisify(execFile);
const DIR = path.join(ROOT, 'examples', 'production');
const DATABASE = path.join(DIR, 'database');
const CHART = path.join(ROOT, 'charts', 'tollgate');
const NS = 'tollgate-system';
/** The operator release whose Cluster CRD the example is validated against, and the CRD's file in its module. */
const CNPG = 'github.com/cloudnative-pg/cloudnative-pg@v1.27.0';
const CNPG_CRD = 'postgresql.cnpg.io_clusters.yaml';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const docs = (file: string): Json[] =>
  parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS()).filter((o) => o !== null);
const manifests = readdirSync(DATABASE).filter((f) => f.endsWith('.yaml')).sort().flatMap((f) => docs(path.join(DATABASE, f)));
const cluster = manifests.find((o) => o.kind === 'Cluster');
const secrets = manifests.filter((o) => o.kind === 'Secret');
const values = parse(readFileSync(path.join(DIR, 'values-production.yaml'), 'utf8')) as Json;

describe('examples/production: PostgreSQL HA with CloudNativePG', () => {
  let kube: KubeCluster | undefined;
  let crdProblem = '';
  let helmBin = '';
  let helmHome = '';

  const kubectl = async (args: string[], input?: string) => kubectlRaw(kube!, args, input);

  beforeAll(async () => {
    helmHome = mkdtempSync(path.join(tmpdir(), 'tollgate-helm-prod-'));
    const started = startKube();
    started.catch(() => undefined);
    helmBin = process.env.HELM ?? path.join(await cachedBuild('build-helm.sh'), 'helm');
    let crd = '';
    try {
      crd = path.join(await cachedBuild('fetch-module-files.sh', [CNPG, 'config/crd/bases', CNPG_CRD]), CNPG_CRD);
    } catch (err) {
      crdProblem = `the CloudNativePG CRD could not be fetched (scripts/fetch-module-files.sh): ${(err as Error).message}`;
    }
    kube = await started;
    await kubectl(['create', 'namespace', NS]);
    if (crd) {
      await kubectl(['apply', '--server-side', '-f', crd]);
      // kubectl wait fails instead of waiting while a just-created CRD has no conditions yet.
      await eventually(() => kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/clusters.postgresql.cnpg.io']), 60_000, 'the Cluster CRD Established');
    }
  }, 30 * 60_000);

  afterAll(async () => {
    await kube?.stop();
    if (helmHome) rmSync(helmHome, { recursive: true, force: true });
  }, 60_000);

  it('the Cluster: three instances on three nodes, a synchronous replica, the owner from initdb, the runtime role managed', () => {
    expect(cluster, 'a Cluster in examples/production/database/').toBeDefined();
    expect(cluster.apiVersion).toBe('postgresql.cnpg.io/v1');
    expect(cluster.metadata.namespace).toBe(NS);
    const spec = cluster.spec;
    expect(spec.instances).toBe(3);
    expect(spec.affinity).toMatchObject({ enablePodAntiAffinity: true, podAntiAffinityType: 'required', topologyKey: 'kubernetes.io/hostname' });
    expect(spec.postgresql.synchronous.number).toBeGreaterThanOrEqual(1);
    expect(spec.bootstrap.initdb).toMatchObject({ database: 'tollgate', owner: 'tollgate_owner' });
    expect(spec.enableSuperuserAccess).toBe(false);
    // No image from a named registry host in the example.
    expect(JSON.stringify(cluster)).not.toMatch(/ghcr\.io|docker\.io|quay\.io/);

    // The runtime role: the one the chart's migrations grant to (database.runtimeRole, DATABASE_RUNTIME_ROLE),
    // able to log in, and nothing that would let it past row-level security (the API refuses those).
    const roles = spec.managed.roles as Json[];
    expect(roles).toHaveLength(1);
    const role = roles[0];
    expect(role.name).toBe(values.database.runtimeRole);
    expect(role).toMatchObject({ ensure: 'present', login: true, superuser: false, bypassrls: false, createrole: false, createdb: false, replication: false });
    expect(role.name).not.toBe(spec.bootstrap.initdb.owner);
    expect(role.passwordSecret.name).toBe(values.database.existingSecret);
  });

  it('the Secrets and the chart values name the same roles, database and Secrets', () => {
    const runtime = secrets.find((s) => s.metadata.name === values.database.existingSecret);
    expect(runtime, `a Secret ${values.database.existingSecret}`).toBeDefined();
    // What CloudNativePG reads for a managed role's password, and what the chart reads as DATABASE_URL.
    expect(runtime.type).toBe('kubernetes.io/basic-auth');
    expect(runtime.metadata.labels['cnpg.io/reload']).toBe('true');
    expect(runtime.stringData.username).toBe(values.database.runtimeRole);
    const url = new URL(runtime.stringData[values.database.existingSecretKeys.url]);
    expect(url.protocol).toMatch(/^postgres(ql)?:$/);
    expect(decodeURIComponent(url.username)).toBe(values.database.runtimeRole);
    expect(decodeURIComponent(url.password)).toBe(runtime.stringData.password);
    expect(url.hostname).toBe(`${cluster.metadata.name}-rw.${NS}.svc`); // the primary, wherever it fails over to
    expect(url.pathname).toBe(`/${cluster.spec.bootstrap.initdb.database}`);
    // The owner's URL is the Secret the operator writes for the initdb owner: <cluster>-app, key uri.
    expect(values.database.existingMigrationSecret).toBe(`${cluster.metadata.name}-app`);
    expect(values.database.existingSecretKeys.migrationUrl).toBe('uri');
    expect(secrets.map((s) => s.metadata.name)).not.toContain(`${cluster.metadata.name}-app`);
  });

  it('kubectl apply --dry-run=server accepts the manifests against the operator\'s real CRD, and refuses broken ones', async (ctx) => {
    if (crdProblem) ctx.skip(crdProblem);
    const { stdout, stderr } = await kubectl(['apply', '--dry-run=server', '-f', DATABASE]);
    expect(stdout.trim().split('\n').sort()).toEqual([
      `cluster.postgresql.cnpg.io/${cluster.metadata.name} created (server dry run)`,
      ...secrets.map((s) => `secret/${s.metadata.name} created (server dry run)`),
    ].sort());
    expect(stderr.trim()).toBe('');

    // The schema is really checked: a misspelt role attribute and a cluster of no instances are refused.
    const broken = (mutate: (c: Json) => void) => {
      const c = structuredClone(cluster);
      mutate(c);
      return JSON.stringify(c);
    };
    await expect(kubectl(['apply', '--dry-run=server', '-f', '-'], broken((c) => (c.spec.managed.roles[0].superUser = false)))).rejects.toThrow(/unknown field.*superUser/);
    await expect(kubectl(['apply', '--dry-run=server', '-f', '-'], broken((c) => (c.spec.instances = 0)))).rejects.toThrow(/spec\.instances/);
  });

  it('helm template -f values-production.yaml: the operator\'s Secrets by key, no database Secret of its own, valid for the API server', async () => {
    const { stdout } = await exec(helmBin, ['template', 'tollgate', CHART, '--namespace', NS, '-f', path.join(DIR, 'values-production.yaml')], {
      cwd: ROOT,
      maxBuffer: 32 << 20,
      env: { ...process.env, KUBECONFIG: '', HELM_CONFIG_HOME: path.join(helmHome, 'config'), HELM_CACHE_HOME: path.join(helmHome, 'cache'), HELM_DATA_HOME: path.join(helmHome, 'data') },
    });
    const objects = parseAllDocuments(stdout).map((d) => d.toJS()).filter((o) => o !== null) as Json[];
    const find = (kind: string, name: string) => objects.find((o) => o.kind === kind && o.metadata.name === name);
    const env = (container: Json, name: string) => (container.env as Json[]).find((e) => e.name === name);

    const api = find('Deployment', 'tollgate-api');
    expect(api.spec.replicas).toBe(3);
    const c = api.spec.template.spec.containers[0];
    expect(env(c, 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'tollgate-db-runtime', key: 'uri' });
    expect(env(c, 'DATABASE_RUNTIME_ROLE').value).toBe('tollgate_app');
    const job = find('Job', 'tollgate-migration').spec.template.spec.containers[0];
    expect(env(job, 'MIGRATION_DATABASE_URL').valueFrom.secretKeyRef).toMatchObject({ name: 'tollgate-db-app', key: 'uri' });
    const worker = find('Deployment', 'tollgate-worker').spec.template.spec.containers[0];
    expect(env(worker, 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'tollgate-db-runtime', key: 'uri' });
    // The database Secrets are the operator's and the example's: the chart creates none.
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual(['tollgate-webhook-tls']);
    expect(find('PodDisruptionBudget', 'tollgate-api').spec.minAvailable).toBe(2);
    expect(find('PodDisruptionBudget', 'tollgate-controller').spec.minAvailable).toBe(1);

    const file = path.join(kube!.dir, 'production.yaml');
    writeFileSync(file, stdout);
    const applied = await kubectl(['apply', '--dry-run=server', '-f', file]);
    const lines = applied.stdout.trim().split('\n');
    expect(lines.every((l) => l.endsWith(' created (server dry run)')), applied.stdout).toBe(true);
    expect(lines).toHaveLength(objects.length);
  });
});
