import type { Tx } from '../../db/database.js';
import type { AgentView, BindingView, Snapshot, ToolView } from './engine/types.js';

/**
 * The registry state one decision reads, in a handful of set-based queries inside the action's
 * transaction. (The per-organisation in-memory snapshot with cross-replica invalidation arrives with
 * the decisions benchmark; until then every decision reads current state.)
 */
export async function loadSnapshot(tx: Tx, orgId: string, agentId: string, toolKey: string): Promise<Snapshot> {
  const tools = await tx.selectFrom('tools').selectAll().where('org_id', '=', orgId).where('tool_key', '=', toolKey).execute();
  const serverIds = tools.map((t) => t.mcp_server_id).filter((x): x is string => x !== null);
  const servers = serverIds.length
    ? await tx.selectFrom('mcp_servers').select(['id', 'trust_state']).where('org_id', '=', orgId).where('id', 'in', serverIds).execute()
    : [];
  const bindings = await tx.selectFrom('permission_bindings').selectAll().where('org_id', '=', orgId).where('agent_id', '=', agentId).execute();
  const delegations = await tx.selectFrom('delegations').selectAll().where('org_id', '=', orgId).where('agent_id', '=', agentId).execute();
  const denyClass = await tx
    .selectFrom('deny_class_rules')
    .select(['id', 'privilege_class', 'agent_id'])
    .where('org_id', '=', orgId)
    .where('lifted_at', 'is', null)
    .execute();
  return {
    tools: Object.fromEntries(
      tools.map((t) => [
        t.tool_key,
        {
          id: t.id,
          key: t.tool_key,
          privilegeClass: t.privilege_class as ToolView['privilegeClass'],
          approvalClass: t.approval_class as ToolView['approvalClass'],
          blocked: t.blocked,
          mcpServerId: t.mcp_server_id,
        },
      ]),
    ),
    mcpServers: Object.fromEntries(
      servers.map((s) => [s.id, { trustState: s.trust_state as Snapshot['mcpServers'][string]['trustState'] }]),
    ),
    bindings: bindings.map((b) => ({
      id: b.id,
      targetKind: b.target_kind as BindingView['targetKind'],
      targetId: b.target_id,
      actions: b.actions,
      constraints: b.constraints as BindingView['constraints'],
      expiresAt: b.expires_at ? b.expires_at.toISOString() : null,
      identityId: b.identity_id,
    })),
    delegations: delegations.map((d) => ({
      principalRef: d.principal_ref,
      scopes: d.scopes,
      expiresAt: d.expires_at ? d.expires_at.toISOString() : null,
    })),
    denyClassRules: denyClass.map((r) => ({ id: r.id, privilegeClass: r.privilege_class, agentId: r.agent_id })),
    rules: [],
  };
}

export async function loadAgentView(tx: Tx, orgId: string, agentId: string): Promise<AgentView | undefined> {
  const a = await tx
    .selectFrom('agents')
    .select(['id', 'status', 'gateway_access', 'environment', 'criticality', 'data_classification'])
    .where('org_id', '=', orgId)
    .where('id', '=', agentId)
    .executeTakeFirst();
  if (!a) return undefined;
  return {
    id: a.id,
    status: a.status as AgentView['status'],
    gatewayAccess: a.gateway_access,
    environment: a.environment,
    criticality: a.criticality,
    dataClassification: a.data_classification,
  };
}
