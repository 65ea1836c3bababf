import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MOCK_CODE_HOST_AGENTS } from '../../api/modules/integrations/adapters/mock/code-host.data.js';
import { MOCK_DIRECTORY_AGENTS } from '../../api/modules/integrations/adapters/mock/directory.data.js';
import { MOCK_MCP_SERVERS, POISONED_TOOL_KEY, READ_ONLY_MISMATCH_TOOL_KEY } from '../../api/modules/integrations/adapters/mock/mcp.data.js';
import { MOCK_VENDOR_A_AGENTS, MOCK_VENDOR_A_MODELS } from '../../api/modules/integrations/adapters/mock/model-vendor-a.data.js';
import { MOCK_VENDOR_B_MODELS } from '../../api/modules/integrations/adapters/mock/model-vendor-b.data.js';
import { MOCK_RESOURCES } from '../../api/modules/integrations/adapters/mock/resources.data.js';
import { addMember, api, expectValidation, onboardAdmin, setPlan, startTestApp, type Client, type TestApp } from '../support/harness.js';

/**
 * Integrations, connectors and discovery runs through the API on real PostgreSQL, with the jobs run by the
 * app's in-process worker (as `make run` does): the ten operations' contract (validation, permissions,
 * isolation, audit, confirm), runs that answer `running` at once and land their records and findings once,
 * idempotency, one run per connector, the last 50 runs.
 */

type Run = {
  id: string;
  status: 'running' | 'succeeded' | 'failed';
  counters: Record<string, number>;
  warnings: string[];
  error_message: string | null;
  idempotency_key: string | null;
  started_by: string | null;
  connector_id: string;
  integration_id: string;
};

const NO_COUNTS = {
  agents_added: 0,
  models_added: 0,
  mcp_servers_added: 0,
  tools_added: 0,
  resources_added: 0,
  identities_added: 0,
  tools_changed: 0,
  findings_opened: 0,
};

describe('integrations and discovery runs', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp({ worker: true, env: { JOB_POLL_INTERVAL_SECONDS: '0.5' } });
    admin = await onboardAdmin(t.app, 'Discovering Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    other = await onboardAdmin(t.app, 'Other Org');
  }, 60_000);
  afterAll(async () => t?.close());

  async function create(client: Client, body: Record<string, unknown>) {
    const res = await client.post(api('/integrations'), body);
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; status: string; connector: { id: string; adapter_key: string; enabled: boolean; last_run: Run | null } };
  }

  async function start(client: Client, connectorId: string, body: Record<string, unknown> = {}): Promise<Run> {
    const res = await client.post(api(`/connectors/${connectorId}/run`), body);
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  }

  /** The run once the worker has finished it. */
  async function finished(client: Client, connectorId: string, runId: string): Promise<Run> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const res = await client.get(api(`/connectors/${connectorId}/runs`));
      expect(res.statusCode, res.body).toBe(200);
      const run = (res.json().items as Run[]).find((r) => r.id === runId);
      expect(run, `run ${runId} listed`).toBeDefined();
      if (run!.status !== 'running') return run!;
      if (Date.now() > deadline) throw new Error(`run ${runId} still running after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function auditActions(client: Client, targetId: string): Promise<string[]> {
    const res = await client.get(api(`/audit?target_id=${targetId}&limit=200`));
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().items as Array<{ action: string }>).map((e) => e.action);
  }

  describe('GET /integrations/catalogue', () => {
    it('lists a live and a mock adapter for every discovery kind, with their keys, status and whether they need a secret', async () => {
      const res = await admin.client.get(api('/integrations/catalogue'));
      expect(res.statusCode).toBe(200);
      const items = res.json().items as Array<{ key: string; kind: string; mode: string; needs_secret: boolean; config_keys: string[]; status: string }>;
      for (const kind of ['model_vendor_a', 'model_vendor_b', 'mcp', 'directory', 'code_host']) {
        expect(items.filter((i) => i.kind === kind).map((i) => i.mode).sort(), kind).toEqual(['live', 'mock']);
        expect(items.find((i) => i.kind === kind && i.mode === 'mock')).toMatchObject({ key: `mock.${kind}`, needs_secret: false, config_keys: [] });
      }
      expect(items.find((i) => i.key === 'mcp')!.config_keys.length).toBeGreaterThan(0);
      expect(items.every((i) => ['GA', 'Beta', 'Preview'].includes(i.status))).toBe(true);
    });
  });

  describe('POST /integrations', () => {
    it('creates an integration with its connector, audited', async () => {
      const created = await create(admin.client, { kind: 'mcp', name: 'Mock MCP estate' });
      expect(created).toMatchObject({ kind: 'mcp', name: 'Mock MCP estate', mode: 'mock', config: {}, credential_ref_id: null, status: 'active' });
      expect(created.connector).toMatchObject({ adapter_key: 'mock.mcp', enabled: true, last_run: null, last_run_at: null });
      expect(await auditActions(admin.client, created.id)).toContain('integration.created');
      const list = await admin.client.get(api('/integrations'));
      expect(list.json().items.map((i: { id: string }) => i.id)).toContain(created.id);
    });

    it('refuses secret-named configuration keys at any depth and in any letter case, naming each, writing nothing', async () => {
      const before = (await admin.client.get(api('/integrations'))).json().items.length;
      const res = await admin.client.post(api('/integrations'), {
        kind: 'mcp',
        name: 'Leaky',
        config: { servers: [{ endpoint: 'https://mcp.example.com/mcp', headers: { Api_Key: 'sk-123' } }], Client_Secret: 'x', nested: { deeper: { TOKEN: 'y' } } },
      });
      expect(res.statusCode).toBe(422);
      const error = res.json().error;
      expect(error.code).toBe('validation_failed');
      const codes = error.details.map((d: { code?: string }) => d.code);
      expect(codes.every((c: string) => c === 'forbidden_config_key')).toBe(true);
      expect(error.details.map((d: { field: string }) => d.field).sort()).toEqual(['config.Client_Secret', 'config.nested.deeper.TOKEN', 'config.servers.0.headers.Api_Key']);
      expect(res.body).not.toContain('sk-123');
      expect((await admin.client.get(api('/integrations'))).json().items.length).toBe(before);
    });

    it('validates kind, name, mode and the adapter’s own configuration', async () => {
      expectValidation(await admin.client.post(api('/integrations'), { kind: 'ldap', name: 'Nope' }), 'kind');
      expectValidation(await admin.client.post(api('/integrations'), { kind: 'mcp', name: 'x' }), 'name');
      expectValidation(await admin.client.post(api('/integrations'), { kind: 'mcp', name: 'Bad mode', mode: 'shadow' }), 'mode');
      // The live MCP adapter needs servers to read.
      expectValidation(await admin.client.post(api('/integrations'), { kind: 'mcp', name: 'Live without servers', mode: 'live' }), 'config');
      // A live vendor adapter authenticates: it needs a credential reference, of this organisation.
      expectValidation(await admin.client.post(api('/integrations'), { kind: 'model_vendor_a', name: 'Vendor A', mode: 'live' }), 'credential_ref_id');
      const foreign = await other.client.post(api('/resources/credentials'), { name: 'Their key', provider: 'env', secret_path: 'THEIR_KEY' });
      expect(foreign.statusCode, foreign.body).toBe(201);
      expectValidation(
        await admin.client.post(api('/integrations'), { kind: 'model_vendor_a', name: 'Vendor A', mode: 'live', credential_ref_id: foreign.json().id }),
        'credential_ref_id',
      );
    });

    it('answers 409 for a second integration of the same name', async () => {
      await create(admin.client, { kind: 'model_vendor_b', name: 'Twice named' });
      const res = await admin.client.post(api('/integrations'), { kind: 'model_vendor_b', name: 'Twice named' });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('conflict');
    });

    it('accepts a webhook integration, which has nothing to run', async () => {
      const hook = await create(admin.client, { kind: 'webhook', name: 'Inbound events' });
      const res = await admin.client.post(api(`/connectors/${hook.connector.id}/run`), {});
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('conflict');
    });
  });

  describe('discovery runs of the mock adapters', () => {
    it('mock MCP: answers running at once; the worker lands servers, tools, resources and findings once', async () => {
      const integration = await create(admin.client, { kind: 'mcp', name: 'Mock MCP for runs' });
      const run = await start(admin.client, integration.connector.id, { idempotency_key: 'first-run' });
      expect(run).toMatchObject({ status: 'running', connector_id: integration.connector.id, integration_id: integration.id, idempotency_key: 'first-run', started_by: admin.userId });
      expect(run.counters).toEqual(NO_COUNTS);

      const done = await finished(admin.client, integration.connector.id, run.id);
      expect(done.status, done.error_message ?? '').toBe('succeeded');
      const tools = MOCK_MCP_SERVERS.flatMap((s) => s.tools);
      expect(done.counters).toMatchObject({
        mcp_servers_added: MOCK_MCP_SERVERS.length,
        tools_added: tools.length,
        resources_added: MOCK_RESOURCES.length,
        agents_added: 0,
        tools_changed: 0,
      });
      expect(done.counters.findings_opened).toBeGreaterThanOrEqual(2);

      const servers = (await admin.client.get(api('/mcp-servers'))).json().items as Array<{ name: string; trust_state: string; endpoint: string }>;
      for (const s of MOCK_MCP_SERVERS) {
        const found = servers.find((x) => x.endpoint === s.endpoint);
        expect(found, s.name).toBeDefined();
        // Discovery never trusts a server: unknown, or unsigned when the source says so.
        expect(found!.trust_state).toBe(s.trust_state);
      }
      const listed = (await admin.client.get(api('/tools?limit=200'))).json().items as Array<{ tool_key: string; privilege_class: string; definition_hash: string | null }>;
      for (const tool of tools) expect(listed.find((x) => x.tool_key === tool.tool_key), tool.tool_key).toBeDefined();
      expect(listed.filter((x) => tools.some((d) => d.tool_key === x.tool_key)).every((x) => typeof x.definition_hash === 'string')).toBe(true);

      const findings = (await admin.client.get(api('/findings?limit=200'))).json().items as Array<{ category: string; tool_id: string | null; title: string; evidence: Record<string, unknown>; run_id: string | null }>;
      const poisoned = listed.find((x) => x.tool_key === POISONED_TOOL_KEY) as unknown as { id: string };
      const mismatch = listed.find((x) => x.tool_key === READ_ONLY_MISMATCH_TOOL_KEY) as unknown as { id: string };
      expect(findings.find((f) => f.category === 'tool_poisoning' && f.tool_id === poisoned.id)).toMatchObject({ run_id: run.id });
      expect(findings.some((f) => f.tool_id === mismatch.id)).toBe(true);
      expect(findings.filter((f) => f.run_id === run.id).length).toBe(done.counters.findings_opened);

      // The same idempotency key answers the original run, finished as it is now.
      const again = await start(admin.client, integration.connector.id, { idempotency_key: 'first-run' });
      expect(again).toMatchObject({ id: run.id, status: 'succeeded', counters: done.counters });

      // A second run finds what is there already: nothing added, no finding opened twice.
      const second = await finished(admin.client, integration.connector.id, (await start(admin.client, integration.connector.id)).id);
      expect(second.status).toBe('succeeded');
      expect(second.counters).toEqual(NO_COUNTS);
      const toolsAfter = (await admin.client.get(api('/tools?limit=200'))).json().items.length;
      expect(toolsAfter).toBe(listed.length);
      expect((await admin.client.get(api('/findings?limit=200'))).json().items.length).toBe(findings.length);

      // Audited start and finish, with the finish as evidence.
      const actions = await auditActions(admin.client, integration.connector.id);
      expect(actions.filter((a) => a === 'discovery.run_started')).toHaveLength(2);
      expect(actions.filter((a) => a === 'discovery.run_succeeded')).toHaveLength(2);
      const evidence = (await admin.client.get(api('/evidence?event_type=discovery_run&limit=200'))).json().items as Array<{ payload: { run_id: string } }>;
      expect(evidence.filter((e) => e.payload.run_id === run.id)).toHaveLength(1);

      // The integration shows its latest run.
      const listedIntegration = (await admin.client.get(api('/integrations'))).json().items.find((i: { id: string }) => i.id === integration.id);
      expect(listedIntegration.connector.last_run.id).toBe(second.id);
    }, 60_000);

    it('every other mock kind lands what it serves: agents with identities, models, agents from manifests', async () => {
      const expectAdded = async (kind: string, check: (r: Run) => void) => {
        const integration = await create(admin.client, { kind, name: `Mock ${kind}` });
        const run = await finished(admin.client, integration.connector.id, (await start(admin.client, integration.connector.id)).id);
        expect(run.status, `${kind}: ${run.error_message}`).toBe('succeeded');
        check(run);
        return run;
      };
      const models = new Set([...MOCK_VENDOR_A_MODELS].map((m) => `${m.provider}/${m.model_name}`));
      await expectAdded('model_vendor_a', (r) => {
        expect(r.counters.agents_added).toBe(MOCK_VENDOR_A_AGENTS.length);
        expect(r.counters.models_added).toBe(models.size);
      });
      await expectAdded('model_vendor_b', (r) => expect(r.counters.models_added).toBe(MOCK_VENDOR_B_MODELS.length));
      await expectAdded('directory', (r) => {
        expect(r.counters.agents_added).toBe(MOCK_DIRECTORY_AGENTS.length);
        expect(r.counters.identities_added).toBe(MOCK_DIRECTORY_AGENTS.reduce((n, a) => n + a.identities.length, 0));
      });
      await expectAdded('code_host', (r) => expect(r.counters.agents_added).toBe(MOCK_CODE_HOST_AGENTS.length));

      const agents = (await admin.client.get(api('/agents?limit=200'))).json().items as Array<{ name: string; environment: string }>;
      const sample = MOCK_VENDOR_A_AGENTS[0]!;
      expect(agents.find((a) => a.name === sample.name)).toMatchObject({ environment: sample.environment });
    }, 90_000);

    it('on the developer plan, agents the plan refuses are skipped with a warning and the run still succeeds', async () => {
      const dev = await onboardAdmin(t.app, 'Developer plan');
      const integration = await create(dev.client, { kind: 'model_vendor_a', name: 'Mock vendor A' });
      const run = await finished(dev.client, integration.connector.id, (await start(dev.client, integration.connector.id)).id);
      expect(run.status).toBe('succeeded');
      expect(run.counters.agents_added).toBeLessThan(MOCK_VENDOR_A_AGENTS.length);
      expect(run.warnings.some((w) => /plan/i.test(w))).toBe(true);
    }, 30_000);
  });

  describe('one run at a time, status and containment', () => {
    it('answers 409 naming the running run while one is running, and the run of the first request', async () => {
      const integration = await create(admin.client, { kind: 'model_vendor_b', name: 'Concurrent runs' });
      const [a, b] = await Promise.all([
        admin.client.post(api(`/connectors/${integration.connector.id}/run`), {}),
        admin.client.post(api(`/connectors/${integration.connector.id}/run`), {}),
      ]);
      const codes = [a.statusCode, b.statusCode].sort();
      expect(codes).toEqual([200, 409]);
      const ok = a.statusCode === 200 ? a : b;
      const refused = a.statusCode === 200 ? b : a;
      expect(refused.json().error).toMatchObject({ code: 'conflict' });
      expect(refused.json().error.details).toMatchObject({ run_id: ok.json().id });
      await finished(admin.client, integration.connector.id, ok.json().id);
    }, 30_000);

    it('integration status and connector enabled need a reason and confirm, are audited, and stop runs while off', async () => {
      const integration = await create(admin.client, { kind: 'model_vendor_b', name: 'Switched off and on' });
      const status = (body: Record<string, unknown>) => admin.client.post(api(`/integrations/${integration.id}/status`), body);
      const enabled = (body: Record<string, unknown>) => admin.client.post(api(`/connectors/${integration.connector.id}/enabled`), body);

      expectValidation(await status({ status: 'disabled' }), 'reason');
      expectValidation(await status({ status: 'paused', reason: 'maintenance', confirm: true }), 'status');
      const unconfirmed = await status({ status: 'disabled', reason: 'maintenance window' });
      expect(unconfirmed.statusCode).toBe(422);
      expect(unconfirmed.json().error.code).toBe('confirmation_required');

      const off = await status({ status: 'disabled', reason: 'maintenance window', confirm: true });
      expect(off.statusCode, off.body).toBe(200);
      expect(off.json().status).toBe('disabled');
      const refused = await admin.client.post(api(`/connectors/${integration.connector.id}/run`), {});
      expect(refused.statusCode).toBe(409);
      expect(refused.json().error.message).toMatch(/integration is disabled/);
      expect((await status({ status: 'active', reason: 'maintenance over', confirm: true })).json().status).toBe('active');

      const unconfirmedConnector = await enabled({ enabled: false, reason: 'vendor incident' });
      expect(unconfirmedConnector.json().error.code).toBe('confirmation_required');
      const disabled = await enabled({ enabled: false, reason: 'vendor incident', confirm: true });
      expect(disabled.statusCode, disabled.body).toBe(200);
      expect(disabled.json().connector.enabled).toBe(false);
      const refusedAgain = await admin.client.post(api(`/connectors/${integration.connector.id}/run`), {});
      expect(refusedAgain.statusCode).toBe(409);
      expect(refusedAgain.json().error.message).toMatch(/connector is disabled/);
      expect((await enabled({ enabled: true, reason: 'incident closed', confirm: true })).json().connector.enabled).toBe(true);

      expect(await auditActions(admin.client, integration.id)).toEqual(expect.arrayContaining(['integration.created', 'integration.status_changed']));
      const connectorActions = await auditActions(admin.client, integration.connector.id);
      expect(connectorActions).toEqual(expect.arrayContaining(['connector.disabled', 'connector.enabled']));
      const evidence = (await admin.client.get(api('/evidence?event_type=connector_enabled&limit=200'))).json().items as Array<{ payload: { connector_id: string } }>;
      expect(evidence.filter((e) => e.payload.connector_id === integration.connector.id)).toHaveLength(2);
    });
  });

  describe('GET /connectors/{id}/runs', () => {
    it('answers the last 50 runs, newest first', async () => {
      const integration = await create(admin.client, { kind: 'model_vendor_b', name: 'Many runs' });
      const c = new pg.Client({ connectionString: t.ownerUrl });
      await c.connect();
      try {
        // 55 finished runs, a minute apart, as months of scheduled discovery would leave them.
        for (let i = 0; i < 55; i++) {
          const at = new Date(Date.UTC(2026, 0, 1, 0, i));
          await c.query(
            `insert into discovery_runs (id, org_id, connector_id, status, started_at, finished_at, idempotency_key) values ($1, $2, $3, 'succeeded', $4, $4, $5)`,
            [randomUUID(), admin.tenant.id, integration.connector.id, at, `seed-${i}`],
          );
        }
      } finally {
        await c.end();
      }
      const runs = (await admin.client.get(api(`/connectors/${integration.connector.id}/runs`))).json().items as Run[];
      expect(runs).toHaveLength(50);
      expect(runs[0]!.idempotency_key).toBe('seed-54');
      expect(runs.at(-1)!.idempotency_key).toBe('seed-5');
    });
  });

  describe('permissions and isolation', () => {
    it('a holder of integration:read reads but neither configures nor runs; a viewer reads nothing', async () => {
      const integration = await create(admin.client, { kind: 'model_vendor_b', name: 'Guarded' });
      const developer = await addMember(t.app, admin.client, ['agent_developer']);
      expect((await developer.client.get(api('/integrations'))).statusCode).toBe(200);
      expect((await developer.client.get(api('/integrations/catalogue'))).statusCode).toBe(200);
      expect((await developer.client.get(api(`/connectors/${integration.connector.id}/runs`))).statusCode).toBe(200);
      const forbidden = [
        await developer.client.post(api('/integrations'), { kind: 'mcp', name: 'Not mine to make' }),
        await developer.client.post(api(`/connectors/${integration.connector.id}/run`), {}),
        await developer.client.post(api(`/connectors/${integration.connector.id}/enabled`), { enabled: false, reason: 'because', confirm: true }),
        await developer.client.post(api(`/integrations/${integration.id}/status`), { status: 'disabled', reason: 'because', confirm: true }),
      ];
      for (const res of forbidden) {
        expect(res.statusCode, res.body).toBe(403);
        expect(res.json().error.code).toBe('forbidden');
      }
      const viewer = await addMember(t.app, admin.client, ['viewer']);
      expect((await viewer.client.get(api('/integrations'))).statusCode).toBe(403);
      expect((await viewer.client.get(api(`/connectors/${integration.connector.id}/runs`))).statusCode).toBe(403);
      // Nothing changed.
      const after = (await admin.client.get(api('/integrations'))).json().items.find((i: { id: string }) => i.id === integration.id);
      expect(after).toMatchObject({ status: 'active', connector: { enabled: true, last_run: null } });
    });

    it("another organisation's integrations and connectors are 404 and not listed", async () => {
      const integration = await create(admin.client, { kind: 'model_vendor_b', name: 'Ours alone' });
      const cid = integration.connector.id;
      const attempts = [
        await other.client.post(api(`/connectors/${cid}/run`), {}),
        await other.client.get(api(`/connectors/${cid}/runs`)),
        await other.client.post(api(`/connectors/${cid}/enabled`), { enabled: false, reason: 'not yours', confirm: true }),
        await other.client.post(api(`/integrations/${integration.id}/status`), { status: 'disabled', reason: 'not yours', confirm: true }),
      ];
      for (const res of attempts) {
        expect(res.statusCode, res.body).toBe(404);
        expect(res.json().error.code).toBe('not_found');
      }
      expect((await other.client.get(api('/integrations'))).json().items.map((i: { id: string }) => i.id)).not.toContain(integration.id);
      expect((await admin.client.get(api(`/connectors/${cid}/runs`))).json().items).toEqual([]);
    });

    it('bad ids are 422 naming the path parameter', async () => {
      expectValidation(await admin.client.post(api('/connectors/not-a-uuid/run'), {}), 'path.connector_id');
      expectValidation(await admin.client.post(api('/integrations/1/status'), { status: 'active', reason: 'why not', confirm: true }), 'path.integration_id');
    });
  });
});
