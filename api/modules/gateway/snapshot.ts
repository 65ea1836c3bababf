import { isIP } from 'node:net';
import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { hostKind } from '../../platform/outbound.js';
import { compileRules } from './engine/compile.js';
import { readsSession } from './engine/session.js';
import type { AgentView, BindingView, CompiledRule, DelegationView, Rule, Snapshot, ToolView } from './engine/types.js';

/** Everything one decision reads besides the request. */
export interface DecisionState {
  agent: AgentView | undefined;
  contentRetention: string;
  approvalTtlSeconds: number;
  snapshot: Snapshot;
  /** What execution needs of the resolved tool. */
  tool: { builtin: boolean; credentialActive: boolean | null } | undefined;
  /** A published rule reads `session.*`: the decision's evidence then carries the session's facts it read. */
  readsSession: boolean;
}

interface AgentEntry {
  agent: AgentView;
  bindings: BindingView[];
  delegations: DelegationView[];
}

/** One organisation's registry as of `version`: everything but the agents, which load on first use. */
interface OrgRegistry {
  version: string;
  contentRetention: string;
  approvalTtlSeconds: number;
  tools: Record<string, ToolView>;
  execution: Map<string, { builtin: boolean; credentialRefId: string | null }>;
  credentials: Map<string, string>;
  mcpServers: Snapshot['mcpServers'];
  denyClassRules: Snapshot['denyClassRules'];
  rules: Snapshot['rules'];
  /** A rule reads `session.*`: decisions then read their sessions' facts after locking the chain head. */
  readsSession: boolean;
  /** null: no such agent in this organisation. */
  agents: Map<string, AgentEntry | null>;
}

interface OrgRow {
  org: { content_retention: string; approval_ttl_seconds: number } | null;
  tools: Array<{
    id: string;
    tool_key: string;
    privilege_class: ToolView['privilegeClass'];
    approval_class: ToolView['approvalClass'];
    blocked: boolean;
    mcp_server_id: string | null;
    builtin: boolean;
    credential_ref_id: string | null;
    definition_hash: string | null;
    data_classification: string | null;
    api_base_url: string | null;
  }>;
  servers: Array<{ id: string; trust_state: Snapshot['mcpServers'][string]['trustState'] }>;
  credentials: Array<{ id: string; status: string }>;
  deny_rules: Array<{ id: string; privilege_class: string; agent_id: string | null }>;
  versions: Array<{ id: string; policy: string; rules: Rule[] }>;
}

interface AgentRow {
  id: string;
  status: AgentView['status'];
  gateway_access: boolean;
  environment: string;
  criticality: string;
  data_classification: string;
  bindings: Array<{
    id: string;
    target_kind: BindingView['targetKind'];
    target_id: string;
    actions: string[];
    constraints: BindingView['constraints'];
    expires_at: string | null;
    identity_id: string | null;
    pinned_definition_hash: string | null;
  }>;
  delegations: Array<{ principal_ref: string; scopes: string[]; expires_at: string | null }>;
}

const isoOrNull = (v: string | null) => (v ? new Date(v).toISOString() : null);

const MAX_AGENTS_PER_ORG = 50_000;

/** Published versions never change, so each is compiled once per process (bounded). */
const compiledVersions = new Map<string, CompiledRule[]>();

function compiledVersion(id: string, policy: string, rules: Rule[]): CompiledRule[] {
  let compiled = compiledVersions.get(id);
  if (!compiled) {
    try {
      compiled = compileRules(rules, policy);
    } catch {
      // Validated when written, so only an operator set changed since can get here: fail closed.
      compiled = [{ id: 'unavailable', effect: 'deny', reason_code: 'POLICY_UNAVAILABLE', conditions: [], policy, compiled: [], ordered: [] }];
    }
    if (compiledVersions.size >= 10_000) compiledVersions.delete(compiledVersions.keys().next().value!);
    compiledVersions.set(id, compiled);
  }
  return compiled;
}

/** The organisation's registry version, read in the caller's transaction ('0': never changed). */
export async function registryVersion(tx: Tx, orgId: string): Promise<string> {
  const row = await tx.selectFrom('registry_versions').select('version').where('org_id', '=', orgId).executeTakeFirst();
  return row ? String(row.version) : '0';
}

/**
 * The registry state decisions read, per organisation, in memory. The database raises an
 * organisation's version on every change to a row a decision reads (migration 0006); a batch reads
 * that one number in its own transaction and reloads only when it moved, so a decision never sees a
 * registry older than the last committed change, on any API process, and does not read it row by row.
 */
export class DecisionSnapshots {
  private readonly orgs = new Map<string, OrgRegistry>();
  constructor(private readonly maxOrgs = 2000) {}

  /**
   * The states of `agentIds` for decisions in `tx`. Pass `version` when the caller already read it in
   * this transaction.
   */
  async load(tx: Tx, orgId: string, agentIds: Iterable<string>, version?: string): Promise<OrgView> {
    const current = version ?? (await registryVersion(tx, orgId));
    let org = this.orgs.get(orgId);
    if (!org || org.version !== current) {
      org = await loadOrg(tx, orgId, current);
    }
    // Most recently used last, so the first is the one to drop.
    this.orgs.delete(orgId);
    this.orgs.set(orgId, org);
    if (this.orgs.size > this.maxOrgs) this.orgs.delete(this.orgs.keys().next().value!);

    // Agents load on first use; an organisation with very many is kept to the most recent ones.
    if (org.agents.size > MAX_AGENTS_PER_ORG) org.agents.clear();
    const missing = [...new Set(agentIds)].filter((id) => !org.agents.has(id));
    if (missing.length > 0) await loadAgents(tx, orgId, missing, org);
    return new OrgView(org);
  }

  /**
   * Whether the organisation's rules read `session.*`, as last loaded (false before the first load): a
   * batch then locks the chain head before deciding instead of following the batch in flight. The
   * batch's own load has the last word (it reloads when the registry moved).
   */
  readsSession(orgId: string): boolean {
    return this.orgs.get(orgId)?.readsSession ?? false;
  }
}

/** Read access to one organisation's loaded registry. */
export class OrgView {
  constructor(private readonly org: OrgRegistry) {}

  /** A published rule reads `session.*` (the facts must then be read after the chain head is locked). */
  get readsSession(): boolean {
    return this.org.readsSession;
  }

  state(agentId: string, toolKey: string): DecisionState {
    const { org } = this;
    const entry = org.agents.get(agentId) ?? undefined;
    const exec = org.execution.get(toolKey);
    return {
      agent: entry?.agent,
      contentRetention: org.contentRetention,
      approvalTtlSeconds: org.approvalTtlSeconds,
      tool: exec
        ? { builtin: exec.builtin, credentialActive: exec.credentialRefId ? org.credentials.get(exec.credentialRefId) === 'active' : null }
        : undefined,
      readsSession: org.readsSession,
      snapshot: {
        tools: org.tools,
        mcpServers: org.mcpServers,
        bindings: entry?.bindings ?? [],
        delegations: entry?.delegations ?? [],
        denyClassRules: org.denyClassRules,
        rules: org.rules,
      },
    };
  }
}

/**
 * The organisation's settings and registry in one statement. Rules are those of each active policy's
 * published version, in policy-key order; drafts are never read.
 */
async function loadOrg(tx: Tx, orgId: string, version: string): Promise<OrgRegistry> {
  const { rows } = await sql<OrgRow>`
    select
      (select row_to_json(x) from (
         select content_retention, approval_ttl_seconds from organisations where id = ${orgId}) x) as org,
      (select coalesce(json_agg(x), '[]') from (
         select t.id, t.tool_key, t.privilege_class, t.approval_class, t.blocked, t.mcp_server_id, t.builtin, t.credential_ref_id,
           t.definition_hash, d.classification as data_classification, r.base_url as api_base_url
         from tools t
         left join resources d on d.id = t.data_resource_id and d.org_id = t.org_id
         left join resources r on r.id = t.api_resource_id and r.org_id = t.org_id
         where t.org_id = ${orgId}) x) as tools,
      (select coalesce(json_agg(x), '[]') from (
         select id, trust_state from mcp_servers where org_id = ${orgId}) x) as servers,
      (select coalesce(json_agg(x), '[]') from (
         select id, status from credential_refs where org_id = ${orgId}) x) as credentials,
      (select coalesce(json_agg(x), '[]') from (
         select id, privilege_class, agent_id
         from deny_class_rules where org_id = ${orgId} and lifted_at is null) x) as deny_rules,
      (select coalesce(json_agg(json_build_object('id', v.id, 'policy', p.key, 'rules', v.rules) order by p.key), '[]')
         from policies p
         join policy_versions v on v.policy_id = p.id and v.number = p.published_version
         where p.org_id = ${orgId} and p.status = 'active') as versions`.execute(tx);
  const r = rows[0]!;
  const rules = r.versions.flatMap((v) => compiledVersion(v.id, v.policy, v.rules));
  return {
    version,
    contentRetention: r.org?.content_retention ?? 'redacted_excerpts',
    approvalTtlSeconds: r.org?.approval_ttl_seconds ?? 900,
    tools: Object.fromEntries(
      r.tools.map((t) => [
        t.tool_key,
        {
          id: t.id,
          key: t.tool_key,
          privilegeClass: t.privilege_class,
          approvalClass: t.approval_class,
          blocked: t.blocked,
          mcpServerId: t.mcp_server_id,
          definitionHash: t.definition_hash,
          dataClassification: t.data_classification,
          internetFacing: onTheInternet(t.api_base_url),
        },
      ]),
    ),
    execution: new Map(r.tools.map((t) => [t.tool_key, { builtin: t.builtin, credentialRefId: t.credential_ref_id }])),
    credentials: new Map(r.credentials.map((c) => [c.id, c.status])),
    mcpServers: Object.fromEntries(r.servers.map((s) => [s.id, { trustState: s.trust_state }])),
    denyClassRules: r.deny_rules.map((d) => ({ id: d.id, privilegeClass: d.privilege_class, agentId: d.agent_id })),
    rules,
    readsSession: readsSession(rules),
    agents: new Map(),
  };
}

/** Names only a private network resolves: a cluster's services, mDNS, the reserved internal suffixes. */
const INTERNAL_SUFFIXES = ['.svc', '.cluster.local', '.local', '.internal', '.lan', '.home.arpa', '.corp', '.intranet'];

/**
 * Whether an API's base URL is on the internet, as flow rules see it: a public address, or a name with a
 * dot that is not under a suffix only private networks use. Judged from the URL as registered (no DNS).
 */
export function onTheInternet(baseUrl: string | null): boolean {
  if (!baseUrl) return false;
  let host: string;
  try {
    host = new URL(baseUrl).hostname.toLowerCase().replace(/\.+$/, '');
  } catch {
    return false;
  }
  if (hostKind(host) !== 'public') return false;
  if (isIP(host.replace(/^\[(.*)\]$/, '$1'))) return true;
  // A single label (`payments`) is a name on the local network's search path.
  if (!host.includes('.')) return false;
  return !INTERNAL_SUFFIXES.some((suffix) => host.endsWith(suffix));
}

/** Agents with their bindings and delegations, in one statement, into `org`. */
async function loadAgents(tx: Tx, orgId: string, agentIds: string[], org: OrgRegistry): Promise<void> {
  const { rows } = await sql<AgentRow>`
    select a.id, a.status, a.gateway_access, a.environment, a.criticality, a.data_classification,
      (select coalesce(json_agg(x), '[]') from (
         select id, target_kind, target_id, actions, constraints, expires_at, identity_id, pinned_definition_hash
         from permission_bindings b where b.org_id = a.org_id and b.agent_id = a.id) x) as bindings,
      (select coalesce(json_agg(x), '[]') from (
         select principal_ref, scopes, expires_at
         from delegations d where d.org_id = a.org_id and d.agent_id = a.id) x) as delegations
    from agents a
    where a.org_id = ${orgId} and a.id = any(${agentIds}::uuid[])`.execute(tx);
  for (const id of agentIds) org.agents.set(id, null);
  for (const a of rows) {
    org.agents.set(a.id, {
      agent: {
        id: a.id,
        status: a.status,
        gatewayAccess: a.gateway_access,
        environment: a.environment,
        criticality: a.criticality,
        dataClassification: a.data_classification,
      },
      bindings: a.bindings.map((b) => ({
        id: b.id,
        targetKind: b.target_kind,
        targetId: b.target_id,
        actions: b.actions,
        constraints: b.constraints,
        expiresAt: isoOrNull(b.expires_at),
        identityId: b.identity_id,
        pinnedDefinitionHash: b.pinned_definition_hash,
      })),
      delegations: a.delegations.map((d) => ({ principalRef: d.principal_ref, scopes: d.scopes, expiresAt: isoOrNull(d.expires_at) })),
    });
  }
}
