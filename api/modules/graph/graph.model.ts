import { hash } from 'node:crypto';
import { PRIVILEGED_CLASSES } from '../shared/index.js';
import type { EdgeKind, NodeKind, RiskLevel } from './graph.schemas.js';

/**
 * The projection of the registry into the graph, as a pure function of the registry's rows
 * (docs/risk-and-graph.md, "The graph", has the same tables in words). No I/O: the repository reads the rows,
 * this decides the nodes and edges, the service writes the difference.
 */

/** The registry rows the projection reads (graph.repository.ts selects exactly these columns). */
export interface SourceRows {
  agents: Array<{
    id: string;
    name: string;
    slug: string;
    environment: string;
    status: string;
    criticality: string;
    data_classification: string;
    internet_exposure: string;
    code_execution: string;
    persistent_memory: string;
    human_approval_coverage: string;
    gateway_enforced: boolean;
    risk_band: string | null;
    source: string;
  }>;
  agent_owners: Array<{ id: string; agent_id: string; name: string; email: string; owner_type: string; created_at: string }>;
  /** The latest version of each agent (by created_at, then id). */
  agent_versions: Array<{ id: string; agent_id: string; model_id: string | null }>;
  /** Active identities only: a revoked one authenticates nothing. */
  workload_identities: Array<{ id: string; agent_id: string; client_id: string; status: string }>;
  agent_external_identities: Array<{
    id: string;
    agent_id: string;
    identity_type: string;
    subject: string;
    issuer: string | null;
    authentication_strength: string | null;
  }>;
  delegations: Array<{
    id: string;
    agent_id: string;
    principal_ref: string;
    display_name: string;
    principal_type: string;
    scopes: string[];
    expires_at: string | null;
    created_at: string;
  }>;
  permission_bindings: Array<{
    id: string;
    agent_id: string;
    target_kind: string;
    target_id: string;
    actions: string[];
    delegated: boolean;
    expires_at: string | null;
    identity_id: string | null;
    pinned_definition_hash: string | null;
  }>;
  mcp_servers: Array<{
    id: string;
    name: string;
    endpoint: string;
    transport: string;
    auth_type: string;
    publisher: string | null;
    trust_state: string;
    source: string;
  }>;
  models: Array<{
    id: string;
    provider: string;
    model_name: string;
    model_version: string | null;
    hosting: string;
    data_policy: string;
    approved: boolean;
    max_data_classification: string | null;
  }>;
  resources: Array<{
    id: string;
    resource_type: 'api' | 'data';
    name: string;
    system: string;
    base_url: string | null;
    auth_type: string | null;
    criticality: string | null;
    kind: string | null;
    classification: string | null;
    contains_personal_data: boolean | null;
    region: string | null;
  }>;
  credential_refs: Array<{
    id: string;
    name: string;
    provider: string;
    credential_type: string;
    scope: string;
    shared: boolean;
    rotation_interval_days: number | null;
    status: string;
  }>;
  tools: Array<{
    id: string;
    tool_key: string;
    name: string;
    mcp_server_id: string | null;
    api_resource_id: string | null;
    data_resource_id: string | null;
    privilege_class: string;
    approval_class: string;
    credential_ref_id: string | null;
    blocked: boolean;
    builtin: boolean;
    definition_hash: string | null;
  }>;
}

export interface ProjectedNode {
  id: string;
  kind: NodeKind;
  key: string;
  label: string;
  risk_level: RiskLevel;
  source_table: string;
  source_id: string;
  attributes: Record<string, unknown>;
  digest: string;
}

export interface ProjectedEdge {
  id: string;
  kind: EdgeKind;
  from_id: string;
  to_id: string;
  source_table: string;
  source_id: string;
  attributes: Record<string, unknown>;
  expires_at: string | null;
  digest: string;
}

export interface Projection {
  nodes: ProjectedNode[];
  edges: ProjectedEdge[];
}

// Ids

/** Tollgate's namespace for graph ids (UUID version 5, RFC 9562). */
const NAMESPACE = Buffer.from('8b0f4a52c6e94d0b9e1f3a7c5d2e6f10', 'hex');

/** A name-based UUID (version 5): the same name gives the same id on every process and at every time. */
export function uuidV5(name: string, namespace: Buffer = NAMESPACE): string {
  const h = hash('sha1', Buffer.concat([namespace, Buffer.from(name, 'utf8')]), 'buffer');
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** A node's id: stable per organisation, kind and key. */
export const nodeId = (orgId: string, kind: NodeKind, key: string) => uuidV5(`${orgId}|node|${kind}|${key}`);

const edgeId = (orgId: string, kind: EdgeKind, table: string, sourceId: string, from: string, to: string) =>
  uuidV5(`${orgId}|edge|${kind}|${table}|${sourceId}|${from}|${to}`);

const digestOf = (parts: unknown[]) => hash('sha1', JSON.stringify(parts), 'base64');

// Risk levels (docs/risk-and-graph.md, "Risk levels")

const LEVELS: readonly RiskLevel[] = ['low', 'medium', 'high', 'critical'];
const raise = (level: RiskLevel, by = 1): RiskLevel => LEVELS[Math.min(LEVELS.indexOf(level) + by, LEVELS.length - 1)]!;
const asLevel = (v: string | null | undefined, fallback: RiskLevel): RiskLevel =>
  (LEVELS as readonly string[]).includes(v ?? '') ? (v as RiskLevel) : fallback;

export const isPrivileged = (privilegeClass: string) => (PRIVILEGED_CLASSES as readonly string[]).includes(privilegeClass);

/** The classifications from least to most sensitive (the spec's enumeration order). */
export const CLASSIFICATION_RANK: Record<string, number> = {
  public: 0,
  internal: 1,
  confidential: 2,
  personal: 3,
  regulated: 4,
  restricted: 5,
};

export const RISK_RULES = {
  agent: (a: SourceRows['agents'][number]): RiskLevel => asLevel(a.risk_band, asLevel(a.criticality, 'medium')),
  tool: (t: SourceRows['tools'][number], serverTrust: string | null): RiskLevel => {
    const base: RiskLevel = t.privilege_class === 'read' ? 'low' : t.privilege_class === 'write' ? 'medium' : 'high';
    return serverTrust !== null && serverTrust !== 'approved' ? raise(base) : base;
  },
  mcp_server: (s: SourceRows['mcp_servers'][number]): RiskLevel =>
    s.trust_state === 'approved' ? 'low' : s.trust_state === 'unknown' ? 'medium' : 'high',
  model: (m: SourceRows['models'][number]): RiskLevel => (m.approved ? 'low' : m.data_policy === 'training_allowed' ? 'high' : 'medium'),
  data_resource: (r: SourceRows['resources'][number]): RiskLevel => {
    const rank = CLASSIFICATION_RANK[r.classification ?? 'internal'] ?? 1;
    const level: RiskLevel = rank >= 5 ? 'critical' : rank >= 4 ? 'high' : rank >= 2 ? 'medium' : 'low';
    return level === 'low' && r.contains_personal_data ? 'medium' : level;
  },
  api_resource: (r: SourceRows['resources'][number]): RiskLevel => asLevel(r.criticality, 'medium'),
  credential_ref: (c: SourceRows['credential_refs'][number]): RiskLevel => {
    if (c.status !== 'active') return 'low';
    const unrotated = c.rotation_interval_days === null;
    return c.shared && unrotated ? 'high' : c.shared || unrotated ? 'medium' : 'low';
  },
  external_identity: (i: SourceRows['agent_external_identities'][number]): RiskLevel =>
    i.authentication_strength === 'strong' ? 'low' : i.authentication_strength === 'weak' ? 'high' : 'medium',
  delegation_principal: (type: string, scopes: string[]): RiskLevel =>
    scopes.some((s) => s === '*' || s.endsWith(':*')) ? 'high' : type === 'group' ? 'medium' : 'low',
} as const;

/** Actions of a binding that only read; any other action (invoke, write, delete, …) counts as a write. */
const READ_ACTION = /^(read|get|list|query|select|search|fetch|view|describe|download|lookup|retrieve)([_.:-]|$)/i;

/**
 * The nodes and edges of one organisation's registry. Every node and edge carries the record it comes from;
 * an edge whose other end is not in the registry (a binding to a record that is gone) is left out.
 */
export function project(orgId: string, src: SourceRows): Projection {
  const nodes = new Map<string, ProjectedNode>();
  const edges = new Map<string, ProjectedEdge>();

  const addNode = (kind: NodeKind, key: string, label: string, risk: RiskLevel, table: string, sourceId: string, attributes: Record<string, unknown>) => {
    const id = nodeId(orgId, kind, key);
    nodes.set(id, {
      id,
      kind,
      key,
      label,
      risk_level: risk,
      source_table: table,
      source_id: sourceId,
      attributes,
      digest: digestOf([kind, key, label, risk, table, sourceId, attributes]),
    });
    return id;
  };
  const addEdge = (
    kind: EdgeKind,
    from: string | undefined,
    to: string | undefined,
    table: string,
    sourceId: string,
    attributes: Record<string, unknown>,
    expiresAt: string | null = null,
  ) => {
    if (!from || !to || !nodes.has(from) || !nodes.has(to)) return;
    const id = edgeId(orgId, kind, table, sourceId, from, to);
    const expires = expiresAt ? new Date(expiresAt).toISOString() : null;
    edges.set(id, {
      id,
      kind,
      from_id: from,
      to_id: to,
      source_table: table,
      source_id: sourceId,
      attributes,
      expires_at: expires,
      digest: digestOf([kind, from, to, table, sourceId, attributes, expires]),
    });
  };

  // Nodes of the inventory.
  const serverTrust = new Map<string, string>();
  const servers = new Map<string, string>();
  for (const s of src.mcp_servers) {
    serverTrust.set(s.id, s.trust_state);
    servers.set(
      s.id,
      addNode('mcp_server', s.id, s.name, RISK_RULES.mcp_server(s), 'mcp_servers', s.id, {
        endpoint: s.endpoint,
        transport: s.transport,
        auth_type: s.auth_type,
        publisher: s.publisher,
        trust_state: s.trust_state,
        source: s.source,
      }),
    );
  }
  const models = new Map<string, string>();
  for (const m of src.models) {
    const label = `${m.provider}/${m.model_name}${m.model_version ? `@${m.model_version}` : ''}`;
    models.set(
      m.id,
      addNode('model', m.id, label, RISK_RULES.model(m), 'models', m.id, {
        provider: m.provider,
        model_name: m.model_name,
        model_version: m.model_version,
        hosting: m.hosting,
        data_policy: m.data_policy,
        approved: m.approved,
        max_data_classification: m.max_data_classification,
      }),
    );
  }
  const resources = new Map<string, string>();
  for (const r of src.resources) {
    const id =
      r.resource_type === 'api'
        ? addNode('api_resource', r.id, r.name, RISK_RULES.api_resource(r), 'resources', r.id, {
            system: r.system,
            base_url: r.base_url,
            auth_type: r.auth_type,
            criticality: r.criticality,
          })
        : addNode('data_resource', r.id, r.name, RISK_RULES.data_resource(r), 'resources', r.id, {
            system: r.system,
            kind: r.kind,
            classification: r.classification,
            contains_personal_data: r.contains_personal_data,
            region: r.region,
          });
    resources.set(r.id, id);
  }
  const credentials = new Map<string, string>();
  for (const c of src.credential_refs) {
    credentials.set(
      c.id,
      addNode('credential_ref', c.id, c.name, RISK_RULES.credential_ref(c), 'credential_refs', c.id, {
        provider: c.provider,
        credential_type: c.credential_type,
        scope: c.scope,
        shared: c.shared,
        rotation_interval_days: c.rotation_interval_days,
        status: c.status,
      }),
    );
  }
  const tools = new Map<string, { node: string; definitionHash: string | null }>();
  for (const t of src.tools) {
    const trust = t.mcp_server_id ? (serverTrust.get(t.mcp_server_id) ?? null) : null;
    const node = addNode('tool', t.id, t.name, RISK_RULES.tool(t, trust), 'tools', t.id, {
      tool_key: t.tool_key,
      privilege_class: t.privilege_class,
      approval_class: t.approval_class,
      blocked: t.blocked,
      builtin: t.builtin,
      mcp_trust_state: trust,
    });
    tools.set(t.id, { node, definitionHash: t.definition_hash });
  }
  // Nodes of the agents and of who they act for, are owned by and authenticate as.
  const agents = new Map<string, string>();
  for (const a of src.agents) {
    agents.set(
      a.id,
      addNode('agent', a.id, a.name, RISK_RULES.agent(a), 'agents', a.id, {
        slug: a.slug,
        environment: a.environment,
        status: a.status,
        criticality: a.criticality,
        data_classification: a.data_classification,
        internet_exposure: a.internet_exposure,
        code_execution: a.code_execution,
        persistent_memory: a.persistent_memory,
        human_approval_coverage: a.human_approval_coverage,
        gateway_enforced: a.gateway_enforced,
        risk_band: a.risk_band,
        risk_source: a.risk_band ? 'risk_score' : 'criticality',
        source: a.source,
      }),
    );
  }
  // One owner node per email, one principal node per reference, named after their oldest row.
  const oldestFirst = <T extends { id: string; created_at: string }>(rows: T[]) =>
    [...rows].sort((x, y) => Date.parse(x.created_at) - Date.parse(y.created_at) || (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const owners = new Map<string, string>();
  for (const o of oldestFirst(src.agent_owners)) {
    const key = o.email.toLowerCase();
    if (!owners.has(key)) owners.set(key, addNode('owner', key, o.name, 'low', 'agent_owners', o.id, { name: o.name, email: o.email }));
  }
  const principals = new Map<string, string>();
  const scopesOf = new Map<string, string[]>();
  for (const d of src.delegations) scopesOf.set(d.principal_ref, [...(scopesOf.get(d.principal_ref) ?? []), ...d.scopes]);
  for (const d of oldestFirst(src.delegations)) {
    if (principals.has(d.principal_ref)) continue;
    const risk = RISK_RULES.delegation_principal(d.principal_type, scopesOf.get(d.principal_ref) ?? []);
    principals.set(
      d.principal_ref,
      addNode('delegation_principal', d.principal_ref, d.display_name, risk, 'delegations', d.id, {
        principal_ref: d.principal_ref,
        principal_type: d.principal_type,
      }),
    );
  }

  // Edges of the inventory: a tool's server, resource and credential.
  for (const t of src.tools) {
    const tool = tools.get(t.id)!.node;
    if (t.mcp_server_id) addEdge('hosted_on', tool, servers.get(t.mcp_server_id), 'tools', t.id, {});
    const kind: EdgeKind = isPrivileged(t.privilege_class) ? 'writes_resource' : 'reads_resource';
    const link = { via: 'tool_link', privilege_class: t.privilege_class };
    if (t.api_resource_id) addEdge(kind, tool, resources.get(t.api_resource_id), 'tools', t.id, link);
    if (t.data_resource_id) addEdge(kind, tool, resources.get(t.data_resource_id), 'tools', t.id, link);
    if (t.credential_ref_id) addEdge('uses_credential', tool, credentials.get(t.credential_ref_id), 'tools', t.id, { via: 'tool' });
  }

  // Edges of the agents.
  for (const b of src.permission_bindings) {
    const agent = agents.get(b.agent_id);
    const grant = { actions: b.actions, delegated: b.delegated, identity_id: b.identity_id };
    const at = (kind: EdgeKind, to: string | undefined, attributes: Record<string, unknown> = grant) =>
      addEdge(kind, agent, to, 'permission_bindings', b.id, attributes, b.expires_at);
    switch (b.target_kind) {
      case 'tool': {
        const tool = tools.get(b.target_id);
        // A binding pinned to an older definition of the tool grants nothing until re-approved (D23).
        const changed = !!tool?.definitionHash && !!b.pinned_definition_hash && tool.definitionHash !== b.pinned_definition_hash;
        at('uses_tool', tool?.node, { ...grant, definition_changed: changed });
        break;
      }
      case 'mcp_server':
        at('uses_server', servers.get(b.target_id));
        break;
      case 'api_resource':
      case 'data_resource': {
        const reads = b.actions.some((a) => READ_ACTION.test(a));
        const writes = b.actions.some((a) => !READ_ACTION.test(a));
        if (reads) at('reads_resource', resources.get(b.target_id), { ...grant, via: 'binding' });
        if (writes) at('writes_resource', resources.get(b.target_id), { ...grant, via: 'binding' });
        break;
      }
      // The spec's target kinds beyond the API's today: a credential or a model bound directly.
      case 'credential':
        at('uses_credential', credentials.get(b.target_id), { ...grant, via: 'binding' });
        break;
      case 'model':
        at('runs_model', models.get(b.target_id), { ...grant, via: 'binding' });
        break;
    }
  }
  for (const v of src.agent_versions) {
    if (v.model_id) addEdge('runs_model', agents.get(v.agent_id), models.get(v.model_id), 'agent_versions', v.id, { via: 'agent_version' });
  }
  for (const d of src.delegations) {
    addEdge('acts_for', agents.get(d.agent_id), principals.get(d.principal_ref), 'delegations', d.id, {
      scopes: d.scopes,
      principal_type: d.principal_type,
    }, d.expires_at);
  }
  for (const o of src.agent_owners) {
    addEdge('owned_by', agents.get(o.agent_id), owners.get(o.email.toLowerCase()), 'agent_owners', o.id, { owner_type: o.owner_type });
  }
  for (const i of src.workload_identities) {
    const node = addNode('workload_identity', i.id, i.client_id, 'low', 'workload_identities', i.id, {
      origin: 'tollgate',
      client_id: i.client_id,
      status: i.status,
    });
    addEdge('has_identity', agents.get(i.agent_id), node, 'workload_identities', i.id, { origin: 'tollgate' });
  }
  for (const i of src.agent_external_identities) {
    const node = addNode('workload_identity', i.id, `${i.identity_type}:${i.subject}`, RISK_RULES.external_identity(i), 'agent_external_identities', i.id, {
      origin: 'external',
      identity_type: i.identity_type,
      subject: i.subject,
      issuer: i.issuer,
      authentication_strength: i.authentication_strength,
    });
    addEdge('has_identity', agents.get(i.agent_id), node, 'agent_external_identities', i.id, { origin: 'external' });
  }
  return { nodes: [...nodes.values()], edges: [...edges.values()] };
}
