import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, KUBECTL, kubectlRaw } from '../support/kubectl.js';
import { cachedBuild, ROOT } from '../support/processes.js';

/**
 * The Helm chart charts/tollgate: `helm lint`, `helm template` of the default values and of the
 * variants (their objects parsed and checked field by field), the values schema, the CRD copies, and
 * `helm install` / `upgrade` / `uninstall` on a real API server (test/support/kube-cluster.ts). That server
 * has no kubelet and no controllers: objects are stored, pods never run, so the migration hook's Job is
 * marked complete by the test, as the Job controller would once its pod exited 0.
 */

const exec = promisify(execFile);
const CHART = path.join(ROOT, 'charts', 'tollgate');
const NS = 'tollgate-system';
const RELEASE = 'tg';
const FULL = 'tg-tollgate';

/** A parsed Kubernetes object's fields, read as the assertions need them. */
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

/** scripts/build-helm.sh builds helm from test/helm's pin once per machine and prints its directory. */
async function buildHelm(): Promise<string> {
  if (process.env.HELM) return process.env.HELM;
  return path.join(await cachedBuild('build-helm.sh'), 'helm');
}

/** helm with its own config, cache and data directories (never the user's), optionally against the cluster. */
async function helm(args: string[], opts: { kube?: boolean; timeoutMs?: number } = {}): Promise<{ stdout: string; stderr: string }> {
  const argv = opts.kube ? ['--kubeconfig', cluster!.kubeconfigPath, ...args] : args;
  try {
    return await exec(helmBin, argv, { cwd: ROOT, env: helmEnv(), timeout: opts.timeoutMs ?? 60_000, maxBuffer: 32 << 20 });
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    // helm lint reports on stdout, other commands on stderr.
    throw new Error(`helm ${args.join(' ')}: ${[e.stdout, e.stderr].filter(Boolean).join('\n') || e.message}`);
  }
}

function helmEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    KUBECONFIG: '',
    HELM_CONFIG_HOME: path.join(helmHome, 'config'),
    HELM_CACHE_HOME: path.join(helmHome, 'cache'),
    HELM_DATA_HOME: path.join(helmHome, 'data'),
  };
}

/** `helm template` of the chart with --set values, parsed into its objects. */
async function render(set: string[] = [], extra: string[] = []): Promise<K8sObject[]> {
  const { stdout } = await helm(['template', RELEASE, CHART, '--namespace', NS, ...set.flatMap((s) => ['--set', s]), ...extra]);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
}

function find(objects: K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}

const kinds = (objects: K8sObject[]) => objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
const envNames = (container: Json): string[] => (container.env as { name: string }[]).map((e) => e.name);
const envOf = (container: Json, name: string): Json => (container.env as { name: string }[]).find((e) => e.name === name);

async function kubectl(...args: string[]): Promise<string> {
  return (await kubectlRaw(cluster!, args)).stdout;
}
async function getJson(...args: string[]): Promise<Json> {
  return JSON.parse(await kubectl('get', '-o', 'json', ...args));
}

const RESTRICTED_CONTAINER = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

describe('the Helm chart charts/tollgate', () => {
  let defaults: K8sObject[] = [];

  beforeAll(async () => {
    helmHome = mkdtempSync(path.join(tmpdir(), 'tollgate-helm-'));
    // The API server starts while helm is built or found in its cache.
    const kube = startKube();
    kube.catch(() => undefined);
    helmBin = await buildHelm();
    defaults = await render();
    cluster = await kube;
  }, 30 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
    if (helmHome) rmSync(helmHome, { recursive: true, force: true });
  }, 60_000);

  it('passes helm lint --strict', async () => {
    const { stdout } = await helm(['lint', '--strict', CHART]);
    expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it("carries crds/ byte for byte in the chart's crds/ (cp crds/*.yaml charts/tollgate/crds/ after make docs)", () => {
    const ours = readdirSync(path.join(ROOT, 'crds')).filter((f) => f.endsWith('.yaml')).sort();
    const chart = readdirSync(path.join(CHART, 'crds')).sort();
    expect(chart).toEqual(ours);
    for (const file of ours) {
      const a = readFileSync(path.join(ROOT, 'crds', file));
      const b = readFileSync(path.join(CHART, 'crds', file));
      expect(b.equals(a), `charts/tollgate/crds/${file} differs from crds/${file}`).toBe(true);
    }
  });

  it('renders the default objects, and nothing else', () => {
    expect(kinds(defaults)).toEqual(
      [
        `ClusterRole/${NS}-${FULL}-controller`,
        `ClusterRole/${NS}-${FULL}-controller-secrets`,
        `ClusterRoleBinding/${NS}-${FULL}-controller`,
        `ClusterRoleBinding/${NS}-${FULL}-controller-secrets`,
        `Deployment/${FULL}-api`,
        `Deployment/${FULL}-controller`,
        `Deployment/${FULL}-worker`,
        `Job/${FULL}-migration`,
        `MutatingWebhookConfiguration/${NS}-${FULL}-webhook`,
        `PodDisruptionBudget/${FULL}-api`,
        `PodDisruptionBudget/${FULL}-controller`,
        `Role/${FULL}-controller-leader-election`,
        `RoleBinding/${FULL}-controller-leader-election`,
        `Secret/${FULL}-api`,
        `Secret/${FULL}-database`,
        `Secret/${FULL}-webhook-tls`,
        `Service/${FULL}-api`,
        `Service/${FULL}-webhook`,
        `ServiceAccount/${FULL}-api`,
        `ServiceAccount/${FULL}-controller`,
        `ServiceAccount/${FULL}-migration`,
        `ServiceAccount/${FULL}-worker`,
      ].sort(),
    );
    for (const o of defaults) {
      expect(o.metadata.labels).toMatchObject({ 'app.kubernetes.io/part-of': 'tollgate', 'app.kubernetes.io/instance': RELEASE });
      if (!o.kind.startsWith('Cluster') && o.kind !== 'MutatingWebhookConfiguration') expect(o.metadata.namespace).toBe(NS);
    }
  });

  it('API Deployment: the one image, `api`, probes, secrets by key, restrictive security context, no token', () => {
    const api = find(defaults, 'Deployment', `${FULL}-api`);
    const pod = api.spec.template.spec;
    expect(pod.serviceAccountName).toBe(`${FULL}-api`);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.containers).toHaveLength(1);
    const c = pod.containers[0];
    expect(c.image).toBe('tollgate:0.1.0');
    expect(c.command).toBeUndefined(); // the image's entrypoint, `tollgate`
    expect(c.args).toEqual(['api']);
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.securityContext).toEqual(RESTRICTED_CONTAINER);
    expect(c.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(envNames(c)).toEqual([
      'ENVIRONMENT', 'HOST', 'PORT', 'DATABASE_URL', 'DATABASE_RUNTIME_ROLE', 'DATABASE_POOL_MAX', 'WORKER_IN_PROCESS',
      'WORKER_CONCURRENCY', 'JOB_POLL_INTERVAL_SECONDS', 'JOB_TIMEOUT_SECONDS', 'JOB_MAINTENANCE_INTERVAL_SECONDS', 'SEED_DEMO',
      'DEV_LOGIN_ENABLED', 'SESSION_COOKIE_SECURE', 'CORS_ALLOWED_ORIGINS', 'TRUST_PROXY', 'READONLY_FAIL_OPEN',
      'READONLY_FAIL_OPEN_ACK', 'EMAIL_BACKEND', 'SMTP_PORT', 'SMTP_STARTTLS', 'SIGNUP_ENABLED', 'LOG_LEVEL',
      'OTEL_SERVICE_NAME', 'TELEMETRY_RETENTION_DAYS', 'DEFAULT_PLAN', 'SESSION_SECRET', 'TOKEN_SIGNING_SEED', 'SECRET_PEPPER', 'EVIDENCE_SIGNING_SEED',
      'OIDC_CLIENT_SECRET', 'SMTP_PASSWORD', 'SIGNUP_CLIENT_SECRET', 'AUTH_EVENTS_SECRET', 'EVIDENCE_SIGNING_PREVIOUS_SEEDS',
      'VAULT_TOKEN',
    ]);
    expect(envOf(c, 'ENVIRONMENT').value).toBe('production');
    expect(envOf(c, 'TELEMETRY_RETENTION_DAYS').value).toBe('30');
    expect(envOf(c, 'HOST').value).toBe('0.0.0.0');
    expect(envOf(c, 'DEV_LOGIN_ENABLED').value).toBe('false');
    expect(envOf(c, 'SESSION_COOKIE_SECURE').value).toBe('true');
    // The worker Deployment runs the jobs, not the API.
    expect(envOf(c, 'WORKER_IN_PROCESS').value).toBe('false');
    expect(envOf(c, 'DATABASE_URL').valueFrom).toEqual({ secretKeyRef: { name: `${FULL}-database`, key: 'DATABASE_URL' } });
    expect(envOf(c, 'SECRET_PEPPER').valueFrom).toEqual({ secretKeyRef: { name: `${FULL}-api`, key: 'SECRET_PEPPER' } });
    expect(envOf(c, 'EVIDENCE_SIGNING_SEED').valueFrom).toEqual({ secretKeyRef: { name: `${FULL}-api`, key: 'EVIDENCE_SIGNING_SEED' } });
    expect(envOf(c, 'OIDC_CLIENT_SECRET').valueFrom.secretKeyRef.optional).toBe(true);
    expect(envOf(c, 'EVIDENCE_SIGNING_PREVIOUS_SEEDS').valueFrom.secretKeyRef.optional).toBe(true);
    // The runtime role only: the schema owner's URL never reaches the API.
    expect(envNames(c)).not.toContain('MIGRATION_DATABASE_URL');

    const svc = find(defaults, 'Service', `${FULL}-api`);
    expect(svc.spec.ports).toEqual([{ name: 'http', port: 8080, targetPort: 'http', protocol: 'TCP' }]);
    expect(svc.spec.selector).toEqual(api.spec.selector.matchLabels);
  });

  it('worker Deployment: one replica, `worker`, the API\'s settings and secrets, probes on its own port, no token, no Service', async () => {
    const worker = find(defaults, 'Deployment', `${FULL}-worker`);
    expect(worker.spec.replicas).toBe(1);
    const pod = worker.spec.template.spec;
    expect(pod.serviceAccountName).toBe(`${FULL}-worker`);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(find(defaults, 'ServiceAccount', `${FULL}-worker`).automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    // Longer than SHUTDOWN_TIMEOUT_SECONDS (20) and the worker's few seconds past it.
    expect(pod.terminationGracePeriodSeconds).toBe(30);
    expect(pod.containers).toHaveLength(1);
    const c = pod.containers[0];
    expect(c.image).toBe('tollgate:0.1.0');
    expect(c.args).toEqual(['worker']);
    expect(c.ports).toEqual([{ name: 'http', containerPort: 8081, protocol: 'TCP' }]);
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(c.securityContext).toEqual(RESTRICTED_CONTAINER);
    expect(c.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    // The same settings and secrets as the API (the production guard checks them), and its port.
    const api = find(defaults, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0];
    expect(envNames(c)).toEqual([...envNames(api), 'WORKER_PORT']);
    expect(c.env.slice(0, -1)).toEqual(api.env);
    expect(envOf(c, 'WORKER_PORT').value).toBe('8081');
    expect(envOf(c, 'JOB_TIMEOUT_SECONDS').value).toBe('300');
    expect(envOf(c, 'DATABASE_URL').valueFrom).toEqual({ secretKeyRef: { name: `${FULL}-database`, key: 'DATABASE_URL' } });
    expect(envNames(c)).not.toContain('MIGRATION_DATABASE_URL');
    expect(defaults.some((o) => o.kind === 'Service' && o.metadata.name.includes('worker'))).toBe(false);

    // Settings, and the variant without a worker: the API replicas run the jobs themselves.
    const tuned = await render(['worker.replicas=3', 'worker.concurrency=4', 'worker.jobTimeoutSeconds=600', 'worker.port=9091']);
    const w = find(tuned, 'Deployment', `${FULL}-worker`);
    expect(w.spec.replicas).toBe(3);
    expect(envOf(w.spec.template.spec.containers[0], 'WORKER_CONCURRENCY').value).toBe('4');
    expect(envOf(w.spec.template.spec.containers[0], 'WORKER_PORT').value).toBe('9091');
    expect(envOf(find(tuned, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0], 'JOB_TIMEOUT_SECONDS').value).toBe('600');
    const off = await render(['worker.enabled=false']);
    expect(off.filter((o) => o.metadata.name.includes('worker'))).toEqual([]);
    expect(envOf(find(off, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0], 'WORKER_IN_PROCESS').value).toBe('true');

    // Vault for discovery's credential references: the address as a value, the token from the API Secret, on both.
    expect(envNames(c)).not.toContain('VAULT_ADDR');
    const vault = await render(['api.vaultAddr=https://vault.internal:8200', 'secrets.vaultToken=hvs.test-token']);
    for (const name of [`${FULL}-api`, `${FULL}-worker`]) {
      const container = find(vault, 'Deployment', name).spec.template.spec.containers[0];
      expect(envOf(container, 'VAULT_ADDR').value).toBe('https://vault.internal:8200');
      expect(envOf(container, 'VAULT_TOKEN').valueFrom).toEqual({ secretKeyRef: { name: `${FULL}-api`, key: 'VAULT_TOKEN', optional: true } });
    }
    expect(Buffer.from(find(vault, 'Secret', `${FULL}-api`).data.VAULT_TOKEN, 'base64').toString()).toBe('hvs.test-token');

    // Sign-in, sign-up and the public website: each setting as its variable when set, absent by default.
    const people = await render([
      'api.oidc.issuer=https://id.example.com/realms/tollgate',
      'api.oidc.clientId=tollgate',
      'api.oidc.redirectUri=https://tollgate.example.com/api/v1/auth/callback',
      'api.oidc.mfaAcrValues=gold',
      'api.email.smtp.from=Tollgate <no-reply@example.com>',
      'api.challenge.verifier=siteverify',
      'api.challenge.verifyUrl=https://challenges.example.com/siteverify',
      'api.challenge.siteKey=site-key-1',
      'api.publicSite.salesEmail=sales@example.com',
      'api.publicSite.salesOrgId=7a0c3d4e-8f9a-4b1c-9d2e-3f4a5b6c7d8e',
      'api.publicSite.analyticsEnabled=true',
      'api.publicSite.docsUrl=https://docs.example.com',
    ]);
    const set = find(people, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0];
    const expected: Record<string, string> = {
      OIDC_REDIRECT_URI: 'https://tollgate.example.com/api/v1/auth/callback',
      OIDC_MFA_ACR_VALUES: 'gold',
      SMTP_FROM: 'Tollgate <no-reply@example.com>',
      CHALLENGE_VERIFIER: 'siteverify',
      CHALLENGE_VERIFY_URL: 'https://challenges.example.com/siteverify',
      CHALLENGE_SITE_KEY: 'site-key-1',
      SALES_EMAIL: 'sales@example.com',
      SALES_ORG_ID: '7a0c3d4e-8f9a-4b1c-9d2e-3f4a5b6c7d8e',
      ANALYTICS_ENABLED: 'true',
      DOCS_URL: 'https://docs.example.com',
    };
    for (const [name, value] of Object.entries(expected)) {
      expect(envOf(set, name).value, name).toBe(value);
      expect(envNames(c), name).not.toContain(name);
    }
    await expect(render(['api.publicSite.salesOrgId=not-a-uuid'])).rejects.toThrow(/salesOrgId/);
  });

  it('PodDisruptionBudgets: API and controller keep one pod through voluntary disruptions; spread over nodes', async () => {
    for (const component of ['api', 'controller']) {
      const pdb = find(defaults, 'PodDisruptionBudget', `${FULL}-${component}`);
      expect(pdb.apiVersion).toBe('policy/v1');
      expect(pdb.spec).toEqual({ minAvailable: 1, selector: find(defaults, 'Deployment', `${FULL}-${component}`).spec.selector });
      const pod = find(defaults, 'Deployment', `${FULL}-${component}`).spec.template.spec;
      expect(pod.topologySpreadConstraints).toEqual([{
        maxSkew: 1,
        topologyKey: 'kubernetes.io/hostname',
        whenUnsatisfiable: 'ScheduleAnyway',
        labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': component } },
        matchLabelKeys: ['pod-template-hash'],
      }]);
    }
    // No worker PDB: one replica by default, and its jobs are retried after JOB_TIMEOUT_SECONDS anyway.
    expect(defaults.filter((o) => o.kind === 'PodDisruptionBudget')).toHaveLength(2);
    const pdbs = async (set: string[]) =>
      Object.fromEntries((await render(set)).filter((o) => o.kind === 'PodDisruptionBudget').map((o) => [o.metadata.name, o.spec]));
    // One replica: none by default (minAvailable 1 would block every drain), unless asked for.
    expect(Object.keys(await pdbs(['api.replicas=1', 'controller.replicas=1']))).toEqual([]);
    expect((await pdbs(['api.replicas=1', 'api.podDisruptionBudget.enabled=true']))[`${FULL}-api`]).toMatchObject({ minAvailable: 1 });
    expect(Object.keys(await pdbs(['api.podDisruptionBudget.enabled=false', 'controller.enabled=false']))).toEqual([]);
    const tuned = await pdbs(['api.replicas=4', 'api.podDisruptionBudget.maxUnavailable=25%', 'controller.podDisruptionBudget.minAvailable=50%']);
    expect(tuned[`${FULL}-api`]).toEqual({ maxUnavailable: '25%', selector: expect.anything() });
    expect(tuned[`${FULL}-controller`]).toEqual({ minAvailable: '50%', selector: expect.anything() });
    // Constraints of one's own replace the default spread; spreadAcrossNodes=false drops it.
    const own = await render(['api.topologySpreadConstraints[0].maxSkew=2', 'api.topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone',
      'api.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule', 'controller.spreadAcrossNodes=false']);
    expect(find(own, 'Deployment', `${FULL}-api`).spec.template.spec.topologySpreadConstraints).toEqual([
      { maxSkew: 2, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'DoNotSchedule' },
    ]);
    expect(find(own, 'Deployment', `${FULL}-controller`).spec.template.spec.topologySpreadConstraints).toBeUndefined();
    await expect(render(['api.podDisruptionBudget.minAvailable=most'])).rejects.toThrow(/\/api\/podDisruptionBudget\/minAvailable/);
  });

  it('migration: a pre-install/pre-upgrade hook Job after its ServiceAccount and Secrets, as the schema owner', () => {
    const job = find(defaults, 'Job', `${FULL}-migration`);
    expect(job.metadata.annotations).toEqual({
      'helm.sh/hook': 'pre-install,pre-upgrade',
      'helm.sh/hook-weight': '0',
      'helm.sh/hook-delete-policy': 'before-hook-creation',
    });
    for (const [kind, name] of [['ServiceAccount', `${FULL}-migration`], ['Secret', `${FULL}-database`], ['Secret', `${FULL}-api`]] as const) {
      expect(find(defaults, kind, name).metadata.annotations).toMatchObject({ 'helm.sh/hook': 'pre-install,pre-upgrade', 'helm.sh/hook-weight': '-10' });
    }
    const pod = job.spec.template.spec;
    expect(pod.restartPolicy).toBe('Never');
    expect(pod.serviceAccountName).toBe(`${FULL}-migration`);
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(find(defaults, 'ServiceAccount', `${FULL}-migration`).automountServiceAccountToken).toBe(false);
    const c = pod.containers[0];
    expect(c.image).toBe('tollgate:0.1.0');
    expect(c.args).toEqual(['migrate']);
    expect(c.securityContext).toEqual(RESTRICTED_CONTAINER);
    // The same settings as the API (the production guard checks them), plus the owner's URL.
    const apiEnv = envNames(find(defaults, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0]);
    expect(envNames(c)).toEqual([...apiEnv, 'MIGRATION_DATABASE_URL']);
    expect(envOf(c, 'MIGRATION_DATABASE_URL').valueFrom.secretKeyRef).toMatchObject({ name: `${FULL}-database`, key: 'MIGRATION_DATABASE_URL' });
  });

  it('generates the API secrets once: 48 random characters each, different every render without a cluster', async () => {
    const secret = find(defaults, 'Secret', `${FULL}-api`);
    expect(Object.keys(secret.data).sort()).toEqual(['EVIDENCE_SIGNING_SEED', 'SECRET_PEPPER', 'SESSION_SECRET', 'TOKEN_SIGNING_SEED']);
    for (const v of Object.values(secret.data) as string[]) expect(Buffer.from(v, 'base64').toString()).toMatch(/^[A-Za-z0-9]{48}$/);
    const again = find(await render(), 'Secret', `${FULL}-api`);
    expect(again.data.SECRET_PEPPER).not.toBe(secret.data.SECRET_PEPPER);
    // The evidence key is its own: never the token seed.
    expect(secret.data.EVIDENCE_SIGNING_SEED).not.toBe(secret.data.TOKEN_SIGNING_SEED);
  });

  it('controller Deployment: two replicas, settings, downward API, credential and webhook TLS mounts', () => {
    const d = find(defaults, 'Deployment', `${FULL}-controller`);
    expect(d.spec.replicas).toBe(2);
    const pod = d.spec.template.spec;
    expect(pod.serviceAccountName).toBe(`${FULL}-controller`);
    expect(pod.automountServiceAccountToken).toBe(true); // in-cluster access to the API server
    const c = pod.containers[0];
    expect(c.image).toBe('tollgate:0.1.0');
    expect(c.args).toEqual(['controller']);
    expect(c.securityContext).toEqual(RESTRICTED_CONTAINER);
    expect(c.env).toEqual([
      { name: 'TOLLGATE_API_URL', value: `http://${FULL}-api.${NS}.svc:8080` },
      { name: 'TOLLGATE_CREDENTIALS_DIR', value: '/var/run/tollgate/credentials' },
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'TOLLGATE_LEASE_NAMESPACE', value: NS },
      { name: 'TOLLGATE_CLAIM_UNANNOTATED', value: 'true' },
      { name: 'LOG_LEVEL', value: 'info' },
      { name: 'TOLLGATE_WEBHOOK_CERT_DIR', value: '/var/run/tollgate/webhook-tls' },
      { name: 'TOLLGATE_WEBHOOK_PORT', value: '9443' },
      { name: 'TOLLGATE_SIDECAR_IMAGE', value: 'tollgate:0.1.0' }, // the same image, `tollgate sidecar`
      { name: 'TOLLGATE_METRICS_PORT', value: '9090' },
    ]);
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }, { name: 'webhook', containerPort: 9443, protocol: 'TCP' }]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 'webhook', scheme: 'HTTPS' });
    expect(c.livenessProbe).toBeUndefined();
    expect(c.volumeMounts).toEqual([
      { name: 'credentials', mountPath: '/var/run/tollgate/credentials', readOnly: true },
      { name: 'webhook-tls', mountPath: '/var/run/tollgate/webhook-tls', readOnly: true },
      { name: 'tmp', mountPath: '/tmp' },
    ]);
    const volumes = Object.fromEntries((pod.volumes as { name: string }[]).map((v) => [v.name, v])) as Json;
    expect(volumes.credentials.secret).toMatchObject({
      secretName: `${FULL}-controller-credentials`,
      items: [{ key: 'client-id', path: 'client-id' }, { key: 'client-secret', path: 'client-secret' }],
    });
    expect(volumes['webhook-tls'].secret).toMatchObject({
      secretName: `${FULL}-webhook-tls`,
      items: [{ key: 'tls.crt', path: 'tls.crt' }, { key: 'tls.key', path: 'tls.key' }],
    });
    // No credential values: the chart does not create the Secret; the pods wait for it.
    expect(defaults.some((o) => o.metadata.name === `${FULL}-controller-credentials`)).toBe(false);
  });

  it('RBAC: exactly the controller rules; a leader-election Role in the release namespace only', () => {
    const role = find(defaults, 'ClusterRole', `${NS}-${FULL}-controller`);
    expect(role.rules).toEqual([
      { apiGroups: ['tollgate.dev'], resources: ['agents', 'tools', 'mcpservers', 'policies'], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
      { apiGroups: ['tollgate.dev'], resources: ['agents/status', 'tools/status', 'mcpservers/status', 'policies/status'], verbs: ['update', 'patch'] },
      { apiGroups: ['tollgate.dev'], resources: ['agents/finalizers', 'tools/finalizers', 'mcpservers/finalizers', 'policies/finalizers'], verbs: ['update'] },
      { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      // The per-pod egress NetworkPolicy (docs/kubernetes.md, Egress): the injected pods, relabelled when their
      // pod-id is missing or copied, owned with blockOwnerDeletion; the destinations resolved from Services.
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['pods/finalizers'], verbs: ['update'] },
      { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['services'], verbs: ['get'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] },
    ]);
    expect(find(defaults, 'ClusterRole', `${NS}-${FULL}-controller-secrets`).rules).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'list', 'watch', 'update', 'patch', 'delete'] },
    ]);
    const lease = find(defaults, 'Role', `${FULL}-controller-leader-election`);
    expect(lease.metadata.namespace).toBe(NS);
    expect(lease.rules).toEqual([{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] }]);
    const subject = [{ kind: 'ServiceAccount', name: `${FULL}-controller`, namespace: NS }];
    for (const [kind, name] of [
      ['ClusterRoleBinding', `${NS}-${FULL}-controller`],
      ['ClusterRoleBinding', `${NS}-${FULL}-controller-secrets`],
      ['RoleBinding', `${FULL}-controller-leader-election`],
    ] as const) {
      expect(find(defaults, kind, name).subjects).toEqual(subject);
    }
    // Nothing is bound to the API's, the worker's or the migration's ServiceAccount.
    const bound = defaults.filter((o) => o.kind.endsWith('Binding')).flatMap((o) => (o.subjects as { name: string }[]).map((s) => s.name));
    expect(new Set(bound)).toEqual(new Set([`${FULL}-controller`]));
  });

  it('webhook: CREATE of labelled pods, fail closed, CA bundle of the generated certificate, namespaces excluded', () => {
    const mwc = find(defaults, 'MutatingWebhookConfiguration', `${NS}-${FULL}-webhook`);
    expect(mwc.webhooks).toHaveLength(1);
    const w = mwc.webhooks[0];
    expect(w).toMatchObject({
      name: 'inject.tollgate.dev',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 10,
      reinvocationPolicy: 'IfNeeded',
      objectSelector: { matchLabels: { 'tollgate.dev/inject': 'true' } },
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [NS, 'kube-system'] }] },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
    });
    expect(w.clientConfig.service).toEqual({ name: `${FULL}-webhook`, namespace: NS, path: '/mutate-v1-pod', port: 443 });
    expect(w.clientConfig.caBundle).toMatch(/^[A-Za-z0-9+/=]{100,}$/);

    const svc = find(defaults, 'Service', `${FULL}-webhook`);
    expect(svc.spec.ports).toEqual([{ name: 'https', port: 443, targetPort: 'webhook', protocol: 'TCP' }]);
    expect(svc.spec.selector['app.kubernetes.io/component']).toBe('controller');

    // The serving certificate names the Service and is signed by the CA of the bundle.
    const tls = find(defaults, 'Secret', `${FULL}-webhook-tls`);
    expect(tls.type).toBe('kubernetes.io/tls');
    expect(tls.data['ca.crt']).toBe(w.clientConfig.caBundle);
    const ca = new X509Certificate(Buffer.from(w.clientConfig.caBundle, 'base64'));
    const cert = new X509Certificate(Buffer.from(tls.data['tls.crt'], 'base64'));
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.subjectAltName).toContain(`DNS:${FULL}-webhook.${NS}.svc`);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now() + 9 * 365 * 86400_000);
  });

  it('cert-manager variant: a Certificate and Issuer instead of a generated Secret, the CA injected by annotation', async () => {
    const objects = await render(['webhook.certManager.enabled=true']);
    expect(objects.some((o) => o.kind === 'Secret' && o.metadata.name === `${FULL}-webhook-tls`)).toBe(false);
    const cert = find(objects, 'Certificate', `${FULL}-webhook`);
    expect(cert.apiVersion).toBe('cert-manager.io/v1');
    expect(cert.spec).toMatchObject({
      secretName: `${FULL}-webhook-tls`,
      issuerRef: { name: `${FULL}-webhook-selfsigned`, kind: 'Issuer', group: 'cert-manager.io' },
    });
    expect(cert.spec.dnsNames).toContain(`${FULL}-webhook.${NS}.svc`);
    expect(find(objects, 'Issuer', `${FULL}-webhook-selfsigned`).spec).toEqual({ selfSigned: {} });
    const mwc = find(objects, 'MutatingWebhookConfiguration', `${NS}-${FULL}-webhook`);
    expect(mwc.metadata.annotations).toEqual({ 'cert-manager.io/inject-ca-from': `${NS}/${FULL}-webhook` });
    expect(mwc.webhooks[0].clientConfig.caBundle).toBeUndefined();

    const withIssuer = await render(['webhook.certManager.enabled=true', 'webhook.certManager.issuerRef.name=corp-ca', 'webhook.certManager.issuerRef.kind=ClusterIssuer']);
    expect(withIssuer.some((o) => o.kind === 'Issuer')).toBe(false);
    expect(find(withIssuer, 'Certificate', `${FULL}-webhook`).spec.issuerRef).toEqual({ name: 'corp-ca', kind: 'ClusterIssuer', group: 'cert-manager.io' });
  });

  it('existingSecret variant: no Secrets created, the named ones referenced with their keys', async () => {
    const objects = await render([
      'database.existingSecret=pg-app',
      'database.existingMigrationSecret=pg-owner',
      'database.existingSecretKeys.url=uri',
      'database.existingSecretKeys.migrationUrl=owner-uri',
      'secrets.existingSecret=tollgate-secrets',
      'controller.credentials.existingSecret=tollgate-controller',
    ]);
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual([`${FULL}-webhook-tls`]);
    const api = find(objects, 'Deployment', `${FULL}-api`).spec.template.spec.containers[0];
    expect(envOf(api, 'DATABASE_URL').valueFrom.secretKeyRef).toEqual({ name: 'pg-app', key: 'uri' });
    expect(envOf(api, 'TOKEN_SIGNING_SEED').valueFrom.secretKeyRef).toEqual({ name: 'tollgate-secrets', key: 'TOKEN_SIGNING_SEED' });
    const job = find(objects, 'Job', `${FULL}-migration`).spec.template.spec.containers[0];
    expect(envOf(job, 'MIGRATION_DATABASE_URL').valueFrom.secretKeyRef).toMatchObject({ name: 'pg-owner', key: 'owner-uri' });
    const ctl = find(objects, 'Deployment', `${FULL}-controller`).spec.template.spec;
    expect((ctl.volumes as Json[]).find((v) => v.name === 'credentials').secret.secretName).toBe('tollgate-controller');

    // With values instead, the chart creates the credential Secret with the two keys.
    const created = await render(['controller.credentials.clientId=tgsa_abc', 'controller.credentials.clientSecret=s3cret']);
    expect(find(created, 'Secret', `${FULL}-controller-credentials`).stringData).toEqual({ 'client-id': 'tgsa_abc', 'client-secret': 's3cret' });
  });

  it('image digest and webhook-off variants', async () => {
    const digest = 'sha256:' + 'b'.repeat(64);
    const pinned = await render([`image.digest=${digest}`, 'webhook.sidecarApiUrl=https://tollgate.example.com']);
    for (const d of ['api', 'controller', 'worker']) {
      expect(find(pinned, 'Deployment', `${FULL}-${d}`).spec.template.spec.containers[0].image).toBe(`tollgate@${digest}`);
    }
    const ctl = find(pinned, 'Deployment', `${FULL}-controller`).spec.template.spec.containers[0];
    expect(envOf(ctl, 'TOLLGATE_SIDECAR_IMAGE').value).toBe(`tollgate@${digest}`);
    expect(envOf(ctl, 'TOLLGATE_SIDECAR_API_URL').value).toBe('https://tollgate.example.com');

    const off = await render(['webhook.enabled=false']);
    expect(off.filter((o) => /webhook/i.test(`${o.kind}/${o.metadata.name}`))).toEqual([]);
    const c = find(off, 'Deployment', `${FULL}-controller`).spec.template.spec.containers[0];
    expect(envNames(c).filter((n) => /WEBHOOK|SIDECAR/.test(n))).toEqual([]);
    // Only the metrics port is left.
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 9090, protocol: 'TCP' }]);
    expect(c.readinessProbe).toBeUndefined();
  });

  it('networkPolicy variant: agent pods may reach only the API pods, DNS and the listed MCP upstreams', async () => {
    const objects = await render(
      [],
      ['--values', writeValues('np.yaml', {
        networkPolicy: {
          agentEgress: {
            enabled: true,
            namespaces: ['agents-a', 'agents-b'],
            mcpUpstreams: [
              { cidr: '203.0.113.10/32', ports: [{ port: 443 }] },
              { namespace: 'mcp', podLabels: { app: 'payments-mcp' }, ports: [{ port: 8080 }] },
            ],
          },
        },
      })],
    );
    const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
    expect(policies.map((p) => p.metadata.namespace)).toEqual(['agents-a', 'agents-b']);
    const p = policies[0]!;
    expect(p.spec.podSelector).toEqual({ matchLabels: { 'tollgate.dev/inject': 'true' } });
    expect(p.spec.policyTypes).toEqual(['Egress']);
    expect(p.spec.ingress).toBeUndefined();
    expect(p.spec.egress).toEqual([
      {
        to: [{
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NS } },
          podSelector: { matchLabels: { 'app.kubernetes.io/name': 'tollgate', 'app.kubernetes.io/instance': RELEASE, 'app.kubernetes.io/component': 'api' } },
        }],
        ports: [{ port: 8080, protocol: 'TCP' }],
      },
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
        ports: [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }],
      },
      { to: [{ ipBlock: { cidr: '203.0.113.10/32' } }], ports: [{ port: 443, protocol: 'TCP' }] },
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'mcp' } }, podSelector: { matchLabels: { app: 'payments-mcp' } } }],
        ports: [{ port: 8080, protocol: 'TCP' }],
      },
    ]);
    expect(defaults.some((o) => o.kind === 'NetworkPolicy')).toBe(false);
  });

  it('namespaced Secrets variant: the Secret rules bound by RoleBinding in the listed namespaces only', async () => {
    const objects = await render(['controller.rbac.secretsScope=namespaces', 'controller.rbac.secretNamespaces={agents-a,agents-b}']);
    expect(objects.some((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name.endsWith('-secrets'))).toBe(false);
    const bindings = objects.filter((o) => o.kind === 'RoleBinding' && o.metadata.name === `${FULL}-controller-secrets`);
    expect(bindings.map((b) => b.metadata.namespace)).toEqual(['agents-a', 'agents-b']);
    expect(bindings[0]!.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${NS}-${FULL}-controller-secrets` });
  });

  it('refuses values that break the schema, naming the value', async () => {
    const refused = async (set: string[], message: RegExp) => {
      await expect(render(set)).rejects.toThrow(message);
    };
    await refused(['webhook.failurePolicy=Sometimes'], /values don't meet the specifications of the schema[\s\S]*\/webhook\/failurePolicy[\s\S]*(Fail|Ignore)/);
    await refused(['environment=prod'], /\/environment[\s\S]*production/);
    await refused(['api.replicaz=3'], /additional properties? 'replicaz' not allowed/);
    await refused(['worker.concurrency=0'], /\/worker\/concurrency/);
    await refused(['worker.jobTimeoutSeconds=86400'], /\/worker\/jobTimeoutSeconds/);
    await refused(['database.url=mysql://db/tollgate'], /\/database\/url/);
    await refused(['api.devLoginEnabled=true'], /\/api\/devLoginEnabled/);
    await refused(['controller.credentials.clientId=tgsa_only'], /\/controller\/credentials/);
    await refused(['networkPolicy.agentEgress.enabled=true'], /\/networkPolicy\/agentEgress\/namespaces/);
    await refused(['controller.rbac.secretsScope=namespaces'], /\/controller\/rbac\/secretNamespaces/);
    // Development may sign in without a password.
    expect(await render(['environment=development', 'api.devLoginEnabled=true', 'api.email.backend=memory'])).not.toHaveLength(0);
    // helm lint reports the same.
    await expect(helm(['lint', '--strict', CHART, '--set', 'webhook.timeoutSeconds=99'])).rejects.toThrow(/\/webhook\/timeoutSeconds/);
  });

  describe('on a real API server', () => {
    const INSTALL_VALUES = [
      'database.url=postgres://tollgate_app:app@db.example/tollgate',
      'database.migrationUrl=postgres://tollgate_owner:owner@db.example/tollgate',
      'controller.credentials.clientId=tgsa_test',
      'controller.credentials.clientSecret=test-secret',
    ].flatMap((s) => ['--set', s]);

    /**
     * Runs a helm install or upgrade whose pre-hook Job no kubelet will run: waits for a new Job, checks
     * what exists at that moment (hook objects, but not the release's objects on a first install), then
     * marks the Job complete as the Job controller would, and answers helm's output.
     */
    async function withMigration(args: string[], whileWaiting: (job: Json) => Promise<void>): Promise<string> {
      const before = await getJson('jobs', '-n', NS, '-l', 'app.kubernetes.io/component=migration').catch(() => ({ items: [] }));
      const oldUids = new Set((before.items as Json[]).map((j) => j.metadata.uid));
      const child = spawn(helmBin, ['--kubeconfig', cluster!.kubeconfigPath, ...args, '--timeout', '60s'], { cwd: ROOT, env: helmEnv() });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
      try {
        const job = await eventually(async () => {
          if (child.exitCode !== null) throw new Error(`helm exited early: ${out}`);
          const j = await getJson('job', `${FULL}-migration`, '-n', NS);
          return oldUids.has(j.metadata.uid) ? undefined : j;
        }, 30_000, 'the migration Job');
        await whileWaiting(job);
        const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
        const condition = (type: string) => ({ type, status: 'True', lastProbeTime: now, lastTransitionTime: now, reason: 'Test', message: 'marked complete by the test' });
        await kubectl('patch', 'job', `${FULL}-migration`, '-n', NS, '--subresource=status', '--type=merge', '-p', JSON.stringify({
          status: { startTime: now, completionTime: now, succeeded: 1, conditions: [condition('SuccessCriteriaMet'), condition('Complete')] },
        }));
      } catch (err) {
        child.kill('SIGTERM');
        throw err;
      }
      const code = await exited;
      if (code !== 0) throw new Error(`helm ${args.join(' ')} exited ${code}: ${out}`);
      return out;
    }

    it('helm install: the migration hook runs first, then every object is created and the CRDs are Established', async () => {
      await kubectl('create', 'namespace', NS);
      const out = await withMigration(['install', RELEASE, CHART, '--namespace', NS, ...INSTALL_VALUES], async (job) => {
        expect(job.spec.template.spec.containers[0].args).toEqual(['migrate']);
        // The hook's own objects exist; the release's do not yet.
        await kubectl('get', 'serviceaccount', `${FULL}-migration`, '-n', NS);
        await kubectl('get', 'secret', `${FULL}-database`, `${FULL}-api`, '-n', NS);
        await expect(kubectl('get', 'deployment', `${FULL}-api`, '-n', NS)).rejects.toThrow(/NotFound/);
        // Helm installed the chart's CRDs before anything else.
        await kubectl('wait', '--for=condition=Established', '--timeout=30s', 'crd/agents.tollgate.dev', 'crd/tools.tollgate.dev', 'crd/mcpservers.tollgate.dev', 'crd/policies.tollgate.dev');
      });
      expect(out).toContain('STATUS: deployed');
      expect(out).toContain(`Tollgate 0.1.0 is installed as release ${RELEASE}`);

      for (const name of ['agents', 'tools', 'mcpservers', 'policies']) {
        const crd = await getJson('crd', `${name}.tollgate.dev`);
        expect(crd.status.conditions.find((c: Json) => c.type === 'Established').status).toBe('True');
      }
      const deployments = await getJson('deployments', '-n', NS);
      expect((deployments.items as Json[]).map((d) => [d.metadata.name, d.spec.replicas]).sort()).toEqual([
        [`${FULL}-api`, 2],
        [`${FULL}-controller`, 2],
        [`${FULL}-worker`, 1],
      ]);
      const pdbs = await getJson('poddisruptionbudgets', '-n', NS);
      expect((pdbs.items as Json[]).map((p) => [p.metadata.name, p.spec.minAvailable]).sort()).toEqual([[`${FULL}-api`, 1], [`${FULL}-controller`, 1]]);
      const services = await getJson('services', '-n', NS);
      expect((services.items as Json[]).map((s) => s.metadata.name).sort()).toEqual([`${FULL}-api`, `${FULL}-webhook`]);
      const secrets = await getJson('secrets', '-n', NS);
      const secretNames = (secrets.items as Json[]).map((s) => s.metadata.name);
      for (const s of [`${FULL}-api`, `${FULL}-database`, `${FULL}-webhook-tls`, `${FULL}-controller-credentials`]) expect(secretNames).toContain(s);
      await kubectl('get', 'job', `${FULL}-migration`, '-n', NS);
      await kubectl('get', 'serviceaccount', `${FULL}-api`, `${FULL}-controller`, `${FULL}-migration`, `${FULL}-worker`, '-n', NS);
      await kubectl('get', 'role,rolebinding', `${FULL}-controller-leader-election`, '-n', NS);
      await kubectl('get', 'clusterrole,clusterrolebinding', `${NS}-${FULL}-controller`, `${NS}-${FULL}-controller-secrets`);
      const mwc = await getJson('mutatingwebhookconfiguration', `${NS}-${FULL}-webhook`);
      const tls = await getJson('secret', `${FULL}-webhook-tls`, '-n', NS);
      expect(mwc.webhooks[0].clientConfig.caBundle).toBe(tls.data['ca.crt']);
      const status = await helm(['status', RELEASE, '--namespace', NS], { kube: true });
      expect(status.stdout).toContain('STATUS: deployed');
    });

    it('the ServiceAccounts hold exactly the permissions of the chart (kubectl auth can-i)', async () => {
      // `kubectl auth can-i` prints yes or no, and exits 1 on no.
      const can = async (sa: string, ...args: string[]) => {
        const argv = ['--kubeconfig', cluster!.kubeconfigPath, 'auth', 'can-i', `--as=system:serviceaccount:${NS}:${sa}`, ...args];
        const { stdout } = await exec(KUBECTL, argv, { env: { ...process.env, KUBECONFIG: '' } }).catch(
          (err: Error & { stdout?: string; stderr?: string }) => ({ stdout: err.stdout || `${err.message} ${err.stderr ?? ''}` }),
        );
        return stdout.trim();
      };
      const ctl = `${FULL}-controller`;
      expect(await can(ctl, 'patch', 'agents.tollgate.dev', '-n', 'payments')).toBe('yes');
      expect(await can(ctl, 'update', 'policies.tollgate.dev', '--subresource=status', '-n', 'payments')).toBe('yes');
      expect(await can(ctl, 'update', 'tools.tollgate.dev', '--subresource=finalizers', '-n', 'payments')).toBe('yes');
      expect(await can(ctl, 'delete', 'agents.tollgate.dev', '-n', 'payments')).toBe('no');
      expect(await can(ctl, 'create', 'agents.tollgate.dev', '-n', 'payments')).toBe('no');
      expect(await can(ctl, 'watch', 'namespaces')).toBe('yes');
      expect(await can(ctl, 'update', 'namespaces')).toBe('no');
      expect(await can(ctl, 'create', 'events', '-n', 'payments')).toBe('yes');
      expect(await can(ctl, 'create', 'secrets', '-n', 'payments')).toBe('yes');
      expect(await can(ctl, 'update', 'leases.coordination.k8s.io', '-n', NS)).toBe('yes');
      expect(await can(ctl, 'update', 'leases.coordination.k8s.io', '-n', 'default')).toBe('no');
      expect(await can(ctl, 'delete', 'leases.coordination.k8s.io', '-n', NS)).toBe('no');
      expect(await can(ctl, 'create', 'pods', '-n', NS)).toBe('no');
      expect(await can(ctl, 'patch', 'mutatingwebhookconfigurations')).toBe('no');
      for (const sa of [`${FULL}-api`, `${FULL}-migration`, `${FULL}-worker`]) {
        expect(await can(sa, 'get', 'secrets', '-n', NS)).toBe('no');
        expect(await can(sa, 'list', 'agents.tollgate.dev', '-A')).toBe('no');
        expect(await can(sa, 'get', 'leases.coordination.k8s.io', '-n', NS)).toBe('no');
      }
    });

    it('the rendered variants are valid objects for the API server and meet the restricted Pod Security Standard (server-side dry run)', async () => {
      // Another release in another namespace, so that every object is new to the server; the namespace
      // enforces the `restricted` Pod Security Standard, which warns on every pod template that breaks it.
      for (const ns of ['tollgate-dry', 'agents-a', 'mcp']) await kubectl('create', 'namespace', ns);
      await kubectl('label', 'namespace', 'tollgate-dry', 'pod-security.kubernetes.io/enforce=restricted', 'pod-security.kubernetes.io/warn=restricted');
      const { stdout } = await helm([
        'template', 'dry', CHART, '--namespace', 'tollgate-dry',
        '--set', 'networkPolicy.agentEgress.enabled=true', '--set', 'networkPolicy.agentEgress.namespaces={agents-a}',
        '--set', 'controller.rbac.secretsScope=namespaces', '--set', 'controller.rbac.secretNamespaces={agents-a,mcp}',
        '--set', 'database.existingSecret=pg', '--set', 'secrets.existingSecret=app', '--set', 'controller.credentials.existingSecret=creds',
        '--set', 'image.digest=sha256:' + 'a'.repeat(64), '--set', 'webhook.excludeNamespaces={mcp}',
      ]);
      const file = path.join(cluster!.dir, 'variant.yaml');
      writeFileSync(file, stdout);
      const { stdout: applied, stderr } = await kubectlRaw(cluster!, ['apply', '--dry-run=server', '-f', file]);
      const created = applied.trim().split('\n');
      expect(created.every((line) => line.endsWith(' created (server dry run)'))).toBe(true);
      expect(created).toContain('networkpolicy.networking.k8s.io/dry-tollgate-agent-egress created (server dry run)');
      expect(created).toContain('rolebinding.rbac.authorization.k8s.io/dry-tollgate-controller-secrets created (server dry run)');
      expect(created).toContain('mutatingwebhookconfiguration.admissionregistration.k8s.io/tollgate-dry-dry-tollgate-webhook created (server dry run)');
      expect(created).toHaveLength(parseAllDocuments(stdout).filter((d) => d.toJS() !== null).length);
      expect(stderr.trim()).toBe('');
    });

    it('helm upgrade runs the migration again and keeps the generated secrets and the webhook certificate', async () => {
      const before = {
        api: (await getJson('secret', `${FULL}-api`, '-n', NS)).data,
        tls: (await getJson('secret', `${FULL}-webhook-tls`, '-n', NS)).data,
      };
      const out = await withMigration(['upgrade', RELEASE, CHART, '--namespace', NS, ...INSTALL_VALUES, '--set', 'api.replicas=3'], async () => {
        // The release's objects are still those of revision 1 while the migration runs.
        expect((await getJson('deployment', `${FULL}-api`, '-n', NS)).spec.replicas).toBe(2);
      });
      expect(out).toContain('REVISION: 2');
      expect((await getJson('deployment', `${FULL}-api`, '-n', NS)).spec.replicas).toBe(3);
      expect((await getJson('secret', `${FULL}-api`, '-n', NS)).data).toEqual(before.api);
      expect((await getJson('secret', `${FULL}-webhook-tls`, '-n', NS)).data).toEqual(before.tls);
      const mwc = await getJson('mutatingwebhookconfiguration', `${NS}-${FULL}-webhook`);
      expect(mwc.webhooks[0].clientConfig.caBundle).toBe(before.tls['ca.crt']);
    });

    it('helm uninstall removes the release objects and keeps the CRDs and the hook Secrets', async () => {
      await helm(['uninstall', RELEASE, '--namespace', NS, '--wait', '--timeout', '30s'], { kube: true });
      await expect(kubectl('get', 'deployment', `${FULL}-api`, '-n', NS)).rejects.toThrow(/NotFound/);
      await expect(kubectl('get', 'mutatingwebhookconfiguration', `${NS}-${FULL}-webhook`)).rejects.toThrow(/NotFound/);
      await expect(kubectl('get', 'clusterrole', `${NS}-${FULL}-controller`)).rejects.toThrow(/NotFound/);
      await kubectl('get', 'crd', 'agents.tollgate.dev');
      await kubectl('get', 'secret', `${FULL}-api`, `${FULL}-database`, '-n', NS);
    });
  });
});

function writeValues(name: string, values: object): string {
  const file = path.join(helmHome, name);
  writeFileSync(file, JSON.stringify(values));
  return file;
}
