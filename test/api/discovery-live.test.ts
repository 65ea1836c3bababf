import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { api, onboardAdmin, setPlan, startTestApp, type Client, type TestApp } from '../support/harness.js';
import {
  startCodeHostStandin,
  startGraphStandin,
  startLoginStandin,
  startVendorAStandin,
  startVendorBStandin,
  type CodeHostRepo,
  type GraphPrincipal,
  type VendorAAssistant,
} from '../support/provider-standins.js';
import type { Standin } from '../support/standin.js';
import { testTls } from '../support/tls.js';

/**
 * Discovery runs of the live adapters model_vendor_a, model_vendor_b, directory and code_host through the
 * real API (docs/discovery.md): an integration with an `env` credential reference, `POST /connectors/{id}/run`
 * answering `running` at once, the in-process worker reading the provider's HTTPS stand-in (test CA, loopback
 * opened only by OUTBOUND_ALLOWED_CIDRS) and landing the result: exact counters, the records and findings in
 * the read endpoints, nothing added by a second run, a refused key failing the run with the adapter's message,
 * and the secret nowhere a person can read it. Without the allow-list the guarded transport refuses the
 * loopback host and nothing is recorded.
 */

/** The secret lives only in this process's environment, under a name of the test's own. */
const SECRET_VAR = 'TOLLGATE_TEST_DISCOVERY_LIVE_KEY';
const SECRET = 'sk-live-DISCOVERY-7f3a9c1e5b2d8046';
/** Fast job polling, so a run lands in well under a second. */
const FAST_JOBS = { JOB_POLL_INTERVAL_SECONDS: '0.5', JOB_MAINTENANCE_INTERVAL_SECONDS: '1' };
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

let caDir: string;
let caFile: string;
let t: TestApp;
const standins: Standin[] = [];

async function track(started: Promise<Standin>): Promise<Standin> {
  const s = await started;
  standins.push(s);
  return s;
}

beforeAll(async () => {
  process.env[SECRET_VAR] = SECRET;
  caDir = mkdtempSync(join(tmpdir(), 'tollgate-discovery-live-'));
  caFile = join(caDir, 'ca.pem');
  writeFileSync(caFile, testTls().ca);
  t = await startTestApp({ worker: true, env: { ...FAST_JOBS, OUTBOUND_ALLOWED_CIDRS: '127.0.0.1/32', OUTBOUND_CA_FILE: caFile } });
});

afterAll(async () => {
  await t?.close();
  await Promise.all(standins.splice(0).map((s) => s.close()));
  delete process.env[SECRET_VAR];
  rmSync(caDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------------
// Helpers: an organisation with a credential reference, integrations, runs, and where the secret may show
// ---------------------------------------------------------------------------------------------------

interface Org {
  client: Client;
  orgId: string;
  credentialId: string;
}

/** A new organisation on the enterprise plan (production agents allowed) with an `env` credential reference. */
async function organisation(app: TestApp): Promise<Org> {
  const admin = await onboardAdmin(app.app);
  await setPlan(app, admin.tenant.id, 'enterprise');
  const res = await admin.client.post(api('/resources/credentials'), { name: 'Provider key', provider: 'env', secret_path: SECRET_VAR });
  expect(res.statusCode, res.body).toBe(201);
  return { client: admin.client, orgId: admin.tenant.id, credentialId: res.json().id };
}

/** Creates a live integration; answers its connector's id. */
async function integration(org: Org, kind: string, name: string, config: Record<string, unknown>): Promise<string> {
  const res = await org.client.post(api('/integrations'), { kind, name, mode: 'live', config, credential_ref_id: org.credentialId });
  expect(res.statusCode, res.body).toBe(201);
  expect(res.json()).toMatchObject({ kind, mode: 'live', status: 'active', connector: { adapter_key: kind, enabled: true, last_run: null } });
  return res.json().connector.id;
}

type Run = {
  id: string;
  status: 'running' | 'succeeded' | 'failed';
  counters: typeof NO_COUNTS;
  warnings: string[];
  error_message: string | null;
  finished_at: string | null;
  [k: string]: unknown;
};

/** Starts a run: the answer comes at once, the run `running` with nothing counted yet. */
async function startRun(org: Org, connectorId: string, body: Record<string, unknown> = {}): Promise<Run> {
  const res = await org.client.post(api(`/connectors/${connectorId}/run`), body);
  expect(res.statusCode, res.body).toBe(200);
  const run = res.json() as Run;
  expect(run).toMatchObject({ connector_id: connectorId, status: 'running', counters: NO_COUNTS, warnings: [], error_message: null, finished_at: null });
  expect(JSON.stringify(run)).not.toContain(SECRET);
  return run;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls the connector's runs every 100 ms until the run is no longer running (20 s at most). */
async function finished(org: Org, connectorId: string, runId: string): Promise<Run> {
  const started = Date.now();
  for (;;) {
    const res = await org.client.get(api(`/connectors/${connectorId}/runs`));
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).not.toContain(SECRET);
    const run = (res.json().items as Run[]).find((r) => r.id === runId);
    expect(run, `run ${runId} in the connector's runs`).toBeDefined();
    if (run!.status !== 'running') return run!;
    if (Date.now() - started > 20_000) throw new Error(`run ${runId} still running after 20 s`);
    await sleep(100);
  }
}

async function runToEnd(org: Org, connectorId: string, body: Record<string, unknown> = {}): Promise<Run> {
  const run = await startRun(org, connectorId, body);
  const done = await finished(org, connectorId, run.id);
  expect(done.finished_at).toEqual(expect.any(String));
  return done;
}

/** Every page of a cursor-paged list. */
async function allPages<T>(client: Client, path: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await client.get(api(`${path}${sep}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
    expect(res.statusCode, res.body).toBe(200);
    items.push(...(res.json().items as T[]));
    cursor = res.json().next_cursor;
  } while (cursor);
  return items;
}

type Agent = { id: string; name: string; source: string; tags: string[]; [k: string]: unknown };
type Finding = { id: string; category: string; severity: string; status: string; agent_id: string | null; run_id: string | null; evidence: Record<string, unknown> };

/** The organisation's agents, less their risk band: the risk job writes it in the background, at its own pace. */
const agentsOf = async (org: Org) => (await allPages<Agent>(org.client, '/agents')).map(({ risk_band: _band, ...a }) => a);
const findingsOf = (org: Org) => allPages<Finding>(org.client, '/findings');
async function modelsOf(org: Org) {
  const res = await org.client.get(api('/models'));
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items as Array<{ id: string; provider: string; model_name: string; [k: string]: unknown }>;
}

/** The discovered agents by external reference, read from their owner-attestation findings (the API shows the reference there). */
async function discoveredByRef(org: Org): Promise<Map<string, { agent: Agent; finding: Finding }>> {
  const agents = new Map((await agentsOf(org)).map((a) => [a.id, a]));
  const out = new Map<string, { agent: Agent; finding: Finding }>();
  for (const f of (await findingsOf(org)).filter((x) => x.category === 'owner_attestation')) {
    const ref = f.evidence.external_ref as string;
    expect(out.has(ref), `one owner-attestation finding for ${ref}`).toBe(false);
    out.set(ref, { agent: agents.get(f.agent_id!)!, finding: f });
  }
  return out;
}

/**
 * What a person can read about the organisation's discovery (runs, integrations, audit, evidence, findings,
 * the records) and the app's log: none of it holds the secret.
 */
async function expectSecretNowhere(org: Org, connectorIds: string[]): Promise<void> {
  const texts: string[] = [];
  for (const id of connectorIds) texts.push((await org.client.get(api(`/connectors/${id}/runs`))).body);
  texts.push((await org.client.get(api('/integrations'))).body);
  texts.push(JSON.stringify(await allPages(org.client, '/audit')));
  texts.push(JSON.stringify(await allPages(org.client, '/evidence')));
  texts.push(JSON.stringify(await findingsOf(org)));
  texts.push(JSON.stringify(await agentsOf(org)));
  texts.push(JSON.stringify(await modelsOf(org)));
  texts.push((await org.client.get(api('/resources/credentials'))).body);
  texts.push(t.logs.join('\n'));
  // What was searched does hold the runs (so finding no secret in it means something).
  expect(texts.join('\n')).toContain('discovery.run_started');
  expect(texts.join('\n')).toContain('discovery run finished');
  for (const text of texts) expect(text).not.toContain(SECRET);
}

/** The run's audit (started, then succeeded or failed) and its `discovery_run` evidence, matching the run. */
async function expectRunRecorded(org: Org, connectorId: string, run: Run, adapter: string): Promise<void> {
  const audit = await allPages<{ action: string; actor: { type: string }; outcome: string; details: Record<string, unknown> }>(
    org.client,
    `/audit?target_id=${connectorId}`,
  );
  const ofRun = audit.filter((a) => a.details.run_id === run.id);
  const end = run.status === 'succeeded' ? 'discovery.run_succeeded' : 'discovery.run_failed';
  expect(ofRun.map((a) => a.action)).toEqual([end, 'discovery.run_started']);
  expect(ofRun[0]).toMatchObject({
    actor: { type: 'system' },
    outcome: run.status === 'succeeded' ? 'success' : 'failure',
    details: { run_id: run.id, adapter, status: run.status, counters: run.counters, error_message: run.error_message },
  });
  const evidence = await allPages<{ event_type: string; payload: Record<string, unknown> }>(org.client, '/evidence?event_type=discovery_run');
  expect(evidence.filter((e) => e.payload.run_id === run.id)).toEqual([
    expect.objectContaining({ payload: expect.objectContaining({ run_id: run.id, adapter, status: run.status, counters: run.counters, error_message: run.error_message }) }),
  ]);
}

/** Where `secret` occurs in the requests a stand-in received. */
function whereSecretIs(s: Standin): string[] {
  const places: string[] = [];
  for (const r of s.requests) {
    if (r.path.includes(SECRET)) places.push(`path ${r.path}`);
    if (r.body.includes(SECRET)) places.push('body');
    for (const [name, value] of Object.entries(r.headers)) if (String(value).includes(SECRET)) places.push(`header ${name}`);
  }
  return [...new Set(places)];
}

const host = (s: Standin) => `127.0.0.1:${s.port}`;

// ---------------------------------------------------------------------------------------------------

describe('model_vendor_a: assistants and models', () => {
  const assistants: VendorAAssistant[] = [
    {
      id: 'asst_a1',
      name: 'Claims helper',
      description: 'Drafts claim records.',
      model: 'gpt-4o-2024-08-06',
      tools: [{ type: 'code_interpreter' }, { type: 'file_search' }],
      metadata: {
        owner_email: 'maya.okafor@example.com',
        owner_name: 'Maya Okafor',
        environment: 'production',
        data_classification: 'personal',
        purpose: 'Claims intake.',
      },
    },
    { id: 'asst_a2', name: null, model: 'gpt-4o-mini', tools: [{ type: 'function', function: { name: 'lookup_policy', parameters: { type: 'object' } } }] },
    { id: 'asst_a3', name: 'Summariser', description: 'Summarises tickets.', model: 'gpt-4.1', metadata: { environment: 'production' } },
    // A vendor that echoes the key into what it answers: the registry keeps it redacted.
    { id: 'asst_a4', name: `Echo ${SECRET}`, description: `Configured with key=${SECRET}`, model: 'gpt-4.1' },
  ];
  const models = ['gpt-4o-2024-08-06', 'gpt-4o-mini', 'gpt-4.1'];
  const functionWarning =
    'assistant asst_a2 (asst_a2) declares function tools that run in the calling application and are not registry tools: lookup_policy; not granted';
  let org: Org;
  let s: Standin;
  let connectorId: string;
  let first: Run;

  beforeAll(async () => {
    org = await organisation(t);
    s = await track(startVendorAStandin({ key: SECRET, assistants, models, maxPageSize: 2 }));
    connectorId = await integration(org, 'model_vendor_a', 'Vendor A', { environment: 'staging', base_url: s.url });
  });

  it('lands four agents and three models, with an owner-attestation finding each', async () => {
    first = await runToEnd(org, connectorId);
    expect(first).toMatchObject({
      status: 'succeeded',
      error_message: null,
      counters: { ...NO_COUNTS, agents_added: 4, models_added: 3, findings_opened: 4 },
      warnings: [functionWarning],
    });

    // The key went to the stand-in, in its Authorization header only; the assistants were read page by page.
    expect(whereSecretIs(s)).toEqual(['header authorization']);
    expect(s.requests.filter((r) => r.path.startsWith('/v1/assistants')).map((r) => r.path)).toEqual([
      '/v1/assistants?limit=100&order=asc',
      '/v1/assistants?limit=100&order=asc&after=asst_a2',
    ]);

    const registry = await modelsOf(org);
    expect(registry.filter((m) => m.provider === 'model_vendor_a').sort((a, b) => a.model_name.localeCompare(b.model_name))).toEqual(
      [...models].sort().map((id) =>
        expect.objectContaining({
          provider: 'model_vendor_a',
          model_name: id,
          model_version: id === 'gpt-4o-2024-08-06' ? '2024-08-06' : null,
          hosting: 'saas',
          data_policy: 'unknown',
        }),
      ),
    );

    const found = await discoveredByRef(org);
    expect([...found.keys()].sort()).toEqual(['model_vendor_a:asst_a1', 'model_vendor_a:asst_a2', 'model_vendor_a:asst_a3', 'model_vendor_a:asst_a4']);
    const claims = found.get('model_vendor_a:asst_a1')!;
    expect(claims.agent).toMatchObject({
      name: 'Claims helper',
      description: 'Drafts claim records.',
      purpose: 'Claims intake.',
      framework: 'model_vendor_a_assistants',
      environment: 'production',
      data_classification: 'personal',
      code_execution: 'sandboxed',
      persistent_memory: 'bounded',
      source: 'discovery',
      tags: ['discovered'],
      status: 'active',
      owners: [expect.objectContaining({ name: 'Maya Okafor', email: 'maya.okafor@example.com', owner_type: 'accountable' })],
    });
    // A production agent whose source states owner, purpose and classification: medium.
    expect(claims.finding).toMatchObject({ severity: 'medium', status: 'open', run_id: first.id, evidence: { missing: [], environment: 'production' } });

    const unnamed = found.get('model_vendor_a:asst_a2')!;
    expect(unnamed.agent).toMatchObject({
      name: 'asst_a2',
      environment: 'staging',
      code_execution: 'none',
      persistent_memory: 'none',
      data_classification: 'internal',
      source: 'discovery',
      owners: [],
    });
    expect(unnamed.finding).toMatchObject({ severity: 'medium', evidence: { missing: ['owner', 'purpose', 'data classification'] } });

    // A production agent whose source states no owner: high.
    const summariser = found.get('model_vendor_a:asst_a3')!;
    expect(summariser.agent).toMatchObject({ name: 'Summariser', environment: 'production', owners: [] });
    expect(summariser.finding).toMatchObject({ severity: 'high', evidence: { owner_email: null, missing: ['owner', 'purpose', 'data classification'] } });

    expect(found.get('model_vendor_a:asst_a4')!.agent).toMatchObject({ name: 'Echo [redacted]', description: 'Configured with key=[redacted]' });

    await expectRunRecorded(org, connectorId, first, 'model_vendor_a');
  });

  it('a second run adds nothing: zero counters, no duplicate agents, models or findings', async () => {
    const before = { agents: await agentsOf(org), models: await modelsOf(org), findings: await findingsOf(org) };
    const second = await runToEnd(org, connectorId);
    expect(second).toMatchObject({ status: 'succeeded', counters: NO_COUNTS, warnings: [functionWarning], error_message: null });
    expect((await agentsOf(org)).map((a) => a.id).sort()).toEqual(before.agents.map((a) => a.id).sort());
    expect((await modelsOf(org)).map((m) => m.id).sort()).toEqual(before.models.map((m) => m.id).sort());
    expect((await findingsOf(org)).map((f) => f.id).sort()).toEqual(before.findings.map((f) => f.id).sort());
    await expectRunRecorded(org, connectorId, second, 'model_vendor_a');
  });

  it('a vendor refusing the key fails the run with the adapter\'s message, not the key or the vendor\'s body', async () => {
    const refusing = await track(startVendorAStandin({ key: 'sk-another-key', assistants, models }));
    const refusedConnector = await integration(org, 'model_vendor_a', 'Vendor A (wrong key)', { base_url: refusing.url });
    const before = { agents: await agentsOf(org), models: await modelsOf(org), findings: await findingsOf(org) };
    const run = await runToEnd(org, refusedConnector);
    expect(run).toMatchObject({
      status: 'failed',
      counters: NO_COUNTS,
      warnings: [],
      error_message: `The provider refused the credential (401) at ${host(refusing)} (GET /v1/models).`,
    });
    // The stand-in's body quoted the key it was sent ("Incorrect API key provided: …"): none of it is kept.
    expect(run.error_message).not.toMatch(/Incorrect API key/);
    expect(whereSecretIs(refusing)).toEqual(['header authorization']);
    expect(await agentsOf(org)).toEqual(before.agents);
    expect(await modelsOf(org)).toEqual(before.models);
    expect(await findingsOf(org)).toEqual(before.findings);
    await expectRunRecorded(org, refusedConnector, run, 'model_vendor_a');
    await expectSecretNowhere(org, [connectorId, refusedConnector]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('model_vendor_b: an OpenAI-compatible models list', () => {
  const models = ['lumen-large-2411', 'lumen-small-2409', 'lumen-embed'];
  let org: Org;
  let s: Standin;
  let connectorId: string;

  beforeAll(async () => {
    org = await organisation(t);
    s = await track(startVendorBStandin({ key: SECRET, models, root: '/openai/v1' }));
    connectorId = await integration(org, 'model_vendor_b', 'Vendor B', { base_url: `${s.url}/openai/v1` });
  });

  it('lands the three models and nothing else', async () => {
    const agentsBefore = await agentsOf(org);
    const run = await runToEnd(org, connectorId, { idempotency_key: 'vendor-b-first' });
    expect(run).toMatchObject({ status: 'succeeded', counters: { ...NO_COUNTS, models_added: 3 }, warnings: [], error_message: null, idempotency_key: 'vendor-b-first' });
    expect(s.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /openai/v1/models']);
    expect(whereSecretIs(s)).toEqual(['header authorization']);

    const registry = (await modelsOf(org)).filter((m) => m.provider === 'model_vendor_b');
    expect(registry.map((m) => m.model_name).sort()).toEqual([...models].sort());
    for (const m of registry) expect(m).toMatchObject({ model_version: null, hosting: 'saas', data_policy: 'unknown' });
    expect(await agentsOf(org)).toEqual(agentsBefore);
    expect(await findingsOf(org)).toEqual([]);
    await expectRunRecorded(org, connectorId, run, 'model_vendor_b');

    // The same idempotency key answers the same run, and runs nothing.
    const again = await org.client.post(api(`/connectors/${connectorId}/run`), { idempotency_key: 'vendor-b-first' });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ id: run.id, status: 'succeeded', counters: run.counters });
    const runs = (await org.client.get(api(`/connectors/${connectorId}/runs`))).json().items as Run[];
    expect(runs.map((r) => r.id)).toEqual([run.id]);
  });

  it('a second run adds nothing', async () => {
    const before = await modelsOf(org);
    const run = await runToEnd(org, connectorId);
    expect(run).toMatchObject({ status: 'succeeded', counters: NO_COUNTS, warnings: [] });
    expect((await modelsOf(org)).map((m) => m.id).sort()).toEqual(before.map((m) => m.id).sort());
    expect(s.requests).toHaveLength(2);
  });

  it('a refused key fails the run with the adapter\'s message and records nothing', async () => {
    const refusing = await track(startVendorBStandin({ key: 'another-key', models: ['should-not-land'] }));
    const refusedConnector = await integration(org, 'model_vendor_b', 'Vendor B (wrong key)', { base_url: `${refusing.url}/v1` });
    const before = await modelsOf(org);
    const run = await runToEnd(org, refusedConnector);
    expect(run).toMatchObject({
      status: 'failed',
      counters: NO_COUNTS,
      warnings: [],
      error_message: `The provider refused the credential (401) at ${host(refusing)} (GET /v1/models).`,
    });
    expect(run.error_message).not.toMatch(/Unauthorized/);
    expect(await modelsOf(org)).toEqual(before);
    await expectRunRecorded(org, refusedConnector, run, 'model_vendor_b');
    await expectSecretNowhere(org, [connectorId, refusedConnector]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('directory: tagged service principals', () => {
  const TENANT = '7c1e2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6';
  const CLIENT = '0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d';
  const ACCESS_TOKEN = 'eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.graph-token.sig';
  const principal = (n: number, tags: string[], extra: Partial<GraphPrincipal> = {}): GraphPrincipal => ({
    id: `00000000-0000-4000-8000-00000000000${n}`,
    appId: `11111111-0000-4000-8000-00000000000${n}`,
    displayName: `Agent ${n}`,
    description: `Service principal ${n}`,
    tags,
    notes: null,
    ...extra,
  });
  const principals = [
    principal(1, ['svc-agent', 'env:production', 'owner:maya.okafor@example.com'], { notes: 'Reconciles payments nightly.' }),
    principal(2, ['svc-agent']),
    principal(3, ['WindowsAzureActiveDirectoryIntegratedApp']),
    principal(4, ['svc-agent', 'environment:Staging']),
  ];
  let org: Org;
  let login: Standin;
  let graph: Standin;
  let connectorId: string;
  let issuer: string;

  beforeAll(async () => {
    org = await organisation(t);
    login = await track(startLoginStandin({ tenant: TENANT, clientId: CLIENT, clientSecret: SECRET, accessToken: ACCESS_TOKEN }));
    graph = await track(startGraphStandin({ accessToken: ACCESS_TOKEN, principals, maxPageSize: 2 }));
    issuer = `${login.url}/${TENANT}/v2.0`;
    connectorId = await integration(org, 'directory', 'Directory', {
      directory_tenant_id: TENANT,
      client_id: CLIENT,
      login_base_url: login.url,
      graph_base_url: graph.url,
    });
  });

  /** The external identities of the organisation's agents. No read endpoint shows them, so the test reads the table (in the organisation's scope). */
  const externalIdentities = () =>
    inScope(t.database.db, { orgId: org.orgId }, (tx) =>
      tx
        .selectFrom('agent_external_identities')
        .select(['agent_id', 'identity_type', 'subject', 'issuer', 'authentication_strength'])
        .where('org_id', '=', org.orgId)
        .orderBy('subject')
        .execute(),
    );

  it('lands three agents, each with its service-principal identity and a finding', async () => {
    const run = await runToEnd(org, connectorId);
    expect(run).toMatchObject({
      status: 'succeeded',
      counters: { ...NO_COUNTS, agents_added: 3, identities_added: 3, findings_opened: 3 },
      warnings: [],
      error_message: null,
    });
    // The secret went to the token endpoint's form only; Graph got the access token, two pages of two.
    expect(whereSecretIs(login)).toEqual(['body']);
    expect(whereSecretIs(graph)).toEqual([]);
    expect(graph.requests).toHaveLength(2);

    const found = await discoveredByRef(org);
    const ref = (n: number) => `directory:00000000-0000-4000-8000-00000000000${n}`;
    expect([...found.keys()].sort()).toEqual([ref(1), ref(2), ref(4)]);
    expect(found.get(ref(1))!.agent).toMatchObject({
      name: 'Agent 1',
      description: 'Service principal 1',
      purpose: 'Reconciles payments nightly.',
      framework: 'custom',
      environment: 'production',
      source: 'discovery',
      tags: ['discovered'],
      owners: [expect.objectContaining({ name: 'maya.okafor@example.com', email: 'maya.okafor@example.com', owner_type: 'accountable' })],
    });
    // Production, no data classification stated: high.
    expect(found.get(ref(1))!.finding).toMatchObject({ severity: 'high', evidence: { missing: ['data classification'] } });
    expect(found.get(ref(2))!.agent).toMatchObject({ name: 'Agent 2', environment: 'development', purpose: '', owners: [] });
    expect(found.get(ref(4))!.agent).toMatchObject({ name: 'Agent 4', environment: 'staging' });
    for (const n of [2, 4]) expect(found.get(ref(n))!.finding.severity).toBe('medium');

    expect(await externalIdentities()).toEqual(
      [1, 2, 4].map((n) => ({
        agent_id: found.get(ref(n))!.agent.id,
        identity_type: 'service_principal',
        subject: `11111111-0000-4000-8000-00000000000${n}`,
        issuer,
        authentication_strength: 'moderate',
      })),
    );
    await expectRunRecorded(org, connectorId, run, 'directory');
  });

  it('a second run adds nothing: no new agents, identities or findings', async () => {
    const before = { agents: await agentsOf(org), findings: await findingsOf(org), identities: await externalIdentities() };
    const run = await runToEnd(org, connectorId);
    expect(run).toMatchObject({ status: 'succeeded', counters: NO_COUNTS, warnings: [] });
    expect((await agentsOf(org)).map((a) => a.id).sort()).toEqual(before.agents.map((a) => a.id).sort());
    expect((await findingsOf(org)).map((f) => f.id).sort()).toEqual(before.findings.map((f) => f.id).sort());
    expect(await externalIdentities()).toEqual(before.identities);
  });

  it('a directory refusing the client secret fails the run naming its error code, not the secret or its text', async () => {
    const refusingLogin = await track(startLoginStandin({ tenant: TENANT, clientId: CLIENT, clientSecret: 'the-real-secret', accessToken: ACCESS_TOKEN }));
    const otherGraph = await track(startGraphStandin({ accessToken: ACCESS_TOKEN, principals }));
    const refusedConnector = await integration(org, 'directory', 'Directory (wrong secret)', {
      directory_tenant_id: TENANT,
      client_id: CLIENT,
      login_base_url: refusingLogin.url,
      graph_base_url: otherGraph.url,
    });
    const before = { agents: await agentsOf(org), identities: await externalIdentities() };
    const run = await runToEnd(org, refusedConnector);
    expect(run).toMatchObject({
      status: 'failed',
      counters: NO_COUNTS,
      warnings: [],
      error_message: `The directory refused the client credentials (401 invalid_client) at ${host(refusingLogin)} (POST /${TENANT}/oauth2/v2.0/token).`,
    });
    // The login stand-in's refusal quoted the secret it was sent ("AADSTS7000215: Invalid client secret provided (…)").
    expect(run.error_message).not.toMatch(/AADSTS/);
    expect(otherGraph.requests).toHaveLength(0);
    expect(await agentsOf(org)).toEqual(before.agents);
    expect(await externalIdentities()).toEqual(before.identities);
    await expectRunRecorded(org, refusedConnector, run, 'directory');
    await expectSecretNowhere(org, [connectorId, refusedConnector]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('code_host: agent manifests in an organisation\'s repositories', () => {
  const ORG = 'aldergrove';
  const manifest = (name: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      name,
      description: `${name} does things.`,
      purpose: 'Refunds duplicate charges.',
      framework: 'langgraph',
      environment: 'production',
      owner: { name: 'Aisha Bello', email: 'aisha.bello@example.com' },
      tools: ['billing.issue_refund', 'crm.lookup_customer', 'ghost.unknown_tool'],
      ...extra,
    });
  const repos: CodeHostRepo[] = [
    { name: 'refund-agent', files: { '.tollgate/agent.json': manifest('Refund Agent') } },
    { name: 'website' },
    { name: 'broken-json', files: { '.tollgate/agent.json': '{ "name": ' } },
    { name: 'dev-agent', files: { '.tollgate/agent.json': manifest('Dev Agent', { environment: 'development', owner: undefined, tools: undefined, purpose: undefined }) } },
  ];
  const warnings = [
    'repository aldergrove/broken-json: .tollgate/agent.json is not JSON; skipped',
    'agent Refund Agent: tool ghost.unknown_tool is not in the inventory; not granted',
  ];
  let org: Org;
  let s: Standin;
  let connectorId: string;
  let tools: Map<string, string>;

  beforeAll(async () => {
    org = await organisation(t);
    // One tool registered by hand; crm.lookup_customer is one of the organisation's sample tools.
    const res = await org.client.post(api('/tools'), { tool_key: 'billing.issue_refund', name: 'Issue refund', privilege_class: 'financial', approval_class: 'single' });
    expect(res.statusCode, res.body).toBe(201);
    const list = (await org.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    tools = new Map(list.map((x) => [x.tool_key, x.id]));
    expect(tools.has('crm.lookup_customer')).toBe(true);
    expect(tools.has('ghost.unknown_tool')).toBe(false);
    s = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos, maxPerPage: 2 }));
    connectorId = await integration(org, 'code_host', 'Code host', { organisation: ORG, api_base_url: s.url });
  });

  const permissionsOf = async (agentId: string) => {
    const res = await org.client.get(api(`/agents/${agentId}/permissions`));
    expect(res.statusCode, res.body).toBe(200);
    return res.json().items as Array<{ id: string; target_kind: string; target_id: string; actions: string[]; [k: string]: unknown }>;
  };

  it('lands an agent per valid manifest, granted the tools that exist, with a warning for the rest', async () => {
    const toolsBefore = (await org.client.get(api('/tools'))).json().items;
    const run = await runToEnd(org, connectorId);
    expect(run).toMatchObject({ status: 'succeeded', counters: { ...NO_COUNTS, agents_added: 2, findings_opened: 2 }, warnings, error_message: null });
    expect(whereSecretIs(s)).toEqual(['header authorization']);
    expect(s.requests.filter((r) => r.path.includes('/repos?')).map((r) => r.path)).toEqual([
      `/orgs/${ORG}/repos?per_page=100&page=1`,
      '/organizations/4242/repos?per_page=2&page=2',
    ]);

    const found = await discoveredByRef(org);
    expect([...found.keys()].sort()).toEqual(['code_host:aldergrove/dev-agent', 'code_host:aldergrove/refund-agent']);
    const refund = found.get('code_host:aldergrove/refund-agent')!;
    expect(refund.agent).toMatchObject({
      name: 'Refund Agent',
      description: 'Refund Agent does things.',
      purpose: 'Refunds duplicate charges.',
      framework: 'langgraph',
      environment: 'production',
      source: 'discovery',
      tags: ['discovered'],
      owners: [expect.objectContaining({ name: 'Aisha Bello', email: 'aisha.bello@example.com' })],
    });
    expect(refund.finding).toMatchObject({ severity: 'high', evidence: { missing: ['data classification'] } });
    const dev = found.get('code_host:aldergrove/dev-agent')!;
    expect(dev.agent).toMatchObject({ name: 'Dev Agent', environment: 'development', purpose: '', owners: [] });
    expect(dev.finding).toMatchObject({ severity: 'medium', evidence: { missing: ['owner', 'purpose', 'data classification'] } });

    // The manifest's tools that exist became invoke bindings; the unknown one was not invented.
    const bindings = await permissionsOf(refund.agent.id);
    expect(bindings.map((b) => ({ target_kind: b.target_kind, target_id: b.target_id, actions: b.actions })).sort((a, b) => a.target_id.localeCompare(b.target_id))).toEqual(
      [tools.get('billing.issue_refund')!, tools.get('crm.lookup_customer')!].sort().map((id) => ({ target_kind: 'tool', target_id: id, actions: ['invoke'] })),
    );
    expect(await permissionsOf(dev.agent.id)).toEqual([]);
    expect((await org.client.get(api('/tools'))).json().items).toEqual(toolsBefore);
    await expectRunRecorded(org, connectorId, run, 'code_host');
  });

  it('a second run adds nothing: no new agents, findings or bindings', async () => {
    const before = await discoveredByRef(org);
    const refundId = before.get('code_host:aldergrove/refund-agent')!.agent.id;
    const bindingsBefore = await permissionsOf(refundId);
    const findingsBefore = await findingsOf(org);
    const run = await runToEnd(org, connectorId);
    expect(run).toMatchObject({ status: 'succeeded', counters: NO_COUNTS, warnings });
    expect((await agentsOf(org)).map((a) => a.id).sort()).toEqual([...before.values()].map((x) => x.agent.id).sort());
    expect((await findingsOf(org)).map((f) => f.id).sort()).toEqual(findingsBefore.map((f) => f.id).sort());
    expect(await permissionsOf(refundId)).toEqual(bindingsBefore);
  });

  it('a code host refusing the token fails the run with the adapter\'s message', async () => {
    const refusing = await track(startCodeHostStandin({ token: 'ghp_another_token', org: ORG, repos }));
    const refusedConnector = await integration(org, 'code_host', 'Code host (wrong token)', { organisation: ORG, api_base_url: refusing.url });
    const before = await agentsOf(org);
    const run = await runToEnd(org, refusedConnector);
    expect(run).toMatchObject({
      status: 'failed',
      counters: NO_COUNTS,
      warnings: [],
      error_message: `The provider refused the credential (401) at ${host(refusing)} (GET /orgs/${ORG}/repos).`,
    });
    expect(run.error_message).not.toMatch(/Bad credentials/);
    expect(await agentsOf(org)).toEqual(before);
    await expectRunRecorded(org, refusedConnector, run, 'code_host');
    await expectSecretNowhere(org, [connectorId, refusedConnector]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('without OUTBOUND_ALLOWED_CIDRS the guarded transport refuses the loopback stand-ins', () => {
  let bare: TestApp;

  beforeAll(async () => {
    // The same test CA, no allow-list: the only difference from the app above.
    bare = await startTestApp({ worker: true, env: { ...FAST_JOBS, OUTBOUND_CA_FILE: caFile } });
  });
  afterAll(async () => {
    await bare?.close();
  });

  it('every live adapter\'s run fails with the refused-host message, connects nowhere and records nothing', async () => {
    const org = await organisation(bare);
    const vendorA = await track(startVendorAStandin({ key: SECRET, assistants: [{ id: 'asst_x', name: 'X', model: 'gpt-4.1' }], models: ['gpt-4.1'] }));
    const vendorB = await track(startVendorBStandin({ key: SECRET, models: ['lumen-large-2411'] }));
    const login = await track(startLoginStandin({ tenant: 'contoso.example.com', clientId: 'abc', clientSecret: SECRET, accessToken: 'tok' }));
    const graph = await track(startGraphStandin({ accessToken: 'tok', principals: [{ id: 'p1', appId: 'a1', displayName: 'P', tags: ['svc-agent'] }] }));
    const codeHost = await track(startCodeHostStandin({ token: SECRET, org: 'aldergrove', repos: [{ name: 'r', files: { '.tollgate/agent.json': '{"name":"R","environment":"development"}' } }] }));
    const connectors = [
      await integration(org, 'model_vendor_a', 'Vendor A', { base_url: vendorA.url }),
      await integration(org, 'model_vendor_b', 'Vendor B', { base_url: vendorB.url }),
      await integration(org, 'directory', 'Directory', { directory_tenant_id: 'contoso.example.com', client_id: 'abc', login_base_url: login.url, graph_base_url: graph.url }),
      await integration(org, 'code_host', 'Code host', { organisation: 'aldergrove', api_base_url: codeHost.url }),
    ];
    const before = { agents: await agentsOf(org), models: await modelsOf(org), findings: await findingsOf(org) };

    const started = [];
    for (const id of connectors) started.push(await startRun(org, id));
    const runs = await Promise.all(started.map((run, i) => finished(org, connectors[i]!, run.id)));
    for (const run of runs) {
      expect(run).toMatchObject({
        status: 'failed',
        counters: NO_COUNTS,
        warnings: [],
        error_message: '127.0.0.1 is a loopback host; Tollgate calls only public hosts',
      });
    }
    // Refused before any connection: not one TCP connection reached a stand-in.
    for (const s of [vendorA, vendorB, login, graph, codeHost]) {
      expect(s.connections).toBe(0);
      expect(s.requests).toEqual([]);
    }
    expect(await agentsOf(org)).toEqual(before.agents);
    expect(await modelsOf(org)).toEqual(before.models);
    expect(await findingsOf(org)).toEqual(before.findings);
    const adapters = ['model_vendor_a', 'model_vendor_b', 'directory', 'code_host'];
    for (const [i, run] of runs.entries()) await expectRunRecorded(org, connectors[i]!, run, adapters[i]!);
  });
});
