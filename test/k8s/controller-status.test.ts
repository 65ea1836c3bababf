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
 * An Agent's status and Events from what Tollgate knows, on a real API server with the central API on
 * PostgreSQL and the controller as a process (status poll every second, one CallsDenied Event per agent
 * per 3 s): risk band and last decision in the status, AgentSuspended and ContainmentLifted on
 * suspension through the API, IdentityRotated when its Secret goes, and denied calls (made through
 * POST /actions with the agent's own identity) folded into one Event per interval with their count.
 */

type Json = Record<string, any>;

describe('Agent status and Events from Tollgate, on a real Kubernetes API server', () => {
  let cluster: KubeCluster;
  let kubectl: (...args: string[]) => Promise<string>;
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let controller: ReturnType<typeof spawnTollgate>;
  let agentId: string;
  const name = 'status-agent';

  const getAgent = async () => JSON.parse(await kubectl('get', 'agents.tollgate.dev', name, '-o', 'json')) as Json;
  const events = async (reason: string) =>
    (JSON.parse(await kubectl('get', 'events', '--field-selector', `involvedObject.name=${name},reason=${reason}`, '-o', 'json')).items as Json[])
      .sort((a, b) => String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)) || String(a.lastTimestamp).localeCompare(String(b.lastTimestamp)));
  /** The agent's own token, from its identity Secret, as the sidecar gets it. */
  const agentToken = async () => {
    const secret = JSON.parse(await kubectl('get', 'secret', `tollgate-identity-${name}`, '-o', 'json')) as Json;
    const decode = (k: string) => Buffer.from(secret.data[k], 'base64').toString('utf8');
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: decode('client-id'), client_secret: decode('client-secret') },
    });
    expect(res.statusCode).toBe(200);
    return res.json().access_token as string;
  };
  let calls = 0;
  /** A call of a tool the agent is not bound to: decided, denied, recorded as an action. */
  const deniedCall = async (token: string) => {
    const res = await t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': `status-test-${++calls}-${Date.now()}` },
      payload: { tool: 'payments.transfer', target: 'payee://suppliers/acme', parameters: { amount: 10 } },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().decision.decision).toBe('deny');
    return res.json() as { action: { id: string }; decision: { reason_codes: string[] } };
  };

  beforeAll(async () => {
    cluster = await startKube();
    kubectl = kubectlFor(cluster);
    await installCrds(cluster);
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    admin = await onboardAdmin(t.app);
    // The built-in controller role has no telemetry:read, which the decisions are read with; auditor adds it.
    const sa = await admin.client.post(api('/service-accounts'), { name: 'kubernetes-controller', roles: ['controller', 'auditor'] });
    expect(sa.statusCode, sa.body).toBe(201);
    controller = spawnTollgate(['controller'], {
      KUBECONFIG: cluster.kubeconfigPath,
      TOLLGATE_API_URL: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`,
      TOLLGATE_CLIENT_ID: sa.json().client_id,
      TOLLGATE_CLIENT_SECRET: sa.json().client_secret,
      TOLLGATE_LEASE_NAMESPACE: 'default',
      TOLLGATE_LEASE_SECONDS: '3',
      TOLLGATE_STATUS_POLL_SECONDS: '1',
      TOLLGATE_DENIED_EVENT_SECONDS: '3',
      TOLLGATE_METRICS_PORT: 'off',
      POD_NAME: 'controller-status',
      LOG_LEVEL: 'info',
    });
    const agent = parse(readFileSync(path.join(ROOT, 'examples', 'agent.yaml'), 'utf8')) as Json;
    agent.metadata = { name, namespace: 'default' };
    Object.assign(agent.spec, { environment: 'development', tools: [], delegations: [] });
    await kubectlRaw(cluster, ['apply', '-f', '-'], JSON.stringify(agent));
    const ready = await eventually(async () => {
      const a = await getAgent();
      return a.status?.conditions?.find((c: Json) => c.type === 'Ready')?.status === 'True' && a.status.identityId ? a : undefined;
    }, 30_000, 'the Agent Ready');
    agentId = ready.status.registryId;
  }, 30 * 60_000);

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => console.error(`--- controller\n${controller?.output().split('\n').slice(-60).join('\n')}`));
  });

  afterAll(async () => {
    await stop(controller);
    await t?.close();
    await cluster?.stop();
  }, 60_000);

  it('shows the risk band Tollgate computes, and a Risk column in kubectl get -o wide', async () => {
    expect((await getAgent()).status.riskBand).toBeUndefined(); // not scored yet
    const scored = await admin.client.post(api(`/risks/agents/${agentId}/recalculate`), {});
    expect(scored.statusCode, scored.body).toBe(200);
    const band = (await admin.client.get(api(`/agents/${agentId}`))).json().risk_band as string;
    expect(['low', 'medium', 'high', 'critical']).toContain(band);
    await eventually(async () => (await getAgent()).status.riskBand === band, 10_000, 'status.riskBand');
    const wide = await kubectl('get', 'tgagent', name, '-o', 'wide');
    const [header, row] = wide.trim().split('\n');
    expect(header).toMatch(/\bRISK\s+LAST DECISION\b/);
    expect(row).toContain(band);
  });

  it('reports denied calls at once, then folds them into one CallsDenied Event per interval, with their count and reasons', async () => {
    const token = await agentToken();
    // One denied call after a quiet spell: reported at the next poll.
    const one = await deniedCall(token);
    const code = one.decision.reason_codes[0]!;
    const [first] = await eventually(async () => {
      const e = await events('CallsDenied');
      return e.length ? e : undefined;
    }, 15_000, 'a CallsDenied Event');
    expect(first).toMatchObject({ type: 'Warning', count: 1, reportingComponent: 'tollgate.dev/controller', involvedObject: { kind: 'Agent', name } });
    expect(first!.message).toMatch(new RegExp(`^1 call denied in the last \\d+s: ${code} ×1$`));
    // As events.k8s.io/v1 sees it: reportingController.
    const v1 = JSON.parse(await kubectl('get', 'events.v1.events.k8s.io', first!.metadata.name, '-o', 'json')) as Json;
    expect(v1).toMatchObject({ reportingController: 'tollgate.dev/controller', reason: 'CallsDenied', regarding: { name } });

    // Three more right away: within the interval (3 s) no Event, then one for the three.
    const more = [await deniedCall(token), await deniedCall(token), await deniedCall(token)];
    expect(more.every((d) => d.decision.reason_codes[0] === code)).toBe(true);
    const [, second] = await eventually(async () => {
      const e = await events('CallsDenied');
      return e.length >= 2 ? e : undefined;
    }, 15_000, 'a second CallsDenied Event');
    expect(second).toMatchObject({ type: 'Warning', count: 3 });
    expect(second!.message).toMatch(new RegExp(`^3 calls denied in the last \\d+s: ${code} ×3$`));
    expect(Date.parse(second!.firstTimestamp)).toBeGreaterThanOrEqual(Date.parse(first!.lastTimestamp));
    expect(Date.parse(second!.metadata.creationTimestamp) - Date.parse(first!.metadata.creationTimestamp)).toBeGreaterThanOrEqual(2000);
    expect(await events('CallsDenied')).toHaveLength(2);

    // The last decision, as Tollgate recorded it (to the second).
    const newest = await admin.client.get(api(`/telemetry?event_type=gateway.decision&agent_id=${agentId}&limit=1`));
    expect(newest.json().items[0].id).toBe(more[2]!.action.id);
    const decidedAt = new Date(newest.json().items[0].occurred_at as string).toISOString().replace(/\.\d{3}Z$/, 'Z');
    await eventually(async () => (await getAgent()).status.lastDecisionAt === decidedAt, 10_000, 'status.lastDecisionAt');
  });

  it('reports a suspension through the API as AgentSuspended, in the status, and its lifting', async () => {
    const suspended = await admin.client.post(api(`/agents/${agentId}/suspend`), { reason: 'Investigating unexpected transfers', confirm: true });
    expect(suspended.statusCode, suspended.body).toBe(200);
    await eventually(async () => (await getAgent()).status.containment === 'suspended', 10_000, 'status.containment');
    const [event] = await eventually(async () => {
      const e = await events('AgentSuspended');
      return e.length ? e : undefined;
    }, 10_000, 'an AgentSuspended Event');
    expect(event).toMatchObject({ type: 'Warning', reportingComponent: 'tollgate.dev/controller' });
    expect(event!.message).toMatch(/suspended in Tollgate: every call it makes is refused/);

    const restored = await admin.client.post(api(`/agents/${agentId}/restore`), { reason: 'Cleared', confirm: true });
    expect(restored.statusCode, restored.body).toBe(200);
    await eventually(async () => (await getAgent()).status.containment === undefined, 10_000, 'containment cleared');
    expect(await events('ContainmentLifted')).toHaveLength(1);
    expect(await events('AgentSuspended')).toHaveLength(1); // once, not every poll

    const off = await admin.client.post(api(`/agents/${agentId}/gateway-access`), { enabled: false, reason: 'Pause its calls', confirm: true });
    expect(off.statusCode, off.body).toBe(200);
    await eventually(async () => (await events('GatewayAccessDisabled')).length === 1, 10_000, 'GatewayAccessDisabled');
    expect((await getAgent()).status.containment).toBe('gateway_access_off');
  });

  it('reports a new identity as IdentityRotated, naming the old and the new one', async () => {
    const old = (await getAgent()).status.identityId as string;
    await kubectl('delete', 'secret', `tollgate-identity-${name}`);
    const after = await eventually(async () => {
      const a = await getAgent();
      return a.status.identityId !== old ? a : undefined;
    }, 15_000, 'a new identity');
    const [event] = await eventually(async () => {
      const e = await events('IdentityRotated');
      return e.length ? e : undefined;
    }, 10_000, 'an IdentityRotated Event');
    expect(event).toMatchObject({ type: 'Normal', reportingComponent: 'tollgate.dev/controller' });
    expect(event!.message).toBe(`workload identity ${old} replaced by ${after.status.identityId} in Secret tollgate-identity-${name}: the Secret was gone`);
  });
});
