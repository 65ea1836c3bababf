import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { api, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';
import { loopbackServingCert, startKube, type KubeCluster } from '../support/kube-cluster.js';
import { freePort } from '../support/postgres-cluster.js';
import { eventually, installCrds, kubectlFor, kubectlRaw } from '../support/kubectl.js';
import { ROOT, spawnTollgate, stop } from '../support/processes.js';

/**
 * `tollgate controller` end to end: a real API server (etcd + kube-apiserver), the real central API on
 * PostgreSQL listening on loopback, the controller as its own process with a service account's
 * credential, and kubectl applying the examples.
 */

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; generation?: number; finalizers?: string[]; annotations?: Record<string, string> };
  spec: Record<string, any>;
  status?: { observedGeneration?: number; registryId?: string; conditions?: { type: string; status: string; reason: string; message: string }[]; [k: string]: unknown };
};
const example = (name: string) => parse(readFileSync(path.join(ROOT, 'examples', `${name}.yaml`), 'utf8')) as Obj;
const ready = (o: Obj | undefined) => o?.status?.conditions?.find((c) => c.type === 'Ready');

describe('tollgate controller on a real Kubernetes API server', () => {
  let cluster: KubeCluster;
  let kubectl: (...args: string[]) => Promise<string>;
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let apiUrl: string;
  let credentials: { client_id: string; client_secret: string };
  let webhookPort: number;
  const SIDECAR_IMAGE = 'registry.example.com/tollgate:test';
  const controllers: ReturnType<typeof spawnTollgate>[] = [];

  const startController = (identity: string, extra: Record<string, string> = {}) => {
    const child = spawnTollgate(['controller'], {
      KUBECONFIG: cluster.kubeconfigPath,
      TOLLGATE_API_URL: apiUrl,
      TOLLGATE_CLIENT_ID: credentials.client_id,
      TOLLGATE_CLIENT_SECRET: credentials.client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_LEASE_SECONDS: '3',
      TOLLGATE_RESYNC_SECONDS: '2',
      POD_NAME: identity,
      LOG_LEVEL: 'info',
      TOLLGATE_METRICS_PORT: '0', // several controllers on one host: any free port each
      ...extra,
    });
    controllers.push(child);
    return child;
  };

  const apply = async (o: Obj) => (await kubectlRaw(cluster, ['apply', '-f', '-'], JSON.stringify(o))).stdout;
  const get = async (kind: string, name: string, namespace = 'default') =>
    JSON.parse(await kubectl('get', `${kind}.tollgate.dev`, name, '-n', namespace, '-o', 'json')) as Obj;
  const rest = async (url: string) => {
    const res = await admin.client.get(api(url));
    expect(res.statusCode, url).toBe(200);
    return res.json();
  };
  const leaseHolder = async () =>
    JSON.parse(await kubectl('get', 'lease', '-n', 'default', `tollgate-controller-${admin.tenant.slug}`, '-o', 'json')).spec
      .holderIdentity as string | undefined;

  beforeAll(async () => {
    cluster = await startKube();
    kubectl = kubectlFor(cluster);
    await installCrds(cluster);
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    apiUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise'); // production agents
    const sa = await admin.client.post(api('/service-accounts'), { name: 'kubernetes-controller' });
    expect(sa.statusCode).toBe(201);
    credentials = sa.json();
    // Controller a also serves the injection webhook, on loopback with a certificate the API server trusts.
    const certDir = path.join(cluster.dir, 'webhook-tls');
    await loopbackServingCert(cluster, certDir);
    webhookPort = await freePort();
    startController('controller-a', {
      TOLLGATE_WEBHOOK_CERT_DIR: certDir,
      TOLLGATE_WEBHOOK_PORT: String(webhookPort),
      TOLLGATE_SIDECAR_IMAGE: SIDECAR_IMAGE,
    });
    await eventually(leaseHolder, 20_000, 'a leader');
  }, 30 * 60_000);

  // On a failure, what the controllers logged and what the objects' statuses say.
  beforeEach(({ onTestFailed }) => {
    onTestFailed(async () => {
      const statuses = await kubectl('get', 'tollgate', '-A', '-o', 'yaml').catch((e: Error) => e.message);
      const logs = controllers.map((c, i) => `--- controller ${i}\n${c.output().split('\n').slice(-60).join('\n')}`).join('\n');
      console.error(`${logs}\n--- objects\n${statuses.split('\n').filter((l) => /name:|reason|message|registryId|observedGeneration|generation/.test(l)).join('\n')}`);
    });
  });

  afterAll(async () => {
    await Promise.all(controllers.map((c) => stop(c)));
    await t?.close();
    await cluster?.stop();
  }, 60_000);

  it('makes every example Ready within 10 s of kubectl apply, each visible through the REST API', async () => {
    const applied = Date.now();
    const out = await kubectl('apply', '-f', path.join(ROOT, 'examples'));
    expect(out).toMatch(/agent.tollgate.dev\/payments-assistant created/);
    const kinds = ['agents', 'tools', 'mcpservers', 'policies'];
    await eventually(async () => {
      const list = JSON.parse(await kubectl('get', kinds.map((k) => `${k}.tollgate.dev`).join(','), '-A', '-o', 'json')).items as Obj[];
      return list.length === 4 && list.every((o) => ready(o)?.status === 'True' && o.status?.observedGeneration === o.metadata.generation);
    }, 10_000, 'every example Ready');
    const seconds = (Date.now() - applied) / 1000;
    expect(seconds).toBeLessThan(10);

    const agent = await get('agents', 'payments-assistant');
    const record = await rest(`/agents/${agent.status!.registryId}`);
    expect(record).toMatchObject({ slug: 'payments-assistant', source: 'kubernetes', environment: 'production', criticality: 'high' });
    expect(record.owners.map((o: { email: string }) => o.email).sort()).toEqual(['alice.martin@example.com', 'bo.chen@example.com']);
    expect(agent.metadata.finalizers).toContain('tollgate.dev/registry');

    // The workload identity the sidecar will mount: a Secret of the namespace, good for an agent token.
    expect(agent.status!.identitySecret).toBe('tollgate-identity-payments-assistant');
    const secret = JSON.parse(await kubectl('get', 'secret', 'tollgate-identity-payments-assistant', '-n', 'default', '-o', 'json'));
    const decode = (k: string) => Buffer.from(secret.data[k], 'base64').toString('utf8');
    expect(secret.metadata.ownerReferences[0]).toMatchObject({ kind: 'Agent', name: 'payments-assistant' });
    const token = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: decode('client-id'), client_secret: decode('client-secret') },
    });
    expect(token.statusCode).toBe(200);
    expect(token.json().agent_uri).toContain('payments-assistant');

    const server = await get('mcpservers', 'payments-mcp');
    const tool = await get('tools', 'payments-transfer');
    const tools = (await rest('/tools')).items as { id: string; tool_key: string; mcp_server_id: string; privilege_class: string }[];
    expect(tools.find((x) => x.tool_key === 'payments.transfer')).toMatchObject({
      id: tool.status!.registryId,
      mcp_server_id: server.status!.registryId,
      privilege_class: 'financial',
    });
    expect(server.status!.trustState).toBe('unknown');

    const bindings = (await rest(`/agents/${record.id}/permissions`)).items;
    expect(bindings).toHaveLength(1);
    expect(bindings[0]).toMatchObject({ target_id: tool.status!.registryId, actions: ['invoke'], constraints: { max_amount: 5000, currency: 'EUR' } });
    const delegations = (await rest(`/agents/${record.id}/delegations`)).items;
    expect(delegations).toMatchObject([{ principal_ref: 'treasury-ops@example.com', principal_type: 'group', scopes: ['payments:write'] }]);

    const policy = await get('policies', 'payments-limits');
    const p = await rest(`/policies/${policy.status!.registryId}`);
    expect(p).toMatchObject({ key: 'payments-limits', latest_version: 1, published_version: null, critical: true });
    expect(p.versions[0].rules.map((r: { id: string }) => r.id)).toEqual(['large-payment-dual-approval', 'unexpected-currency']);
    // A draft only: publishing needs a person, and the status says so.
    expect(ready(policy)).toMatchObject({ status: 'True', reason: 'AwaitingPublication' });
    expect(policy.status!.publishState).toMatch(/awaits publication by a second person/);
  });

  it('carries an update of the resource into the registry', async () => {
    const agent = example('agent');
    agent.spec.criticality = 'medium';
    agent.spec.tools[0].constraints.maxAmount = 2000;
    agent.spec.owners.push({ name: 'Cy Diaz', email: 'cy.diaz@example.com', ownerType: 'business' });
    await apply(agent);
    const id = (await get('agents', 'payments-assistant')).status!.registryId;
    await eventually(async () => {
      const a = await rest(`/agents/${id}`);
      const b = (await rest(`/agents/${id}/permissions`)).items;
      return a.criticality === 'medium' && a.owners.length === 3 && b.length === 1 && b[0].constraints.max_amount === 2000;
    }, 10_000, 'the registry updated');
    const after = await get('agents', 'payments-assistant');
    expect(after.status!.observedGeneration).toBe(after.metadata.generation);

    const policy = example('policy');
    policy.spec.rules[0].obligations.approvalsRequired = 1;
    await apply(policy);
    const status = await eventually(async () => {
      const p = await get('policies', 'payments-limits');
      return p.status?.latestVersion === 2 && p.status.observedGeneration === p.metadata.generation ? p : undefined;
    }, 10_000, 'a second draft');
    expect(ready(status)!.reason).toBe('AwaitingPublication');

    // A person publishes it (the service account authored it: four eyes hold), and the status follows.
    const current = await admin.client.get(api(`/policies/${status.status!.registryId}`));
    const published = await admin.client.post(api(`/policies/${status.status!.registryId}/versions/2/publish`), {}, { 'if-match': current.headers.etag as string });
    expect(published.statusCode).toBe(200);
    await eventually(async () => (await get('policies', 'payments-limits')).status?.publishedVersion === 2, 10_000, 'published in the status');
    expect(ready(await get('policies', 'payments-limits'))!.reason).toBe('Published');
  });

  it('puts back a change made through the REST API on the next resync, and reports it', async () => {
    const id = (await get('agents', 'payments-assistant')).status!.registryId as string;
    const patched = await admin.client.patch(api(`/agents/${id}`), { criticality: 'low', purpose: 'Something else entirely' });
    expect(patched.statusCode).toBe(200);
    const tools = (await rest('/tools')).items as { id: string; tool_key: string }[];
    const extra = await admin.client.post(api(`/agents/${id}/permissions`), {
      target_kind: 'tool',
      target_id: tools.find((x) => x.tool_key === 'crm.lookup_customer')!.id,
      actions: ['invoke'],
    });
    expect(extra.statusCode).toBe(201);
    const delegation = await admin.client.post(api(`/agents/${id}/delegations`), {
      principal_ref: 'someone@example.com',
      display_name: 'Someone',
      scopes: ['payments:write'],
    });
    expect(delegation.statusCode).toBe(201);
    await eventually(async () => {
      const a = await rest(`/agents/${id}`);
      const b = (await rest(`/agents/${id}/permissions`)).items;
      const d = (await rest(`/agents/${id}/delegations`)).items as { principal_ref: string }[];
      return a.criticality === 'medium' && a.purpose === example('agent').spec.purpose && b.length === 1 &&
        d.length === 1 && d[0]!.principal_ref === 'treasury-ops@example.com';
    }, 10_000, 'the drift put back');
    const events = JSON.parse(
      await kubectl('get', 'events', '-n', 'default', '--field-selector', 'involvedObject.name=payments-assistant,reason=DriftCorrected', '-o', 'json'),
    ).items as { message: string; type: string }[];
    expect(events.length).toBeGreaterThan(0);
    expect(events.map((e) => e.message).join('\n')).toMatch(/criticality/);
    expect(ready(await get('agents', 'payments-assistant'))!.message).toMatch(/put back/);
  });

  it('injects the sidecar into a labelled pod of a Ready Agent, and refuses pods of a missing Agent', async () => {
    await apply({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'tollgate-sidecar-injector' },
      webhooks: [
        {
          name: 'inject.tollgate.dev',
          clientConfig: { url: `https://127.0.0.1:${webhookPort}/mutate-v1-pod`, caBundle: Buffer.from(cluster.caPem).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
          objectSelector: { matchLabels: { 'tollgate.dev/inject': 'true' } },
          failurePolicy: 'Fail',
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
          reinvocationPolicy: 'IfNeeded',
          timeoutSeconds: 10,
        },
      ] as unknown,
    } as unknown as Obj);
    const pod = (name: string, agent: string) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: 'default', labels: { 'tollgate.dev/inject': 'true' }, annotations: { 'tollgate.dev/agent': agent } },
      spec: { containers: [{ name: 'agent', image: 'example.com/payments-agent:1' }] },
    });
    // The configuration takes a moment to reach the API server's admission chain.
    await eventually(async () => {
      await kubectlRaw(cluster, ['create', '-f', '-'], JSON.stringify(pod('payments-worker', 'payments-assistant')));
      return true;
    }, 10_000, 'the pod created');
    const stored = JSON.parse(await kubectl('get', 'pod', 'payments-worker', '-n', 'default', '-o', 'json'));
    expect(stored.spec.initContainers).toHaveLength(1);
    expect(stored.spec.initContainers[0]).toMatchObject({
      name: 'tollgate-sidecar',
      image: SIDECAR_IMAGE,
      args: ['sidecar'],
      restartPolicy: 'Always',
      securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    });
    expect(stored.spec.volumes).toContainEqual(expect.objectContaining({ name: 'tollgate-identity', secret: expect.objectContaining({ secretName: 'tollgate-identity-payments-assistant' }) }));
    expect(stored.spec.containers[0].env).toContainEqual({ name: 'TOLLGATE_GATEWAY_URL', value: 'http://127.0.0.1:15080' });
    // The sidecar's Unix socket, on a volume the agent shares with it.
    expect(stored.spec.volumes).toContainEqual(expect.objectContaining({ name: 'tollgate-sidecar-socket' }));
    expect(stored.spec.containers[0].env).toContainEqual({ name: 'TOLLGATE_SIDECAR_SOCKET', value: '/var/run/tollgate/sidecar/sidecar.sock' });

    await expect(kubectlRaw(cluster, ['create', '-f', '-'], JSON.stringify(pod('ghost-worker', 'ghost')))).rejects.toThrow(
      /denied the request: tollgate: Agent ghost does not exist in this namespace/,
    );
    // A pod that does not ask is not touched.
    const plain = pod('plain-worker', 'payments-assistant');
    plain.metadata.labels = {} as never;
    await kubectlRaw(cluster, ['create', '-f', '-'], JSON.stringify(plain));
    expect(JSON.parse(await kubectl('get', 'pod', 'plain-worker', '-n', 'default', '-o', 'json')).spec.initContainers).toBeUndefined();
  });

  it('issues a new identity when its Secret is deleted, and revokes the one it held', async () => {
    const before = await get('agents', 'payments-assistant');
    const old = before.status!.identityId as string;
    await kubectl('delete', 'secret', 'tollgate-identity-payments-assistant', '-n', 'default');
    const after = await eventually(async () => {
      const a = await get('agents', 'payments-assistant');
      return a.status?.identityId !== old ? a : undefined;
    }, 10_000, 'a new identity');
    await kubectl('get', 'secret', 'tollgate-identity-payments-assistant', '-n', 'default');
    const identities = (await rest(`/identities?agent_id=${before.status!.registryId}`)).items as { id: string; status: string }[];
    expect(identities.find((i) => i.id === old)?.status).toBe('revoked');
    expect(identities.find((i) => i.id === after.status!.identityId)?.status).toBe('active');
  });

  it('repairs a deleted identity Secret at once, long before the resync: it watches the Secrets it holds', async () => {
    // Another organisation's controller, with the default resync (5 minutes), for a namespace of its own.
    const other = await onboardAdmin(t.app, 'Second');
    const sa = await other.client.post(api('/service-accounts'), { name: 'kubernetes-controller' });
    expect(sa.statusCode).toBe(201);
    const namespace = 'second-org';
    await kubectl('create', 'namespace', namespace);
    await kubectl('annotate', 'namespace', namespace, `tollgate.dev/organization=${other.tenant.slug}`);
    const second = startController('controller-second', {
      TOLLGATE_CLIENT_ID: sa.json().client_id,
      TOLLGATE_CLIENT_SECRET: sa.json().client_secret,
      TOLLGATE_CLAIM_UNANNOTATED: 'false',
      TOLLGATE_RESYNC_SECONDS: '300',
    });
    try {
      const agent = example('agent');
      agent.metadata = { name: 'watched-agent', namespace };
      agent.spec.environment = 'development';
      agent.spec.tools = [];
      agent.spec.delegations = [];
      await apply(agent);
      const before = await eventually(async () => {
        const a = await get('agents', 'watched-agent', namespace);
        return ready(a)?.status === 'True' && a.status?.identityId ? a : undefined;
      }, 30_000, 'Ready with an identity');
      const old = before.status!.identityId as string;

      const deleted = Date.now();
      await kubectl('delete', 'secret', 'tollgate-identity-watched-agent', '-n', namespace);
      const after = await eventually(async () => {
        const a = await get('agents', 'watched-agent', namespace);
        return a.status?.identityId !== old ? a : undefined;
      }, 10_000, 'a new identity');
      expect(Date.now() - deleted).toBeLessThan(10_000); // not the 300 s resync
      await kubectl('get', 'secret', 'tollgate-identity-watched-agent', '-n', namespace);
      const identities = await other.client.get(api(`/identities?agent_id=${before.status!.registryId}`));
      const items = identities.json().items as { id: string; status: string }[];
      expect(items.find((i) => i.id === old)?.status).toBe('revoked');
      expect(items.find((i) => i.id === after.status!.identityId)?.status).toBe('active');
    } finally {
      await stop(second);
    }
  });

  it('refuses an invalid manifest at the API server, naming the field', async () => {
    const bad = example('agent');
    bad.metadata.name = 'invalid-agent';
    bad.spec.environment = 'prod';
    await expect(apply(bad)).rejects.toThrow(/spec\.environment/);

    const moved = example('tool');
    moved.spec.toolKey = 'payments.transfer_v2';
    await expect(apply(moved)).rejects.toThrow(/toolKey cannot change once registered/);
  });

  it('reports a reconcile that fails, keeps the generation unobserved and retries until it can', async () => {
    const agent = example('agent');
    agent.metadata.name = 'reporting-agent';
    agent.spec.environment = 'development';
    agent.spec.delegations = [];
    agent.spec.tools = [{ tool: 'reports.export', actions: ['invoke'] }];
    await apply(agent);
    const waiting = await eventually(async () => {
      const a = await get('agents', 'reporting-agent');
      return ready(a)?.reason === 'ToolNotFound' ? a : undefined;
    }, 10_000, 'ToolNotFound reported');
    expect(ready(waiting)).toMatchObject({ status: 'False' });
    expect(waiting.status!.observedGeneration).toBeUndefined();

    const tool = example('tool');
    tool.metadata.name = 'reports-export';
    tool.spec = { toolKey: 'reports.export', name: 'Export reports', operations: ['invoke'] };
    await apply(tool);
    await eventually(async () => ready(await get('agents', 'reporting-agent'))?.status === 'True', 15_000, 'Ready after the tool appears');
  });

  it('leaves objects of a namespace annotated for another organisation alone', async () => {
    await kubectl('create', 'namespace', 'other-org');
    await kubectl('annotate', 'namespace', 'other-org', 'tollgate.dev/organization=someone-else');
    const agent = example('agent');
    agent.metadata = { name: 'foreign-agent', namespace: 'other-org' };
    agent.spec.environment = 'development';
    agent.spec.tools = [];
    agent.spec.delegations = [];
    await apply(agent);
    await new Promise((r) => setTimeout(r, 3000)); // longer than a resync
    const foreign = await get('agents', 'foreign-agent', 'other-org');
    expect(foreign.status).toBeUndefined();
    expect(foreign.metadata.finalizers).toBeUndefined();
    const found = (await rest('/agents?q=foreign-agent')).items;
    expect(found).toEqual([]);
  });

  it('fails over to a standby controller, and a restart creates no duplicates', async () => {
    const before = await leaseHolder();
    expect(before).toMatch(/^controller-a_/);
    const b = startController('controller-b');
    await eventually(async () => /controller starting/.test(b.output()), 20_000, 'b standing by');
    await new Promise((r) => setTimeout(r, 1000));
    expect(await leaseHolder()).toBe(before); // b stands by

    // The leader dies without a goodbye: b takes over once the lease (3 s) runs out.
    controllers[0]!.kill('SIGKILL');
    await eventually(async () => (await leaseHolder())?.startsWith('controller-b_'), 15_000, 'b leading');
    const agent = example('agent');
    agent.metadata.name = 'after-failover';
    agent.spec.environment = 'development';
    agent.spec.tools = [];
    agent.spec.delegations = [];
    await apply(agent);
    await eventually(async () => ready(await get('agents', 'after-failover'))?.status === 'True', 10_000, 'reconciled by b');

    // A graceful stop hands the Lease over at once; c relists everything and registers nothing twice.
    const c = startController('controller-c');
    await eventually(async () => /controller starting/.test(c.output()), 20_000, 'c standing by');
    await new Promise((r) => setTimeout(r, 500));
    expect(await leaseHolder()).toMatch(/^controller-b_/);
    await stop(b);
    expect(b.exitCode).toBe(0);
    expect(b.output()).toMatch(/controller stopped/);
    await eventually(async () => (await leaseHolder())?.startsWith('controller-c_'), 5_000, 'c leading at once');
    await eventually(async () => /caches synced/.test(c.output()), 10_000, 'c reconciling');
    await new Promise((r) => setTimeout(r, 2500)); // one resync: every object reconciled by c
    const agents = (await rest('/agents')).items as { slug: string }[];
    for (const slug of ['payments-assistant', 'reporting-agent', 'after-failover']) {
      expect(agents.filter((a) => a.slug === slug), slug).toHaveLength(1);
    }
    const tools = (await rest('/tools')).items as { tool_key: string }[];
    expect(tools.filter((x) => x.tool_key === 'payments.transfer')).toHaveLength(1);
    const servers = (await rest('/mcp-servers')).items as { name: string }[];
    expect(servers.filter((s) => s.name === 'payments-mcp')).toHaveLength(1);
    const policies = (await rest('/policies')).items as { key: string; latest_version: number }[];
    expect(policies.filter((p) => p.key === 'payments-limits')).toMatchObject([{ latest_version: 2 }]);
    const id = (await get('agents', 'payments-assistant')).status!.registryId;
    expect((await rest(`/agents/${id}/permissions`)).items).toHaveLength(1);
  });

  it('runs the finalizers on delete: the agent revoked, the tool blocked, the server quarantined, the policy kept', async () => {
    const agent = await get('agents', 'payments-assistant');
    const tool = await get('tools', 'reports-export');
    const server = await get('mcpservers', 'payments-mcp');
    const policy = await get('policies', 'payments-limits');
    await kubectl('delete', 'agents.tollgate.dev/payments-assistant', 'tools.tollgate.dev/reports-export', 'mcpservers.tollgate.dev/payments-mcp',
      'policies.tollgate.dev/payments-limits', '-n', 'default', '--wait=true', '--timeout=20s');
    const revoked = await rest(`/agents/${agent.status!.registryId}`);
    expect(revoked.status).toBe('revoked');
    await expect(kubectl('get', 'secret', 'tollgate-identity-payments-assistant', '-n', 'default')).rejects.toThrow(/NotFound/);
    // Its history stays: the containment record names the reason.
    const history = (await rest(`/agents/${agent.status!.registryId}/containment`)).items as { reason: string }[];
    expect(history.map((h) => h.reason).join('\n')).toMatch(/deleted in Kubernetes/);
    const tools = (await rest('/tools')).items as { id: string; blocked: boolean }[];
    expect(tools.find((x) => x.id === tool.status!.registryId)?.blocked).toBe(true);
    const servers = (await rest('/mcp-servers')).items as { id: string; trust_state: string }[];
    expect(servers.find((s) => s.id === server.status!.registryId)?.trust_state).toBe('quarantined');
    expect((await rest(`/policies/${policy.status!.registryId}`)).status).toBe('active');
  });
});
