import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeId } from '../../api/modules/graph/index.js';
import { addMember, api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

/**
 * The Agent Security Graph through the API on real PostgreSQL: a registry built through the API, then the
 * exact nodes and edges it projects to, every traversal, every high-risk pattern, export as JSON and CSV, reads
 * at two points in time, rebuild (idempotent, and repairing a graph that drifted), two API processes on one
 * database, isolation between organisations, permissions and validation.
 */

type Node = { id: string; kind: string; key: string; label: string; risk_level: string; source_record: { table: string; id: string }; attributes: Record<string, unknown>; valid_from: string; valid_to: string | null };
type Edge = { id: string; kind: string; from: string; to: string; source_record: { table: string; id: string }; attributes: Record<string, unknown>; expires_at: string | null };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ok(client: Client, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: Record<string, unknown>) {
  const res = await client.request(method, api(url), body);
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res.statusCode === 204 ? undefined : res.json();
}

/** Parses RFC 4180 CSV (quoted cells, doubled quotes, CRLF), after the byte-order mark. */
function parseCsv(text: string): string[][] {
  expect(text.startsWith('\uFEFF')).toBe(true);
  const s = text.slice(1);
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quoted) {
      if (c === '"' && s[i + 1] === '"') (cell += '"'), i++;
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(cell), (cell = '');
    else if (c === '\r' && s[i + 1] === '\n') row.push(cell), rows.push(row), (row = []), (cell = ''), i++;
    else cell += c;
  }
  expect(cell).toBe('');
  return rows;
}

describe('the Agent Security Graph', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;
  let org: string;
  /** Node ids, by a short name. */
  type Named = 'care' | 'ops' | 'untrusted' | 'approved' | 'patients' | 'payroll' | 'marketing' | 'paymentsApi' | 'sharedCred' | 'billingCred' | 'gpt' | 'update' | 'read' | 'pay' | 'wipe' | 'alice' | 'bob' | 'identity';
  type IdName = Named | 'bobDelegation' | 'careIdentity' | 'careUpdate' | 'carePay' | 'carePayroll' | 'opsRead' | 'opsServer' | 'theirs' | 'gpt';
  const id = {} as Record<IdName, string>;
  const n = {} as Record<Named, string>;

  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app, 'Graph Org');
    other = await onboardAdmin(t.app, 'Other Graph Org');
    org = admin.tenant.id;
    await setPlan(t, org, 'enterprise');
    const c = admin.client;

    id.untrusted = (await ok(c, 'POST', '/mcp-servers', { name: '@untrusted server', endpoint: 'https://mcp.example.com/untrusted' })).id;
    id.approved = (await ok(c, 'POST', '/mcp-servers', { name: 'Approved server', endpoint: 'https://mcp.example.com/approved' })).id;
    await ok(c, 'PATCH', `/mcp-servers/${id.approved}`, { trust_state: 'approved', reason: 'publisher reviewed' });
    id.patients = (await ok(c, 'POST', '/resources/data', { name: 'Patient Records, "EU"', system: 'ehr', classification: 'regulated', contains_personal_data: true })).id;
    id.payroll = (await ok(c, 'POST', '/resources/data', { name: 'Payroll', system: 'hr', classification: 'restricted' })).id;
    id.marketing = (await ok(c, 'POST', '/resources/data', { name: 'Marketing lists', system: 'crm', classification: 'internal' })).id;
    id.paymentsApi = (await ok(c, 'POST', '/resources/apis', { name: 'Payments API', system: 'bank', base_url: 'https://bank.example.com/api', criticality: 'high' })).id;
    id.sharedCred = (await ok(c, 'POST', '/resources/credentials', { name: 'shared-db', provider: 'vault', secret_path: 'kv/db/shared', shared: true, rotation_interval_days: 30 })).id;
    id.billingCred = (await ok(c, 'POST', '/resources/credentials', { name: 'billing-key', provider: 'vault', secret_path: 'kv/billing', rotation_interval_days: 30 })).id;
    id.gpt = (await ok(c, 'POST', '/models', { provider: 'acme', model_name: 'gpt-x' })).id;
    id.update = (await ok(c, 'POST', '/tools', {
      tool_key: 'records.update', name: 'Update records', mcp_server_id: id.untrusted, data_resource_id: id.patients, privilege_class: 'write', credential_ref_id: id.sharedCred,
    })).id;
    id.read = (await ok(c, 'POST', '/tools', {
      tool_key: 'records.read', name: 'Read lists', mcp_server_id: id.approved, data_resource_id: id.marketing, privilege_class: 'read', credential_ref_id: id.sharedCred,
    })).id;
    id.pay = (await ok(c, 'POST', '/tools', {
      tool_key: 'bank.pay', name: 'Pay', api_resource_id: id.paymentsApi, privilege_class: 'financial', credential_ref_id: id.billingCred,
    })).id;
    id.wipe = (await ok(c, 'POST', '/tools', { tool_key: 'admin.wipe', name: '=WIPE()', mcp_server_id: id.approved, privilege_class: 'destructive' })).id;
    await ok(c, 'POST', `/tools/${id.wipe}/block`, { reason: 'never', confirm: true, blocked: true });

    const care = await ok(c, 'POST', '/agents', {
      name: 'Care bot', internet_exposure: 'public', human_approval_coverage: 'none', criticality: 'high',
      owners: [{ name: 'Alice', email: 'Alice@example.com', owner_type: 'accountable' }],
    });
    id.care = care.id;
    await ok(c, 'POST', `/agents/${id.care}/versions`, { version_label: 'v2', model_id: id.gpt });
    id.bobDelegation = (await ok(c, 'POST', `/agents/${id.care}/delegations`, {
      principal_ref: 'user:bob', display_name: 'Bob', principal_type: 'user', scopes: ['records:write'], expires_at: new Date(Date.now() + 3600_000).toISOString(),
    })).id;
    id.careIdentity = (await ok(c, 'POST', `/agents/${id.care}/identities`)).id;
    id.careUpdate = (await ok(c, 'POST', `/agents/${id.care}/permissions`, { target_kind: 'tool', target_id: id.update, actions: ['invoke'] })).id;
    id.carePay = (await ok(c, 'POST', `/agents/${id.care}/permissions`, { target_kind: 'tool', target_id: id.pay, actions: ['invoke'] })).id;
    id.carePayroll = (await ok(c, 'POST', `/agents/${id.care}/permissions`, { target_kind: 'data_resource', target_id: id.payroll, actions: ['read'] })).id;

    const ops = await ok(c, 'POST', '/agents', { name: 'Ops bot', human_approval_coverage: 'strong', owners: [{ name: 'Alice A.', email: 'alice@example.com', owner_type: 'technical' }] });
    id.ops = ops.id;
    id.opsRead = (await ok(c, 'POST', `/agents/${id.ops}/permissions`, { target_kind: 'tool', target_id: id.read, actions: ['invoke'] })).id;
    id.opsServer = (await ok(c, 'POST', `/agents/${id.ops}/permissions`, { target_kind: 'mcp_server', target_id: id.approved, actions: ['invoke'] })).id;

    id.theirs = (await ok(other.client, 'POST', '/agents', { name: 'Their bot' })).id;

    const node = (kind: Parameters<typeof nodeId>[1], key: string) => nodeId(org, kind, key);
    Object.assign(n, {
      care: node('agent', id.care), ops: node('agent', id.ops), untrusted: node('mcp_server', id.untrusted), approved: node('mcp_server', id.approved),
      patients: node('data_resource', id.patients), payroll: node('data_resource', id.payroll), marketing: node('data_resource', id.marketing),
      paymentsApi: node('api_resource', id.paymentsApi), sharedCred: node('credential_ref', id.sharedCred), billingCred: node('credential_ref', id.billingCred),
      gpt: node('model', id.gpt), update: node('tool', id.update), read: node('tool', id.read), pay: node('tool', id.pay), wipe: node('tool', id.wipe),
      alice: node('owner', 'alice@example.com'), bob: node('delegation_principal', 'user:bob'), identity: node('workload_identity', id.careIdentity),
    });
  }, 60_000);
  afterAll(async () => t?.close());

  const graph = async (client: Client = admin.client, query = '') => (await ok(client, 'GET', `/graph${query}`)) as { nodes: Node[]; edges: Edge[]; total_nodes: number; truncated: boolean; version: string; at: string | null };
  const name = (g: { nodes: Node[] }) => {
    const labels = new Map(g.nodes.map((x) => [x.id, x.label]));
    return (e: Edge) => `${e.kind} ${labels.get(e.from)} -> ${labels.get(e.to)}`;
  };

  it('projects the registry into nodes of every kind, each with its source record and risk level', async () => {
    const g = await graph();
    const byId = new Map(g.nodes.map((x) => [x.id, x]));
    expect(g.nodes.filter((x) => x.kind === 'agent').map((x) => x.label).sort()).toEqual(['Care bot', 'Ops bot']);
    expect(byId.get(n.care)).toMatchObject({ kind: 'agent', key: id.care, risk_level: 'high', source_record: { table: 'agents', id: id.care }, attributes: { internet_exposure: 'public', risk_source: 'criticality' }, valid_to: null });
    expect(byId.get(n.ops)).toMatchObject({ risk_level: 'medium' });
    expect(byId.get(n.untrusted)).toMatchObject({ kind: 'mcp_server', risk_level: 'medium', attributes: { trust_state: 'unknown' } });
    expect(byId.get(n.approved)).toMatchObject({ risk_level: 'low', attributes: { trust_state: 'approved' } });
    // A write tool on a server that is not approved is raised a level; a destructive one on an approved server is high.
    expect(byId.get(n.update)).toMatchObject({ kind: 'tool', risk_level: 'high', source_record: { table: 'tools', id: id.update }, attributes: { tool_key: 'records.update', privilege_class: 'write', mcp_trust_state: 'unknown' } });
    expect(byId.get(n.read)).toMatchObject({ risk_level: 'low' });
    expect(byId.get(n.pay)).toMatchObject({ risk_level: 'high' });
    expect(byId.get(n.wipe)).toMatchObject({ risk_level: 'high', attributes: { blocked: true } });
    expect(byId.get(n.patients)).toMatchObject({ kind: 'data_resource', risk_level: 'high', attributes: { classification: 'regulated' } });
    expect(byId.get(n.payroll)).toMatchObject({ risk_level: 'critical' });
    expect(byId.get(n.marketing)).toMatchObject({ risk_level: 'low' });
    expect(byId.get(n.paymentsApi)).toMatchObject({ kind: 'api_resource', risk_level: 'high' });
    expect(byId.get(n.sharedCred)).toMatchObject({ kind: 'credential_ref', risk_level: 'medium', attributes: { shared: true } });
    expect(byId.get(n.sharedCred)!.attributes).not.toHaveProperty('secret_path');
    expect(byId.get(n.billingCred)).toMatchObject({ risk_level: 'low' });
    expect(byId.get(n.gpt)).toMatchObject({ kind: 'model', label: 'acme/gpt-x', risk_level: 'medium', attributes: { approved: false } });
    expect(byId.get(n.bob)).toMatchObject({ kind: 'delegation_principal', key: 'user:bob', label: 'Bob', source_record: { table: 'delegations', id: id.bobDelegation } });
    expect(byId.get(n.identity)).toMatchObject({ kind: 'workload_identity', risk_level: 'low', source_record: { table: 'workload_identities', id: id.careIdentity }, attributes: { origin: 'tollgate' } });
    // One owner node per person (email in any case), named after the oldest row.
    expect(g.nodes.filter((x) => x.kind === 'owner')).toHaveLength(1);
    expect(byId.get(n.alice)).toMatchObject({ kind: 'owner', key: 'alice@example.com', source_record: { table: 'agent_owners' } });
    // The four sample tools every organisation starts with.
    expect(g.nodes.filter((x) => x.kind === 'tool')).toHaveLength(8);
    expect(g.nodes).toHaveLength(2 + 8 + 2 + 1 + 1 + 3 + 2 + 1 + 1 + 1);
    expect(g.truncated).toBe(false);
  });

  it('projects exactly the edges the registry implies, each naming its source record', async () => {
    const g = await graph();
    expect(g.edges.map(name(g)).sort()).toEqual(
      [
        'acts_for Care bot -> Bob',
        'has_identity Care bot -> ' + g.nodes.find((x) => x.id === n.identity)!.label,
        'hosted_on =WIPE() -> Approved server',
        'hosted_on Read lists -> Approved server',
        'hosted_on Update records -> @untrusted server',
        'owned_by Care bot -> Alice',
        'owned_by Ops bot -> Alice',
        'reads_resource Care bot -> Payroll',
        'reads_resource Read lists -> Marketing lists',
        'runs_model Care bot -> acme/gpt-x',
        'uses_credential Pay -> billing-key',
        'uses_credential Read lists -> shared-db',
        'uses_credential Update records -> shared-db',
        'uses_server Ops bot -> Approved server',
        'uses_tool Care bot -> Pay',
        'uses_tool Care bot -> Update records',
        'uses_tool Ops bot -> Read lists',
        'writes_resource Pay -> Payments API',
        'writes_resource Update records -> Patient Records, "EU"',
      ].sort(),
    );
    const bySource = (table: string, sourceId: string) => g.edges.filter((e) => e.source_record.table === table && e.source_record.id === sourceId).map((e) => e.kind);
    expect(bySource('permission_bindings', id.careUpdate)).toEqual(['uses_tool']);
    expect(bySource('permission_bindings', id.opsServer)).toEqual(['uses_server']);
    expect(bySource('permission_bindings', id.carePayroll)).toEqual(['reads_resource']);
    expect(bySource('tools', id.update).sort()).toEqual(['hosted_on', 'uses_credential', 'writes_resource']);
    expect(bySource('delegations', id.bobDelegation)).toEqual(['acts_for']);
    const actsFor = g.edges.find((e) => e.kind === 'acts_for')!;
    expect(actsFor.expires_at).not.toBeNull();
    expect(actsFor.attributes).toMatchObject({ scopes: ['records:write'], principal_type: 'user' });
    expect(g.edges.find((e) => e.kind === 'runs_model')!.source_record.table).toBe('agent_versions');
  });

  it('filters by kinds, risk levels and text, and limits', async () => {
    const tools = await graph(admin.client, '?kinds=tool,mcp_server&risk_levels=high,critical');
    expect(tools.nodes.map((x) => x.attributes.tool_key).sort()).toEqual(['admin.wipe', 'bank.pay', 'payments.create_payment', 'records.update', 'storage.delete_object']);
    expect(tools.nodes.every((x) => ['tool', 'mcp_server'].includes(x.kind) && ['high', 'critical'].includes(x.risk_level))).toBe(true);
    // Edges between the nodes answered only.
    expect(tools.edges).toEqual([]);
    const q = await graph(admin.client, '?q=RECORDS');
    expect(q.nodes.map((x) => x.label).sort()).toEqual(['Patient Records, "EU"', 'Update records']);
    expect(q.edges.map(name(q))).toEqual(['writes_resource Update records -> Patient Records, "EU"']);
    const limited = await graph(admin.client, '?kinds=agent&limit=1');
    expect(limited).toMatchObject({ total_nodes: 2, truncated: true });
    expect(limited.nodes.map((x) => x.label)).toEqual(['Care bot']);
  });

  it('answers one node with its degree, and 404 for a node of another organisation or of none', async () => {
    const res = await ok(admin.client, 'GET', `/graph/nodes/${n.sharedCred}`);
    expect(res.node).toMatchObject({ id: n.sharedCred, label: 'shared-db' });
    expect(res.degree).toEqual({ in: { uses_credential: 2 }, out: {} });
    const theirs = nodeId(other.tenant.id, 'agent', id.theirs);
    expect((await ok(other.client, 'GET', `/graph/nodes/${theirs}`)).node.label).toBe('Their bot');
    expect((await admin.client.get(api(`/graph/nodes/${theirs}`))).json().error.code).toBe('not_found');
    expect((await other.client.get(api(`/graph/nodes/${n.care}`))).statusCode).toBe(404);
    expect((await other.client.get(api(`/graph/agents/${id.care}`))).statusCode).toBe(404);
    expect((await other.client.get(api(`/graph/nodes/${n.care}/access`))).statusCode).toBe(404);
    expect((await other.client.get(api(`/graph/nodes/${n.care}/blast-radius`))).statusCode).toBe(404);
    expect((await other.client.get(api(`/graph/nodes/${n.care}/neighbours`))).statusCode).toBe(404);
    expect((await other.client.get(api(`/graph/path?source=${theirs}&target=${n.care}`))).statusCode).toBe(404);
    const theirGraph = await graph(other.client);
    expect(theirGraph.nodes.map((x) => x.id)).not.toContain(n.care);
    expect(theirGraph.nodes.filter((x) => x.kind === 'agent').map((x) => x.label)).toEqual(['Their bot']);
  });

  it('answers neighbours to a depth, either direction', async () => {
    const one = await ok(admin.client, 'GET', `/graph/nodes/${n.update}/neighbours`);
    expect(one.depth).toBe(1);
    const at1 = new Map<string, number>(one.nodes.map((x: Node & { depth: number }) => [x.id, x.depth]));
    expect(new Set(at1.keys())).toEqual(new Set([n.update, n.care, n.untrusted, n.patients, n.sharedCred]));
    expect(at1.get(n.update)).toBe(0);
    expect(one.edges).toHaveLength(4);
    const two = await ok(admin.client, 'GET', `/graph/nodes/${n.update}/neighbours?depth=2`);
    const at2 = new Map<string, number>(two.nodes.map((x: Node & { depth: number }) => [x.id, x.depth]));
    for (const x of [n.pay, n.payroll, n.gpt, n.bob, n.alice, n.identity, n.read]) expect(at2.get(x)).toBe(2);
    expect(at2.has(n.ops)).toBe(false);
    expect(two.truncated).toBe(false);
  });

  it('finds shortest paths, directed or not', async () => {
    const directed = await ok(admin.client, 'GET', `/graph/path?source=${n.care}&target=${n.patients}&directed=true`);
    expect(directed).toMatchObject({ found: true, length: 2, directed: true });
    expect(directed.nodes.map((x: Node) => x.id)).toEqual([n.care, n.update, n.patients]);
    expect(directed.edges.map((e: Edge) => e.kind)).toEqual(['uses_tool', 'writes_resource']);
    const backwards = await ok(admin.client, 'GET', `/graph/path?source=${n.patients}&target=${n.care}&directed=true`);
    expect(backwards).toMatchObject({ found: false, length: null, nodes: [], edges: [] });
    const undirected = await ok(admin.client, 'GET', `/graph/path?source=${n.patients}&target=${n.care}`);
    expect(undirected).toMatchObject({ found: true, length: 2, directed: false });
    expect(undirected.nodes.map((x: Node) => x.id)).toEqual([n.patients, n.update, n.care]);
    const far = await ok(admin.client, 'GET', `/graph/path?source=${n.ops}&target=${n.patients}`);
    expect(far.length).toBe(4);
    // Each edge joins the nodes it stands between.
    far.edges.forEach((e: Edge, i: number) => expect([e.from, e.to].sort()).toEqual([far.nodes[i].id, far.nodes[i + 1].id].sort()));
    expect((await ok(admin.client, 'GET', `/graph/path?source=${n.care}&target=${n.care}`)).length).toBe(0);
  });

  it('answers transitive access: tools, their servers, resources and credentials, model, principals, identities', async () => {
    const care = await ok(admin.client, 'GET', `/graph/nodes/${n.care}/access`);
    const reach = new Map<string, { depth: number; via: string[]; access: string[]; path: string[] }>(care.reachable.map((r: { id: string }) => [r.id, r]));
    expect(new Set(reach.keys())).toEqual(new Set([n.update, n.pay, n.payroll, n.gpt, n.bob, n.identity, n.untrusted, n.patients, n.sharedCred, n.paymentsApi, n.billingCred]));
    expect(reach.get(n.patients)).toMatchObject({ depth: 2, via: ['writes_resource'], access: ['write'], path: [n.care, n.update, n.patients] });
    expect(reach.get(n.payroll)).toMatchObject({ depth: 1, access: ['read'] });
    expect(reach.get(n.untrusted)).toMatchObject({ via: ['hosted_on'] });
    expect(care.counts_by_kind).toEqual({ tool: 2, data_resource: 2, api_resource: 1, credential_ref: 2, mcp_server: 1, model: 1, delegation_principal: 1, workload_identity: 1 });
    expect(care).toMatchObject({ total: 11, truncated: false, most_sensitive_classification: 'restricted', node: { id: n.care, kind: 'agent' } });

    // A binding on a server opens its tools, but not a blocked one.
    const ops = await ok(admin.client, 'GET', `/graph/nodes/${n.ops}/access`);
    const opsReach = new Map<string, { via: string[] }>(ops.reachable.map((r: { id: string }) => [r.id, r]));
    expect(new Set(opsReach.keys())).toEqual(new Set([n.approved, n.read, n.marketing, n.sharedCred]));
    expect(opsReach.get(n.read)!.via).toEqual(['uses_tool', 'uses_server']);
    expect(ops.most_sensitive_classification).toBe('internal');
  });

  it('answers the blast radius of a compromised node', async () => {
    const server = await ok(admin.client, 'GET', `/graph/nodes/${n.untrusted}/blast-radius`);
    const hit = new Map<string, { impact: string; depth: number; parent: string }>(server.affected.map((r: { id: string }) => [r.id, r]));
    // The server controls its tool, the tool's answers steer the agent that calls it, and what they reach follows.
    expect(hit.get(n.update)).toMatchObject({ impact: 'control', depth: 1 });
    expect(hit.get(n.care)).toMatchObject({ impact: 'control', depth: 2, parent: n.update });
    expect(hit.get(n.update)!.parent).toBe(n.untrusted);
    expect(hit.get(n.sharedCred)).toMatchObject({ impact: 'control' });
    expect(hit.get(n.read)).toMatchObject({ impact: 'reach' });
    for (const x of [n.patients, n.payroll, n.pay, n.paymentsApi, n.marketing, n.bob, n.identity]) expect(hit.has(x)).toBe(true);
    expect(hit.has(n.ops)).toBe(false);
    expect(hit.has(n.alice)).toBe(false);
    expect(server).toMatchObject({ controlled_agents: 1, most_sensitive_classification: 'restricted' });
    expect(server.sensitive_data.map((x: Node) => x.id).sort()).toEqual([n.patients, n.payroll].sort());
    expect(server.counts_by_kind.agent).toBe(1);

    const cred = await ok(admin.client, 'GET', `/graph/nodes/${n.sharedCred}/blast-radius`);
    expect(new Set(cred.affected.map((r: { id: string }) => r.id))).toEqual(new Set([n.update, n.read, n.patients, n.marketing]));
    expect(cred.affected.every((r: { impact: string }) => r.impact === 'reach')).toBe(true);
    expect(cred).toMatchObject({ controlled_agents: 0, most_sensitive_classification: 'regulated', total: 4 });

    const owner = await ok(admin.client, 'GET', `/graph/nodes/${n.alice}/blast-radius`);
    expect(owner).toMatchObject({ total: 0, affected: [], most_sensitive_classification: null });
  });

  it('finds every high-risk pattern', async () => {
    const res = await ok(admin.client, 'GET', '/graph/high-risk-paths');
    const byKey = Object.fromEntries(res.patterns.map((p: { key: string }) => [p.key, p]));
    expect(Object.keys(byKey).sort()).toEqual(
      ['exposed_agent_shared_credential', 'unapproved_model_sensitive_data', 'unsupervised_high_impact_tool', 'untrusted_server_privileged_tool_sensitive_data'].sort(),
    );
    const ids = (m: { nodes: Node[] }) => m.nodes.map((x) => x.id);
    const p1 = byKey.untrusted_server_privileged_tool_sensitive_data;
    expect(p1).toMatchObject({ severity: 'critical', count: 1, truncated: false });
    expect(ids(p1.matches[0])).toEqual([n.care, n.update, n.untrusted, n.patients]);
    expect(p1.matches[0].edges.map((e: Edge) => e.kind)).toEqual(['uses_tool', 'hosted_on', 'writes_resource']);
    const p2 = byKey.exposed_agent_shared_credential;
    expect(p2.count).toBe(1);
    expect(ids(p2.matches[0])).toEqual([n.care, n.update, n.sharedCred, n.read]);
    expect(p2.matches[0].summary).toContain('Read lists');
    const p3 = byKey.unapproved_model_sensitive_data;
    expect(p3.count).toBe(1);
    expect(ids(p3.matches[0])).toEqual([n.care, n.gpt, n.payroll, n.patients]);
    const p4 = byKey.unsupervised_high_impact_tool;
    expect(p4.count).toBe(1);
    expect(ids(p4.matches[0])).toEqual([n.care, n.pay]);
  });

  it("answers an agent's subgraph by its registry id", async () => {
    const res = await ok(admin.client, 'GET', `/graph/agents/${id.care}`);
    expect(res.agent.id).toBe(n.care);
    expect(res.nodes[0].id).toBe(n.care);
    expect(new Set(res.nodes.map((x: Node) => x.id))).toEqual(
      new Set([n.care, n.update, n.pay, n.payroll, n.gpt, n.bob, n.identity, n.untrusted, n.patients, n.sharedCred, n.paymentsApi, n.billingCred, n.alice]),
    );
    expect(res.edges.map((e: Edge) => e.kind)).not.toContain('uses_server');
    expect(res.edges).toHaveLength(12);
    expect((await admin.client.get(api(`/graph/agents/${id.theirs}`))).statusCode).toBe(404);
  });

  it('exports nodes and edges as JSON and as CSV a spreadsheet opens safely', async () => {
    const json = await admin.client.get(api('/graph/export?part=edges'));
    expect(json.headers['content-type']).toMatch(/^application\/json/);
    expect(json.json()).toMatchObject({ part: 'edges', at: null });
    expect(json.json().items).toHaveLength(19);

    const csv = await admin.client.get(api('/graph/export?format=csv&part=nodes'));
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(csv.headers['content-disposition']).toBe('attachment; filename="graph-nodes.csv"');
    const rows = parseCsv(csv.body);
    expect(rows[0]).toEqual(['id', 'kind', 'key', 'label', 'risk_level', 'source_table', 'source_id', 'valid_from', 'valid_to', 'attributes']);
    expect(rows).toHaveLength(1 + 22);
    const label = (nodeIdent: string) => rows.find((r) => r[0] === nodeIdent)![3];
    // Formula injection neutralised; commas and quotes survive the quoting.
    expect(label(n.wipe)).toBe("'=WIPE()");
    expect(label(n.untrusted)).toBe("'@untrusted server");
    expect(label(n.patients)).toBe('Patient Records, "EU"');
    expect(JSON.parse(rows.find((r) => r[0] === n.care)![9]!)).toMatchObject({ internet_exposure: 'public' });

    const edges = parseCsv((await admin.client.get(api('/graph/export?format=csv&part=edges'))).body);
    expect(edges[0]).toEqual(['id', 'kind', 'from', 'from_kind', 'from_label', 'to', 'to_kind', 'to_label', 'source_table', 'source_id', 'expires_at', 'valid_from', 'valid_to', 'attributes']);
    expect(edges).toHaveLength(1 + 19);
    expect(edges.find((r) => r[1] === 'hosted_on' && r[2] === n.wipe)![4]).toBe("'=WIPE()");

    const viewer = await addMember(t.app, admin.client, ['viewer']);
    expect((await viewer.client.get(api('/graph/export'))).json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'graph:export' } });
  });

  it('answers 422 for bad input and 403 without the permission', async () => {
    expectValidation(await admin.client.get(api('/graph/nodes/not-a-uuid')), 'path.node_id');
    expectValidation(await admin.client.get(api(`/graph/nodes/${n.care}/neighbours?depth=0`)), 'query.depth');
    expectValidation(await admin.client.get(api(`/graph/nodes/${n.care}/neighbours?depth=6`)), 'query.depth');
    expectValidation(await admin.client.get(api('/graph?kinds=agent,spaceship')), 'query.kinds');
    expectValidation(await admin.client.get(api('/graph?risk_levels=severe')), 'query.risk_levels');
    expectValidation(await admin.client.get(api('/graph?limit=0')), 'query.limit');
    expectValidation(await admin.client.get(api('/graph?at=yesterday')), 'query.at');
    expectValidation(await admin.client.get(api('/graph/high-risk-paths?at=0001-01-01T00:00:00Z')), 'query.at');
    expectValidation(await admin.client.get(api(`/graph/path?source=${n.care}`)), 'query.target');
    expectValidation(await admin.client.get(api(`/graph/path?source=${n.care}&target=${n.ops}&directed=maybe`)), 'query.directed');
    expectValidation(await admin.client.get(api('/graph/export?format=xlsx')), 'query.format');
    expectValidation(await admin.client.get(api(`/graph/agents/${n.care.slice(0, 8)}`)), 'path.agent_id');
    const missing = await admin.client.get(api(`/graph/path?source=${n.care}&target=${nodeId(org, 'tool', id.care)}`));
    expect(missing.json().error).toMatchObject({ code: 'not_found' });

    const approver = await addMember(t.app, admin.client, ['approver']);
    for (const url of ['/graph', `/graph/nodes/${n.care}`, `/graph/nodes/${n.care}/access`, '/graph/high-risk-paths', `/graph/agents/${id.care}`]) {
      expect((await approver.client.get(api(url))).json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'graph:read' } });
    }
    const auditor = await addMember(t.app, admin.client, ['auditor']);
    expect((await auditor.client.get(api('/graph/export?format=csv'))).statusCode).toBe(200);
    expect((await auditor.client.post(api('/graph/rebuild'))).json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'risk:configure' } });
  });

  it('answers the graph as it was at an earlier time, after the registry changed', async () => {
    await graph();
    await sleep(20);
    const before = new Date().toISOString();
    await sleep(20);
    await ok(admin.client, 'PATCH', `/mcp-servers/${id.untrusted}`, { trust_state: 'approved', reason: 'audited the server' });
    await ok(admin.client, 'DELETE', `/agents/${id.care}/permissions/${id.carePay}?reason=not%20needed`);

    const now = await graph();
    expect(now.nodes.find((x) => x.id === n.untrusted)).toMatchObject({ risk_level: 'low', attributes: { trust_state: 'approved' }, valid_to: null });
    expect(now.nodes.find((x) => x.id === n.update)!.risk_level).toBe('medium');
    expect(now.edges.map(name(now))).not.toContain('uses_tool Care bot -> Pay');
    const changedAt = now.nodes.find((x) => x.id === n.untrusted)!.valid_from;
    expect(changedAt > before).toBe(true);

    const then = await graph(admin.client, `?at=${encodeURIComponent(before)}`);
    expect(then.at).toBe(before);
    const server = then.nodes.find((x) => x.id === n.untrusted)!;
    expect(server).toMatchObject({ risk_level: 'medium', attributes: { trust_state: 'unknown' } });
    expect(server.valid_to).toBe(changedAt);
    expect(then.nodes.find((x) => x.id === n.update)!.risk_level).toBe('high');
    expect(then.edges.map(name(then))).toContain('uses_tool Care bot -> Pay');

    // Every read takes `at`: the pattern that needed the untrusted server matched then, not now.
    const patterns = async (q: string) =>
      Object.fromEntries((await ok(admin.client, 'GET', `/graph/high-risk-paths${q}`)).patterns.map((p: { key: string; count: number }) => [p.key, p.count]));
    expect((await patterns(`?at=${encodeURIComponent(before)}`)).untrusted_server_privileged_tool_sensitive_data).toBe(1);
    expect((await patterns('')).untrusted_server_privileged_tool_sensitive_data).toBe(0);
    expect((await patterns('')).unsupervised_high_impact_tool).toBe(0);
    const access = async (q: string) => (await ok(admin.client, 'GET', `/graph/nodes/${n.care}/access${q}`)).reachable.map((r: { id: string }) => r.id);
    expect(await access(`?at=${encodeURIComponent(before)}`)).toContain(n.pay);
    expect(await access('')).not.toContain(n.pay);
    expect((await ok(admin.client, 'GET', `/graph/nodes/${n.care}/neighbours?at=${encodeURIComponent(before)}`)).nodes.map((x: Node) => x.id)).toContain(n.pay);
    expect((await ok(admin.client, 'GET', `/graph/path?source=${n.care}&target=${n.paymentsApi}&directed=true&at=${encodeURIComponent(before)}`)).found).toBe(true);
    expect((await ok(admin.client, 'GET', `/graph/path?source=${n.care}&target=${n.paymentsApi}&directed=true`)).found).toBe(false);
    const exported = await admin.client.get(api(`/graph/export?part=edges&at=${encodeURIComponent(before)}`));
    expect(exported.json().items).toHaveLength(19);

    // Before the organisation existed there was nothing; an expiring delegation counts only until it expires.
    expect((await graph(admin.client, '?at=2000-01-01T00:00:00Z')).nodes).toEqual([]);
    expect((await admin.client.get(api(`/graph/nodes/${n.care}?at=2000-01-01T00:00:00Z`))).statusCode).toBe(404);
    const later = new Date(Date.now() + 2 * 3600_000).toISOString();
    expect((await graph(admin.client, `?at=${encodeURIComponent(later)}`)).edges.map((e) => e.kind)).not.toContain('acts_for');
    expect((await graph()).edges.map((e) => e.kind)).toContain('acts_for');
  });

  it('is current on every API process sharing the database', async () => {
    const second = await startTestApp({ share: t });
    try {
      const session = new Client(second.app);
      for (const [k, v] of admin.client.cookies) session.cookies.set(k, v);
      expect((await graph(session)).nodes.find((x) => x.id === n.bob)).toBeDefined();
      // A change through the first process is on the second's next read.
      await ok(admin.client, 'DELETE', `/agents/${id.care}/delegations/${id.bobDelegation}?reason=done`);
      const after = await graph(session);
      expect(after.edges.map((e) => e.kind)).not.toContain('acts_for');
      expect(after.nodes.find((x) => x.id === n.bob)).toBeUndefined();
      // And a change by SQL, behind both processes' backs, too.
      const owner = new pg.Client({ connectionString: t.ownerUrl });
      await owner.connect();
      try {
        await owner.query(`update tools set blocked = true where id = $1`, [id.update]);
      } finally {
        await owner.end();
      }
      expect((await graph(session)).nodes.find((x) => x.id === n.update)!.attributes.blocked).toBe(true);
      expect((await graph()).nodes.find((x) => x.id === n.update)!.attributes.blocked).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('rebuilds idempotently, repairs a graph that drifted from the registry, and audits it', async () => {
    const owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
    try {
      const rows = async () => (await owner.query(`select (select count(*) from graph_nodes where org_id = $1)::int + (select count(*) from graph_edges where org_id = $1)::int as n`, [org])).rows[0].n;
      const first = await ok(admin.client, 'POST', '/graph/rebuild');
      expect(first.changes).toEqual({ nodes_added: 0, nodes_changed: 0, nodes_removed: 0, edges_added: 0, edges_changed: 0, edges_removed: 0 });
      const count = await rows();
      const second = await ok(admin.client, 'POST', '/graph/rebuild');
      expect(second.changes).toEqual(first.changes);
      expect(second).toMatchObject({ nodes: first.nodes, edges: first.edges, version: first.version });
      expect(second.projection_id).not.toBe(first.projection_id);
      expect(await rows()).toBe(count);

      // A restore that brought back a graph older than the registry: an edge lost, a label wrong.
      await owner.query(`delete from graph_edges where org_id = $1 and kind = 'hosted_on' and valid_to is null and from_id = $2`, [org, n.read]);
      await owner.query(`update graph_nodes set label = 'stale', digest = 'x' where org_id = $1 and id = $2 and valid_to is null`, [org, n.ops]);
      const repaired = await ok(admin.client, 'POST', '/graph/rebuild');
      expect(repaired.changes).toEqual({ nodes_added: 0, nodes_changed: 1, nodes_removed: 0, edges_added: 1, edges_changed: 0, edges_removed: 0 });
      expect((await graph()).nodes.find((x) => x.id === n.ops)!.label).toBe('Ops bot');
      expect((await ok(admin.client, 'POST', '/graph/rebuild')).changes.nodes_changed).toBe(0);
    } finally {
      await owner.end();
    }
    const audit = (await ok(admin.client, 'GET', '/audit?action=graph.rebuilt')).items;
    expect(audit.length).toBe(4);
    expect(audit[0].details).toMatchObject({ changes: { nodes_changed: 0 } });
  });
});
