import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { AgentView, BindingView, Rule, Snapshot, ToolView } from './engine/types.js';

/** Everything one decision reads besides the request. */
export interface DecisionState {
  agent: AgentView | undefined;
  contentRetention: string;
  approvalTtlSeconds: number;
  snapshot: Snapshot;
  /** What execution needs of the resolved tool. */
  tool: { builtin: boolean; credentialRefId: string | null } | undefined;
}

interface Row {
  agent: {
    id: string;
    status: AgentView['status'];
    gateway_access: boolean;
    environment: string;
    criticality: string;
    data_classification: string;
    content_retention: string;
    approval_ttl_seconds: number;
  } | null;
  tools: Array<{
    id: string;
    tool_key: string;
    privilege_class: ToolView['privilegeClass'];
    approval_class: ToolView['approvalClass'];
    blocked: boolean;
    mcp_server_id: string | null;
    builtin: boolean;
    credential_ref_id: string | null;
  }>;
  servers: Array<{ id: string; trust_state: Snapshot['mcpServers'][string]['trustState'] }>;
  bindings: Array<{
    id: string;
    target_kind: BindingView['targetKind'];
    target_id: string;
    actions: string[];
    constraints: BindingView['constraints'];
    expires_at: string | null;
    identity_id: string | null;
  }>;
  delegations: Array<{ principal_ref: string; scopes: string[]; expires_at: string | null }>;
  deny_rules: Array<{ id: string; privilege_class: string; agent_id: string | null }>;
  rules: Array<Rule & { policy: string }>;
}

const isoOrNull = (v: string | null) => (v ? new Date(v).toISOString() : null);

/**
 * The agent, its organisation's settings and the registry state the decision reads, in one statement
 * inside the action's transaction: each round trip costs more than the query behind it. Rules are those
 * of each active policy's published version, in policy-key order; drafts are never read. (The
 * per-organisation in-memory snapshot with cross-replica invalidation is the next step.)
 */
export async function loadDecisionState(tx: Tx, orgId: string, agentId: string, toolKey: string): Promise<DecisionState> {
  const { rows } = await sql<Row>`
    select
      (select row_to_json(x) from (
         select a.id, a.status, a.gateway_access, a.environment, a.criticality, a.data_classification,
                o.content_retention, o.approval_ttl_seconds
         from agents a join organisations o on o.id = a.org_id
         where a.org_id = ${orgId} and a.id = ${agentId}) x) as agent,
      (select coalesce(json_agg(x), '[]') from (
         select id, tool_key, privilege_class, approval_class, blocked, mcp_server_id, builtin, credential_ref_id
         from tools where org_id = ${orgId} and tool_key = ${toolKey}) x) as tools,
      (select coalesce(json_agg(x), '[]') from (
         select s.id, s.trust_state from mcp_servers s
         where s.org_id = ${orgId}
           and s.id in (select mcp_server_id from tools where org_id = ${orgId} and tool_key = ${toolKey})) x) as servers,
      (select coalesce(json_agg(x), '[]') from (
         select id, target_kind, target_id, actions, constraints, expires_at, identity_id
         from permission_bindings where org_id = ${orgId} and agent_id = ${agentId}) x) as bindings,
      (select coalesce(json_agg(x), '[]') from (
         select principal_ref, scopes, expires_at
         from delegations where org_id = ${orgId} and agent_id = ${agentId}) x) as delegations,
      (select coalesce(json_agg(x), '[]') from (
         select id, privilege_class, agent_id
         from deny_class_rules where org_id = ${orgId} and lifted_at is null) x) as deny_rules,
      (select coalesce(json_agg(r.rule || jsonb_build_object('policy', p.key) order by p.key, r.ord), '[]')
         from policies p
         join policy_versions v on v.policy_id = p.id and v.number = p.published_version
         cross join lateral jsonb_array_elements(v.rules) with ordinality as r(rule, ord)
         where p.org_id = ${orgId} and p.status = 'active') as rules`.execute(tx);
  const r = rows[0]!;
  const tool = r.tools[0];
  return {
    agent: r.agent
      ? {
          id: r.agent.id,
          status: r.agent.status,
          gatewayAccess: r.agent.gateway_access,
          environment: r.agent.environment,
          criticality: r.agent.criticality,
          dataClassification: r.agent.data_classification,
        }
      : undefined,
    contentRetention: r.agent?.content_retention ?? 'redacted_excerpts',
    approvalTtlSeconds: r.agent?.approval_ttl_seconds ?? 900,
    tool: tool ? { builtin: tool.builtin, credentialRefId: tool.credential_ref_id } : undefined,
    snapshot: {
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
          },
        ]),
      ),
      mcpServers: Object.fromEntries(r.servers.map((s) => [s.id, { trustState: s.trust_state }])),
      bindings: r.bindings.map((b) => ({
        id: b.id,
        targetKind: b.target_kind,
        targetId: b.target_id,
        actions: b.actions,
        constraints: b.constraints,
        expiresAt: isoOrNull(b.expires_at),
        identityId: b.identity_id,
      })),
      delegations: r.delegations.map((d) => ({ principalRef: d.principal_ref, scopes: d.scopes, expiresAt: isoOrNull(d.expires_at) })),
      denyClassRules: r.deny_rules.map((d) => ({ id: d.id, privilegeClass: d.privilege_class, agentId: d.agent_id })),
      rules: r.rules,
    },
  };
}
