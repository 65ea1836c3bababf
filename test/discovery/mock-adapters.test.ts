import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DISCOVERY_KIND, type Adapter, type DiscoveryResult } from '../../api/modules/integrations/adapters/contract.js';
import { ADAPTERS, adapterFor, catalogue } from '../../api/modules/integrations/adapters/index.js';
import { POISONED_TOOL_KEY, READ_ONLY_MISMATCH_TOOL_KEY } from '../../api/modules/integrations/adapters/mock/mcp.data.js';
import { MOCK_ADAPTERS } from '../../api/modules/integrations/adapters/mock/mock-adapters.js';
import { classifyTool, detectPoisoning, readOnlyMismatch } from '../../api/modules/integrations/classify/index.js';
import { catalogueEntryOut } from '../../api/modules/integrations/integrations.schemas.js';
import { SAMPLE_TOOLS } from '../../api/modules/inventory/sample-tools.js';
import { TOOL_KEY } from '../../api/modules/inventory/inventory.schemas.js';
import {
  CLASSIFICATION,
  CODE_EXECUTION,
  DATA_POLICY,
  ENVIRONMENT,
  HUMAN_APPROVAL_COVERAGE,
  INTERNET_EXPOSURE,
  MCP_AUTH_TYPE,
  MCP_TRANSPORT,
  MODEL_HOSTING,
  PERSISTENT_MEMORY,
  PRINCIPAL_TYPE,
  PRIVILEGE_CLASS,
} from '../../api/modules/shared/index.js';

/**
 * The mock adapters (issue 15, "Adapters": fictional but realistic data, deterministic, always available) and
 * the adapter catalogue. Every discovered record is checked against the registry's enumerations; the counts
 * are the ones docs/discovery.md promises; the mock MCP servers carry the tools the classifier and the
 * poisoning detector must flag, and only those.
 */

const NOW = new Date('2025-06-01T12:00:00Z');
const noNetwork = { request: () => Promise.reject(new Error('a mock adapter reached for the network')) };

function discover(adapter: Adapter, now = NOW, config: Record<string, unknown> = {}): Promise<DiscoveryResult> {
  return adapter.discover({ http: noNetwork, config, secret: null, now });
}

async function all(): Promise<Record<string, DiscoveryResult>> {
  return Object.fromEntries(await Promise.all(MOCK_ADAPTERS.map(async (a) => [a.kind, await discover(a)] as const)));
}

const nullable = <T extends z.ZodType>(t: T) => t.nullable();
const email = z.email();

const identity = z.strictObject({
  identity_type: z.enum(['service_principal', 'workload', 'oauth_client']),
  subject: z.string().min(1),
  issuer: z.url().nullable(),
  authentication_strength: z.enum(['weak', 'moderate', 'strong']).nullable(),
});

const agent = z.strictObject({
  external_ref: z.string().regex(/^(model_vendor_a|directory|code_host):\S+$/),
  name: z.string().min(1).max(200),
  description: z.string().min(1),
  purpose: z.string(),
  framework: z.string().min(1).max(64),
  environment: z.enum(ENVIRONMENT),
  model: nullable(z.string().regex(/^model_vendor_[ab]\/\S+$/)),
  owner_name: nullable(z.string().min(1)),
  owner_email: nullable(email.regex(/@example\.com$/)),
  data_classification: nullable(z.enum(CLASSIFICATION)),
  internet_exposure: nullable(z.enum(INTERNET_EXPOSURE)),
  code_execution: nullable(z.enum(CODE_EXECUTION)),
  persistent_memory: nullable(z.enum(PERSISTENT_MEMORY)),
  human_approval_coverage: nullable(z.enum(HUMAN_APPROVAL_COVERAGE)),
  business_unit: nullable(z.string().min(1).max(120)),
  identities: z.array(identity),
  tool_grants: z.array(z.string().regex(TOOL_KEY)),
  resource_grants: z.array(z.string().min(1)),
  delegations: z.array(
    z.strictObject({ principal_ref: z.string().min(1), display_name: z.string().min(1), principal_type: z.enum(PRINCIPAL_TYPE), scopes: z.array(z.string().min(1)).min(1) }),
  ),
});

const tool = z.strictObject({
  tool_key: z.string().max(200).regex(TOOL_KEY),
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/),
  title: z.string().min(1).nullable(),
  description: z.string().min(1),
  privilege_class: z.enum(PRIVILEGE_CLASS).nullable(),
  input_schema: z.looseObject({ type: z.literal('object'), properties: z.record(z.string(), z.looseObject({ type: z.string() })) }),
  read_only_hint: z.boolean().nullable(),
  operations: z.array(z.string()),
  resource: z.string().min(1).nullable(),
  idempotent: z.boolean().nullable(),
});

const server = z.strictObject({
  name: z.string().min(1),
  endpoint: z.url({ protocol: /^https$/ }),
  transport: z.enum(MCP_TRANSPORT),
  auth_type: z.enum(MCP_AUTH_TYPE),
  publisher: z.string().min(1).nullable(),
  trust_state: z.enum(['unknown', 'unsigned']),
  protocol_version: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
  tools: z.array(tool).min(1),
});

const model = z.strictObject({
  provider: z.enum(['model_vendor_a', 'model_vendor_b']),
  model_name: z.string().min(1).max(200),
  model_version: z.string().nullable(),
  hosting: z.enum(MODEL_HOSTING),
  data_policy: z.enum(DATA_POLICY),
});

const resource = z.strictObject({
  name: z.string().min(1),
  kind: z.enum(['data', 'api']),
  system: z.string().min(1),
  classification: z.enum(CLASSIFICATION).nullable(),
  contains_personal_data: z.boolean().nullable(),
  base_url: z.url().nullable(),
});

const result = z.strictObject({
  adapter: z.string(),
  mode: z.literal('mock'),
  agents: z.array(agent),
  models: z.array(model),
  mcp_servers: z.array(server),
  resources: z.array(resource),
  warnings: z.array(z.string().min(1)),
});

describe('mock adapters', () => {
  it('exist for every discovery kind, keyed mock.<kind>, GA, needing no secret nor configuration', () => {
    expect(MOCK_ADAPTERS.map((a) => a.kind)).toEqual([...DISCOVERY_KIND]);
    for (const a of MOCK_ADAPTERS) {
      expect(a).toMatchObject({ key: `mock.${a.kind}`, mode: 'mock', status: 'GA', needsSecret: false, configKeys: [] });
      expect(a.validateConfig({})).toEqual([]);
      expect(a.validateConfig({ anything: 'non-secret' })).toEqual([]);
    }
  });

  it.each(MOCK_ADAPTERS.map((a) => [a.key, a] as const))('%s is deterministic: the same answer at any time, whatever a caller did to the last one', async (_key, a) => {
    const first = await discover(a);
    const json = JSON.stringify(first);
    first.agents.pop();
    first.mcp_servers[0]?.tools.pop();
    first.warnings.push('changed by a caller');
    const second = await discover(a, new Date('2031-01-01T00:00:00Z'));
    expect(JSON.stringify(second)).toBe(json);
    expect(second).toEqual(await discover(a));
    expect(second.adapter).toBe(a.key);
  });

  it('answer records in the registry\'s shapes and enumerations', async () => {
    for (const [kind, r] of Object.entries(await all())) {
      const parsed = result.safeParse(r);
      expect(parsed.success, `${kind}: ${parsed.success ? '' : z.prettifyError(parsed.error)}`).toBe(true);
      for (const a of r.agents) expect(a.external_ref.startsWith(`${kind}:`)).toBe(true);
    }
  });

  it('describe a few dozen agents, 10+ models, 4-6 MCP servers, resources, identities and delegations', async () => {
    const r = Object.values(await all());
    const agents = r.flatMap((x) => x.agents);
    const models = r.flatMap((x) => x.models);
    const servers = r.flatMap((x) => x.mcp_servers);
    const resources = r.flatMap((x) => x.resources);
    expect(agents.length).toBeGreaterThanOrEqual(30);
    expect(agents.length).toBeLessThanOrEqual(40);
    expect(new Set(agents.map((a) => a.external_ref)).size).toBe(agents.length);
    expect(models.length).toBeGreaterThanOrEqual(10);
    expect(new Set(models.map((m) => m.provider))).toEqual(new Set(['model_vendor_a', 'model_vendor_b']));
    expect(servers.length).toBeGreaterThanOrEqual(4);
    expect(servers.length).toBeLessThanOrEqual(6);
    expect(new Set(servers.map((s) => s.endpoint)).size).toBe(servers.length);
    const tools = servers.flatMap((s) => s.tools);
    expect(new Set(tools.map((t) => t.tool_key)).size).toBe(tools.length);
    expect(new Set(resources.map((x) => x.kind))).toEqual(new Set(['data', 'api']));
    expect(resources.some((x) => x.contains_personal_data)).toBe(true);
    expect(agents.flatMap((a) => a.identities).length).toBeGreaterThanOrEqual(10);
    expect(agents.flatMap((a) => a.delegations).length).toBeGreaterThanOrEqual(3);

    // Varied where the risk views look.
    for (const field of ['environment', 'data_classification', 'internet_exposure', 'code_execution', 'persistent_memory', 'human_approval_coverage'] as const) {
      expect(new Set(agents.map((a) => a[field])).size, field).toBeGreaterThanOrEqual(3);
    }
    // A few production agents state no owner: the owner-attestation finding has something to say.
    const unowned = agents.filter((a) => a.environment === 'production' && !a.owner_email);
    expect(unowned.length).toBeGreaterThanOrEqual(3);
    expect(unowned.length).toBeLessThanOrEqual(6);
  });

  it('refer only to what exists: models of the vendor mocks, tools of the MCP mock or the built-in samples, resources of the mocks', async () => {
    const r = await all();
    const models = new Set(Object.values(r).flatMap((x) => x.models.map((m) => `${m.provider}/${m.model_name}`)));
    const tools = new Set([...r.mcp!.mcp_servers.flatMap((s) => s.tools.map((t) => t.tool_key)), ...SAMPLE_TOOLS.map((t) => t.tool_key)]);
    const resources = new Set(Object.values(r).flatMap((x) => x.resources.map((res) => res.name)));
    for (const a of Object.values(r).flatMap((x) => x.agents)) {
      if (a.model) expect(models, a.name).toContain(a.model);
      for (const key of a.tool_grants) expect(tools, a.name).toContain(key);
      for (const name of a.resource_grants) expect(resources, a.name).toContain(name);
    }
    for (const t of r.mcp!.mcp_servers.flatMap((s) => s.tools)) if (t.resource) expect(resources).toContain(t.resource);
    // The code host's grants land even when the MCP mock has not run: it brings the resources it grants.
    const own = new Set(r.code_host!.resources.map((x) => x.name));
    for (const name of r.code_host!.agents.flatMap((a) => a.resource_grants)) expect(own).toContain(name);
  });
});

describe('the mock MCP servers', () => {
  it('look like MCP discovery: <tool_prefix>.<name> keys, one prefix per server, no class claimed', async () => {
    const { mcp_servers } = await discover(adapterFor('mcp', 'mock')!);
    for (const s of mcp_servers) {
      const prefixes = new Set(s.tools.map((t) => t.tool_key.slice(0, t.tool_key.length - t.name.length - 1)));
      expect(prefixes.size, s.name).toBe(1);
      for (const t of s.tools) {
        expect(t.tool_key).toBe(`${[...prefixes][0]}.${t.name}`);
        expect(t.privilege_class).toBeNull();
      }
    }
    expect(mcp_servers.filter((s) => s.trust_state === 'unsigned').map((s) => s.name)).toEqual(['Notes Helper (community)']);
  });

  it('carry financial, destructive, admin and read tools, classified so by the service', async () => {
    const tools = (await discover(adapterFor('mcp', 'mock')!)).mcp_servers.flatMap((s) => s.tools);
    const classOf = (key: string) => {
      const t = tools.find((x) => x.tool_key === key);
      expect(t, key).toBeDefined();
      return classifyTool({ name: t!.name, title: t!.title, description: t!.description, input_schema: t!.input_schema }).privilege_class;
    };
    expect(classOf('payments.transfer_funds')).toBe('financial');
    expect(classOf('files.delete_tree')).toBe('destructive');
    expect(classOf('db.drop_table')).toBe('destructive');
    expect(classOf('iam.grant_role')).toBe('admin');
    expect(classOf('files.read_file')).toBe('read');
    expect(classOf('payments.list_transactions')).toBe('read');
  });

  it('hold exactly one tool that lies about being read-only and exactly one poisoned tool', async () => {
    const tools = (await discover(adapterFor('mcp', 'mock')!)).mcp_servers.flatMap((s) => s.tools);
    const mismatched = tools.filter((t) => readOnlyMismatch(t.read_only_hint, classifyTool({ name: t.name, title: t.title, description: t.description }).privilege_class));
    expect(mismatched.map((t) => t.tool_key)).toEqual([READ_ONLY_MISMATCH_TOOL_KEY]);
    expect(mismatched[0]!.read_only_hint).toBe(true);
    expect(mismatched[0]!.description).toMatch(/deletes/i);

    const poisoned = tools.filter((t) => detectPoisoning({ name: t.name, title: t.title, description: t.description, input_schema: t.input_schema }).length > 0);
    expect(poisoned.map((t) => t.tool_key)).toEqual([POISONED_TOOL_KEY]);
    expect(poisoned[0]!.description).toMatch(/<IMPORTANT>[\s\S]*~\/\.ssh\/id_rsa[\s\S]*<\/IMPORTANT>/);
  });
});

describe('the adapter catalogue', () => {
  it('has one live and one mock adapter per discovery kind, with unique keys, and none for webhook', () => {
    expect(new Set(ADAPTERS.map((a) => a.key)).size).toBe(ADAPTERS.length);
    expect(ADAPTERS).toHaveLength(DISCOVERY_KIND.length * 2);
    for (const kind of DISCOVERY_KIND) {
      expect(adapterFor(kind, 'live')).toMatchObject({ key: kind, kind, mode: 'live' });
      expect(adapterFor(kind, 'mock')).toMatchObject({ key: `mock.${kind}`, kind, mode: 'mock' });
    }
    expect(adapterFor('webhook', 'live')).toBeUndefined();
    expect(adapterFor('webhook', 'mock')).toBeUndefined();
    expect(adapterFor('mcp', 'replay')).toBeUndefined();
  });

  it('lists every adapter in the API\'s shape, with the spec\'s statuses', () => {
    const entries = catalogue();
    expect(entries.map((e) => e.key)).toEqual(ADAPTERS.map((a) => a.key));
    for (const e of entries) expect(catalogueEntryOut.parse(e)).toEqual(e);
    const live = Object.fromEntries(entries.filter((e) => e.mode === 'live').map((e) => [e.kind, e]));
    expect(live.model_vendor_a).toMatchObject({ status: 'Preview', needs_secret: true, config_keys: expect.arrayContaining(['environment']) });
    expect(live.model_vendor_b).toMatchObject({ status: 'Preview', needs_secret: true, config_keys: expect.arrayContaining(['base_url']) });
    expect(live.mcp).toMatchObject({ status: 'Beta', config_keys: expect.arrayContaining(['endpoint', 'name', 'tool_prefix']) });
    expect(live.directory).toMatchObject({ status: 'Preview', needs_secret: true, config_keys: expect.arrayContaining(['directory_tenant_id', 'client_id', 'agent_tag']) });
    expect(live.code_host).toMatchObject({ status: 'Preview', needs_secret: true, config_keys: expect.arrayContaining(['organisation']) });
    for (const e of entries.filter((x) => x.mode === 'mock')) expect(e).toMatchObject({ status: 'GA', needs_secret: false });
  });
});
