import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { codeHostAdapter } from '../../api/modules/integrations/adapters/code-host.js';
import { ConnectorError, type Adapter, type DiscoveryResult } from '../../api/modules/integrations/adapters/contract.js';
import { directoryAdapter } from '../../api/modules/integrations/adapters/directory.js';
import { modelVendorAAdapter } from '../../api/modules/integrations/adapters/model-vendor-a.js';
import { modelVendorBAdapter } from '../../api/modules/integrations/adapters/model-vendor-b.js';
import { OutboundError, OutboundHttp } from '../../api/platform/outbound.js';
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
import type { Standin, StandinRequest } from '../support/standin.js';
import { testTls } from '../support/tls.js';

/**
 * The live adapters of model_vendor_a, model_vendor_b, directory and code_host (issue 15, "Adapters"), each
 * against a real HTTPS stand-in (test CA) speaking its provider's wire format, through the guarded transport
 * with loopback allowed only by the explicit allow-list. What the spec asks of every one: the provider's
 * records become discovered records, paging is followed, a refused credential and a malformed answer are
 * connector errors whose message carries neither the secret nor the provider's body, and the secret reaches
 * the provider's own endpoint only (the stand-ins record every request).
 */

const NOW = new Date('2025-06-01T12:00:00Z');
let http: OutboundHttp;
const standins: Standin[] = [];

beforeAll(() => {
  http = new OutboundHttp({ allowedCidrs: ['127.0.0.1/32'], ca: testTls().ca, timeoutMs: 5_000 });
});
afterAll(async () => {
  await http.close();
});
afterEach(async () => {
  await Promise.all(standins.splice(0).map((s) => s.close()));
});

/** Keeps a stand-in to close after the test. */
async function track(started: Promise<Standin>): Promise<Standin> {
  const s = await started;
  standins.push(s);
  return s;
}

function run(adapter: Adapter, config: Record<string, unknown>, secret: string | null = SECRET): Promise<DiscoveryResult> {
  expect(adapter.validateConfig(config)).toEqual([]);
  return adapter.discover({ http, config, secret, now: NOW });
}

/** The error a discovery rejects with (fails the test when it resolves). */
async function failure(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    () => undefined,
    (err: unknown) => err as Error,
  );
  if (!outcome) throw new Error('expected the discovery to fail');
  return outcome;
}

const SECRET = 'sk-live-S3CR3T-6b1f0c9a4e7d2b8f';

/** Every place in a recorded request where `secret` occurs: header names, the path, the body. */
function whereSecretIs(requests: StandinRequest[], secret: string): string[] {
  const places: string[] = [];
  for (const r of requests) {
    if (r.path.includes(secret)) places.push(`path ${r.path}`);
    if (r.body.includes(secret)) places.push('body');
    for (const [name, value] of Object.entries(r.headers)) if (String(value).includes(secret)) places.push(`header ${name}`);
  }
  return places;
}

/** Nothing a person sees (messages, warnings, the result) carries the secret. */
function expectNoSecretIn(value: unknown, secret = SECRET): void {
  const text = value instanceof Error ? value.message : JSON.stringify(value);
  expect(text).not.toContain(secret);
}

// ---------------------------------------------------------------------------------------------------

describe('model_vendor_a (OpenAI REST: assistants v2 and models)', () => {
  const assistants: VendorAAssistant[] = [
    {
      id: 'asst_001',
      name: 'Claims helper',
      description: 'Drafts claim records.',
      model: 'gpt-4o-2024-08-06',
      tools: [{ type: 'code_interpreter' }, { type: 'file_search' }],
      metadata: { owner_email: 'maya.okafor@example.com', owner_name: 'Maya Okafor', environment: 'production', data_classification: 'personal' },
    },
    { id: 'asst_002', name: null, model: 'gpt-4o-mini', tools: [{ type: 'function', function: { name: 'lookup_policy', parameters: { type: 'object' } } }] },
    { id: 'asst_003', name: 'Translator', model: 'gpt-4o-mini', metadata: { environment: 'moon', owner_email: 'not an address' } },
    { id: 'asst_004', name: 'Summariser', model: 'gpt-4.1', tools: [] },
    { id: 'asst_005', name: 'Coder', model: 'gpt-4.1', tools: [{ type: 'code_interpreter' }] },
  ];
  const models = ['gpt-4o-2024-08-06', 'gpt-4o-mini', 'gpt-4.1', 'text-embedding-3-large'];

  it('reads every assistant page by page and the models, with the key only in its Authorization header', async () => {
    const s = await track(startVendorAStandin({ key: SECRET, assistants, models, maxPageSize: 2 }));
    const result = await run(modelVendorAAdapter, { base_url: s.url, environment: 'staging' });

    expect(result.adapter).toBe('model_vendor_a');
    expect(result.mode).toBe('live');
    expect(result.agents.map((a) => a.external_ref)).toEqual(['asst_001', 'asst_002', 'asst_003', 'asst_004', 'asst_005'].map((id) => `model_vendor_a:${id}`));
    const [claims, unnamed, translator] = result.agents;
    expect(claims).toMatchObject({
      name: 'Claims helper',
      description: 'Drafts claim records.',
      model: 'model_vendor_a/gpt-4o-2024-08-06',
      environment: 'production',
      owner_name: 'Maya Okafor',
      owner_email: 'maya.okafor@example.com',
      data_classification: 'personal',
      code_execution: 'sandboxed',
      persistent_memory: 'bounded',
      tool_grants: [],
    });
    expect(unnamed).toMatchObject({ name: 'asst_002', environment: 'staging', code_execution: 'none', tool_grants: [] });
    // Metadata that is not a known value is ignored, not trusted.
    expect(translator).toMatchObject({ environment: 'staging', owner_email: null });
    expect(result.warnings).toEqual([expect.stringMatching(/asst_002.*function tools.*lookup_policy/)]);

    expect(result.models).toEqual(
      models.map((id) => ({
        provider: 'model_vendor_a',
        model_name: id,
        model_version: id === 'gpt-4o-2024-08-06' ? '2024-08-06' : null,
        hosting: 'saas',
        data_policy: 'unknown',
      })),
    );

    const listCalls = s.requests.filter((r) => r.path.startsWith('/v1/assistants'));
    expect(listCalls.map((r) => r.path)).toEqual([
      '/v1/assistants?limit=100&order=asc',
      '/v1/assistants?limit=100&order=asc&after=asst_002',
      '/v1/assistants?limit=100&order=asc&after=asst_004',
    ]);
    expect(listCalls.every((r) => r.headers['openai-beta'] === 'assistants=v2')).toBe(true);
    expect(s.requests.every((r) => r.method === 'GET')).toBe(true);
    expect(s.requests.every((r) => r.headers.authorization === `Bearer ${SECRET}`)).toBe(true);
    expect(new Set(whereSecretIs(s.requests, SECRET))).toEqual(new Set(['header authorization']));
    expectNoSecretIn(result);
  });

  it.each([403, 401] as const)('falls back to the model inventory, with a warning, when the key may not list assistants (%i)', async (status) => {
    const s = await track(startVendorAStandin({ key: SECRET, assistants, models, assistantsRefused: status }));
    const result = await run(modelVendorAAdapter, { base_url: s.url });
    expect(result.agents).toEqual([]);
    expect(result.models.map((m) => m.model_name)).toEqual(models);
    expect(result.warnings).toEqual([`the key may not list managed agents (${status}); only the model inventory was read`]);
  });

  it('fails with "refused the credential (401)" for a wrong key, without the key or the provider\'s body', async () => {
    const s = await track(startVendorAStandin({ key: 'sk-the-right-one', assistants, models }));
    const err = await failure(run(modelVendorAAdapter, { base_url: s.url }));
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err.message).toMatch(/refused the credential \(401\)/);
    expect(err.message).not.toMatch(/Incorrect API key/);
    expectNoSecretIn(err);
    // Asked for assistants, then for models (a narrower key could have listed those): both refused.
    expect(s.requests.map((r) => r.path.split('?')[0])).toEqual(['/v1/assistants', '/v1/models']);
  });

  it('fails on answers that are not the format: not JSON, a wrong shape, paging that does not move on', async () => {
    const notJson = await track(
      startVendorAStandin({ key: SECRET, assistants, models, override: ({ path }) => (path === '/v1/models' ? { status: 200, body: '<html>maintenance</html>' } : undefined) }),
    );
    const e1 = await failure(run(modelVendorAAdapter, { base_url: notJson.url }));
    expect(e1).toBeInstanceOf(ConnectorError);
    expect(e1.message).toMatch(/^Malformed answer from 127\.0\.0\.1:\d+ \(GET \/v1\/models\): not JSON/);

    const shape = await track(
      startVendorAStandin({
        key: SECRET,
        assistants,
        models,
        override: ({ path }) => (path === '/v1/assistants' ? { status: 200, body: JSON.stringify({ object: 'list', data: [{ id: 'asst_x', name: 'X' }], has_more: false }) } : undefined),
      }),
    );
    const e2 = await failure(run(modelVendorAAdapter, { base_url: shape.url }));
    expect(e2).toBeInstanceOf(ConnectorError);
    expect(e2.message).toMatch(/Malformed answer .*\/v1\/assistants.*data\.0\.model/);

    const stuck = await track(
      startVendorAStandin({
        key: SECRET,
        assistants,
        models,
        override: ({ path }) =>
          path === '/v1/assistants' ? { status: 200, body: JSON.stringify({ object: 'list', data: [], first_id: null, last_id: null, has_more: true }) } : undefined,
      }),
    );
    const e3 = await failure(run(modelVendorAAdapter, { base_url: stuck.url }));
    expect(e3).toBeInstanceOf(ConnectorError);
    expect(e3.message).toMatch(/has_more/);
  });

  it('keeps no echo of the key in what it answers', async () => {
    const echo: VendorAAssistant = { id: 'asst_echo', name: `Bot configured with ${SECRET}`, description: `key=${SECRET}`, model: 'gpt-4.1' };
    const s = await track(startVendorAStandin({ key: SECRET, assistants: [echo], models: [] }));
    const result = await run(modelVendorAAdapter, { base_url: s.url });
    expect(result.agents[0]).toMatchObject({ name: 'Bot configured with [redacted]', description: 'key=[redacted]' });
    expectNoSecretIn(result);
  });

  it('refuses an http:// base_url and values outside the environments in validateConfig', () => {
    expect(modelVendorAAdapter.validateConfig({})).toEqual([]);
    expect(modelVendorAAdapter.validateConfig({ environment: 'production', base_url: 'https://api.example.com', team: 'claims' })).toEqual([]);
    expect(modelVendorAAdapter.validateConfig({ base_url: 'http://api.example.com' })).toEqual(['base_url must use https (got http)']);
    expect(modelVendorAAdapter.validateConfig({ environment: 'prod' })).toEqual(['environment must be one of production, staging, development']);
    expect(modelVendorAAdapter.validateConfig({ base_url: 'https://user:pw@api.example.com' })).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('model_vendor_b (an OpenAI-compatible models list)', () => {
  const models = ['lumen-large-2411', 'lumen-small-2409', 'lumen-embed'];

  it.each([
    ['a versioned root', '/v1', '/v1', '/v1/models'],
    ['a root without a version (v1 added)', '', '/v1', '/v1/models'],
    ['a prefixed versioned root', '/openai/v1', '/openai/v1', '/openai/v1/models'],
  ])('lists the models of %s', async (_what, basePath, root, path) => {
    const s = await track(startVendorBStandin({ key: SECRET, models, root }));
    const result = await run(modelVendorBAdapter, { base_url: `${s.url}${basePath}` });
    expect(result.models).toEqual(models.map((id) => ({ provider: 'model_vendor_b', model_name: id, model_version: null, hosting: 'saas', data_policy: 'unknown' })));
    expect(result.agents).toEqual([]);
    expect(s.requests.map((r) => `${r.method} ${r.path}`)).toEqual([`GET ${path}`]);
    expect(whereSecretIs(s.requests, SECRET)).toEqual(['header authorization']);
    expect(s.requests[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
  });

  it('fails on a refused key and on a malformed list, naming neither the key nor the body', async () => {
    const s = await track(startVendorBStandin({ key: 'another-key', models }));
    const refused = await failure(run(modelVendorBAdapter, { base_url: `${s.url}/v1` }));
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused.message).toMatch(/refused the credential \(401\)/);
    expectNoSecretIn(refused);

    const bad = await track(startVendorBStandin({ key: SECRET, models, override: () => ({ status: 200, body: JSON.stringify({ data: [{ id: 7 }] }) }) }));
    const malformed = await failure(run(modelVendorBAdapter, { base_url: `${bad.url}/v1` }));
    expect(malformed).toBeInstanceOf(ConnectorError);
    expect(malformed.message).toMatch(/Malformed answer .*data\.0\.id/);
  });

  it('requires HTTPS: validateConfig refuses http://, and the transport refuses it even when asked', async () => {
    expect(modelVendorBAdapter.validateConfig({ base_url: 'http://llm.example.com/v1' })).toEqual(['base_url must use https (got http)']);
    expect(modelVendorBAdapter.validateConfig({ base_url: 'ftp://llm.example.com' })).toEqual(['base_url must use https (got ftp)']);
    expect(modelVendorBAdapter.validateConfig({ base_url: 'https://llm.example.com/v1?key=x' })).toEqual(['base_url must not carry a query or fragment']);
    expect(modelVendorBAdapter.validateConfig({})).toEqual([]);
    const s = await track(startVendorBStandin({ key: SECRET, models }));
    const plain = s.url.replace('https://', 'http://');
    const err = await failure(modelVendorBAdapter.discover({ http, config: { base_url: plain }, secret: SECRET, now: NOW }));
    expect(err).toBeInstanceOf(OutboundError);
    expect(s.connections).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('directory (client-credentials token, Graph service principals)', () => {
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
    principal(5, ['svc-agent', 'env:nowhere']),
    principal(6, ['other']),
    principal(7, ['svc-agent']),
    principal(8, ["o'brien"], { displayName: "O'Brien's bot" }),
  ];

  async function directory(graphOptions: Partial<Parameters<typeof startGraphStandin>[0]> = {}, secret = SECRET) {
    const login = await track(startLoginStandin({ tenant: TENANT, clientId: CLIENT, clientSecret: secret, accessToken: ACCESS_TOKEN }));
    const graph = await track(startGraphStandin({ accessToken: ACCESS_TOKEN, principals, maxPageSize: 2, ...graphOptions }));
    const config = { directory_tenant_id: TENANT, client_id: CLIENT, login_base_url: login.url, graph_base_url: graph.url };
    return { login, graph, config };
  }

  it('gets a token with the secret, then pages through the tagged service principals with the token only', async () => {
    const { login, graph, config } = await directory();
    const result = await run(directoryAdapter, config);

    expect(result.agents.map((a) => a.external_ref)).toEqual([1, 2, 4, 5, 7].map((n) => `directory:00000000-0000-4000-8000-00000000000${n}`));
    expect(result.agents[0]).toMatchObject({
      name: 'Agent 1',
      description: 'Service principal 1',
      purpose: 'Reconciles payments nightly.',
      environment: 'production',
      owner_email: 'maya.okafor@example.com',
      identities: [{ identity_type: 'service_principal', subject: '11111111-0000-4000-8000-000000000001', issuer: `${login.url}/${TENANT}/v2.0`, authentication_strength: 'moderate' }],
    });
    expect(result.agents.map((a) => a.environment)).toEqual(['production', 'development', 'staging', 'development', 'development']);
    expect(result.warnings).toEqual([]);

    // The token request: the secret in its form, nowhere else.
    expect(login.requests).toHaveLength(1);
    const form = new URLSearchParams(login.requests[0]!.body);
    expect(login.requests[0]!.method).toBe('POST');
    expect(login.requests[0]!.path).toBe(`/${TENANT}/oauth2/v2.0/token`);
    expect(Object.fromEntries(form)).toEqual({ client_id: CLIENT, client_secret: SECRET, scope: `${graph.url}/.default`, grant_type: 'client_credentials' });
    expect(whereSecretIs(login.requests, SECRET)).toEqual(['body']);

    // Graph: three pages of two, the access token as bearer, never the secret.
    expect(graph.requests).toHaveLength(3);
    expect(whereSecretIs(graph.requests, SECRET)).toEqual([]);
    for (const r of graph.requests) {
      expect(r.method).toBe('GET');
      expect(r.headers.authorization).toBe(`Bearer ${ACCESS_TOKEN}`);
      expect(r.headers.consistencylevel).toBe('eventual');
    }
    const first = new URL(graph.requests[0]!.path, graph.url);
    expect(first.pathname).toBe('/v1.0/servicePrincipals');
    expect(first.searchParams.get('$filter')).toBe("tags/any(t:t eq 'svc-agent')");
    expect(first.searchParams.get('$select')).toBe('id,appId,displayName,description,tags,notes');
    expect(first.searchParams.get('$top')).toBe('100');
    expectNoSecretIn(result);
  });

  it("escapes the tag in the filter (single quotes doubled)", async () => {
    const { graph, config } = await directory();
    const result = await run(directoryAdapter, { ...config, agent_tag: "o'brien" });
    expect(result.agents.map((a) => a.name)).toEqual(["O'Brien's bot"]);
    expect(new URL(graph.requests[0]!.path, graph.url).searchParams.get('$filter')).toBe("tags/any(t:t eq 'o''brien')");
  });

  it('fails when the directory refuses the client secret, naming its error code, never the secret or its text', async () => {
    const { graph, config } = await directory({}, 'the-real-secret');
    const err = await failure(run(directoryAdapter, config));
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err.message).toMatch(/refused the client credentials \(401 invalid_client\)/);
    expect(err.message).not.toMatch(/AADSTS/);
    expectNoSecretIn(err);
    expect(graph.requests).toHaveLength(0);
  });

  it('fails when Graph refuses the token (403: no permission to read service principals)', async () => {
    const { config } = await directory({
      override: () => ({ status: 403, body: JSON.stringify({ error: { code: 'Authorization_RequestDenied', message: 'Insufficient privileges to complete the operation.' } }) }),
    });
    const err = await failure(run(directoryAdapter, config));
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err.message).toMatch(/refused the credential \(403\).*Application\.Read\.All/);
    expect(err.message).not.toMatch(/Insufficient privileges/);
  });

  it('does not follow a next page on another origin (the token would go there), and warns', async () => {
    const elsewhere = await track(startGraphStandin({ accessToken: ACCESS_TOKEN, principals }));
    const { graph, config } = await directory({ nextLinkOrigin: () => elsewhere.url });
    const result = await run(directoryAdapter, config);
    expect(result.agents).toHaveLength(2);
    expect(result.warnings).toEqual([expect.stringMatching(/next page is on another origin.*not followed/)]);
    expect(graph.requests).toHaveLength(1);
    expect(elsewhere.requests).toHaveLength(0);
  });

  it('fails on a malformed token or page', async () => {
    const login = await track(
      startLoginStandin({
        tenant: TENANT,
        clientId: CLIENT,
        clientSecret: SECRET,
        accessToken: ACCESS_TOKEN,
        override: () => ({ status: 200, body: JSON.stringify({ token_type: 'Bearer', expires_in: 3599 }) }),
      }),
    );
    const graph = await track(startGraphStandin({ accessToken: ACCESS_TOKEN, principals }));
    const e1 = await failure(run(directoryAdapter, { directory_tenant_id: TENANT, client_id: CLIENT, login_base_url: login.url, graph_base_url: graph.url }));
    expect(e1.message).toMatch(/Malformed answer from .*\(POST \/.*\/oauth2\/v2\.0\/token\): access_token/);

    const { config } = await directory({ override: () => ({ status: 200, body: JSON.stringify({ value: [{ id: 'x', displayName: 'no appId' }] }) }) });
    const e2 = await failure(run(directoryAdapter, config));
    expect(e2).toBeInstanceOf(ConnectorError);
    expect(e2.message).toMatch(/Malformed answer .*servicePrincipals.*value\.0\.appId/);
  });

  it('validates its configuration', () => {
    expect(directoryAdapter.validateConfig({})).toEqual(['directory_tenant_id is required', 'client_id is required']);
    expect(directoryAdapter.validateConfig({ directory_tenant_id: 'contoso.example.com', client_id: CLIENT, agent_tag: 'ai-agent' })).toEqual([]);
    expect(directoryAdapter.validateConfig({ directory_tenant_id: '../x', client_id: CLIENT })).toEqual([
      'directory_tenant_id must be a tenant id (GUID) or domain name',
    ]);
    expect(directoryAdapter.validateConfig({ directory_tenant_id: TENANT, client_id: CLIENT, graph_base_url: 'http://graph.example.com' })).toEqual([
      'graph_base_url must use https (got http)',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('code_host (GitHub REST: organisation repositories, contents)', () => {
  const ORG = 'aldergrove';
  const manifest = (name: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      name,
      description: `${name} does things.`,
      purpose: 'Testing.',
      framework: 'langgraph',
      environment: 'production',
      owner: { name: 'Aisha Bello', email: 'aisha.bello@example.com' },
      tools: ['payments.refund_charge', 'crm.search_contacts'],
      ...extra,
    });

  it('reads the manifests of the organisation\'s repositories page by page, skipping those without one quietly', async () => {
    const repos: CodeHostRepo[] = [
      { name: 'refund-agent', files: { '.tollgate/agent.json': manifest('Refund Agent') } },
      { name: 'website' },
      { name: 'legacy-bot', files: { '.tollgate/agent.json': manifest('Legacy', { environment: 'prod' }) } },
      { name: 'broken-json', files: { '.tollgate/agent.json': '{ "name": ' } },
      { name: 'docs' },
      { name: 'dev-agent', files: { '.tollgate/agent.json': manifest('Dev Agent', { environment: 'development', owner: undefined, tools: undefined }) } },
    ];
    const s = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos, maxPerPage: 2 }));
    const result = await run(codeHostAdapter, { organisation: ORG, api_base_url: s.url });

    expect(result.agents).toEqual([
      expect.objectContaining({
        external_ref: 'code_host:aldergrove/refund-agent',
        name: 'Refund Agent',
        description: 'Refund Agent does things.',
        purpose: 'Testing.',
        framework: 'langgraph',
        environment: 'production',
        owner_name: 'Aisha Bello',
        owner_email: 'aisha.bello@example.com',
        tool_grants: ['payments.refund_charge', 'crm.search_contacts'],
      }),
      expect.objectContaining({ external_ref: 'code_host:aldergrove/dev-agent', environment: 'development', owner_email: null, tool_grants: [] }),
    ]);
    expect(result.warnings).toEqual([
      expect.stringMatching(/^repository aldergrove\/legacy-bot: \.tollgate\/agent\.json is not a valid agent manifest \(environment: .*\); skipped$/),
      'repository aldergrove/broken-json: .tollgate/agent.json is not JSON; skipped',
    ]);

    const lists = s.requests.filter((r) => r.path.includes('/repos?'));
    expect(lists.map((r) => r.path)).toEqual([
      `/orgs/${ORG}/repos?per_page=100&page=1`,
      '/organizations/4242/repos?per_page=2&page=2',
      '/organizations/4242/repos?per_page=2&page=3',
    ]);
    expect(s.requests.filter((r) => r.path.includes('/contents/')).map((r) => r.path).sort()).toEqual(
      repos.map((r) => `/repos/${ORG}/${r.name}/contents/.tollgate/agent.json`).sort(),
    );
    for (const r of s.requests) {
      expect(r.method).toBe('GET');
      expect(r.headers.authorization).toBe(`Bearer ${SECRET}`);
      expect(r.headers.accept).toBe('application/vnd.github+json');
      expect(r.headers['x-github-api-version']).toBe('2022-11-28');
    }
    expect(new Set(whereSecretIs(s.requests, SECRET))).toEqual(new Set(['header authorization']));
    expectNoSecretIn(result);
  });

  it('reads a configured manifest folder', async () => {
    const s = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos: [{ name: 'a', files: { 'ops/agents/agent.json': manifest('A') } }] }));
    const result = await run(codeHostAdapter, { organisation: ORG, api_base_url: s.url, manifest_dir: 'ops/agents' });
    expect(result.agents.map((a) => a.name)).toEqual(['A']);
    expect(s.requests.at(-1)!.path).toBe(`/repos/${ORG}/a/contents/ops/agents/agent.json`);
  });

  it.each([
    ['pages of 100', undefined, 1],
    ['pages of 30', 30, 4],
  ])('reads at most 100 of 130 repositories (%s) and says so', async (_what, maxPerPage, listCalls) => {
    const repos: CodeHostRepo[] = Array.from({ length: 130 }, (_, i) => ({ name: `repo-${String(i).padStart(3, '0')}`, files: { '.tollgate/agent.json': manifest(`Agent ${i}`) } }));
    const s = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos, maxPerPage }));
    const result = await run(codeHostAdapter, { organisation: ORG, api_base_url: s.url });
    expect(result.agents).toHaveLength(100);
    expect(result.agents.map((a) => a.external_ref)).toEqual(repos.slice(0, 100).map((r) => `code_host:${ORG}/${r.name}`));
    expect(result.warnings).toEqual(['aldergrove has more than 100 repositories: only the first 100 were read']);
    expect(s.requests.filter((r) => r.path.includes('/repos?'))).toHaveLength(listCalls);
    expect(s.requests.filter((r) => r.path.includes('/contents/'))).toHaveLength(100);
  });

  it('fails on a refused token, an unknown organisation, a malformed list and a spent rate limit', async () => {
    const s = await track(startCodeHostStandin({ token: 'ghp_other', org: ORG, repos: [] }));
    const refused = await failure(run(codeHostAdapter, { organisation: ORG, api_base_url: s.url }));
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused.message).toMatch(/refused the credential \(401\)/);
    expect(refused.message).not.toMatch(/Bad credentials/);
    expectNoSecretIn(refused);

    const t = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos: [] }));
    const unknown = await failure(run(codeHostAdapter, { organisation: 'someone-else', api_base_url: t.url }));
    expect(unknown.message).toMatch(/no organisation someone-else .*\(404\)/);

    const m = await track(startCodeHostStandin({ token: SECRET, org: ORG, repos: [], override: () => ({ status: 200, body: JSON.stringify({ repos: [] }) }) }));
    const malformed = await failure(run(codeHostAdapter, { organisation: ORG, api_base_url: m.url }));
    expect(malformed).toBeInstanceOf(ConnectorError);
    expect(malformed.message).toMatch(/Malformed answer .*\/orgs\/aldergrove\/repos/);

    const r = await track(
      startCodeHostStandin({
        token: SECRET,
        org: ORG,
        repos: [{ name: 'a' }],
        override: ({ path }) =>
          path.includes('/contents/') ? { status: 403, body: JSON.stringify({ message: 'API rate limit exceeded' }), headers: { 'x-ratelimit-remaining': '0' } } : undefined,
      }),
    );
    const limited = await failure(run(codeHostAdapter, { organisation: ORG, api_base_url: r.url }));
    expect(limited.message).toMatch(/rate limit .* spent \(403\)/);
  });

  it('validates its configuration', () => {
    expect(codeHostAdapter.validateConfig({})).toEqual(['organisation is required']);
    expect(codeHostAdapter.validateConfig({ organisation: 'aldergrove', manifest_dir: '.agents/prod' })).toEqual([]);
    expect(codeHostAdapter.validateConfig({ organisation: 'aldergrove', manifest_dir: '../secrets' })).toHaveLength(1);
    expect(codeHostAdapter.validateConfig({ organisation: 'aldergrove', manifest_dir: 'a/./b' })).toHaveLength(1);
    expect(codeHostAdapter.validateConfig({ organisation: 'not an org' })).toHaveLength(1);
    expect(codeHostAdapter.validateConfig({ organisation: 'aldergrove', api_base_url: 'http://ghe.example.com/api/v3' })).toEqual([
      'api_base_url must use https (got http)',
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('every live adapter', () => {
  const configs: [Adapter, Record<string, unknown>][] = [
    [modelVendorAAdapter, {}],
    [modelVendorBAdapter, {}],
    [directoryAdapter, { directory_tenant_id: 'contoso.example.com', client_id: 'abc' }],
    [codeHostAdapter, { organisation: 'aldergrove' }],
  ];

  it.each(configs.map(([a, c]) => [a.key, a, c] as const))('%s needs a credential: without one it fails before any request', async (_key, adapter, config) => {
    const requests: string[] = [];
    const recording = { request: async (url: string) => (requests.push(url), { status: 500, headers: {}, body: '' }) };
    const err = await failure(adapter.discover({ http: recording, config, secret: null, now: NOW }));
    expect(err).toBeInstanceOf(ConnectorError);
    expect(err.message).toBe('This connector needs a credential reference.');
    expect(requests).toEqual([]);
  });

  it.each(configs.map(([a]) => [a.key, a] as const))('%s is live, Preview, and needs a secret', (_key, adapter) => {
    expect(adapter).toMatchObject({ mode: 'live', status: 'Preview', needsSecret: true, key: adapter.kind });
  });
});
