import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { notFound } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import { effectivePermissions } from './engine/tool-permissions.js';
import type { permissionsOut } from './permissions.schemas.js';
import { registryVersion, type DecisionSnapshots } from './snapshot.js';

/**
 * The calling agent's containment and the tools it may invoke, from the same registry snapshot and the
 * same engine steps its decisions use (engine/tool-permissions.ts). Only the agent's own organisation and
 * bindings are read: the token names both.
 */
export function agentPermissions(
  deps: { db: Db; clock: Clock; snapshots: DecisionSnapshots },
  who: { orgId: string; agentId: string; identityId: string | null },
): Promise<z.infer<typeof permissionsOut>> {
  return inScope(deps.db, { orgId: who.orgId }, async (tx) => {
    const version = await registryVersion(tx, who.orgId);
    const view = await deps.snapshots.load(tx, who.orgId, [who.agentId], version);
    const state = view.state(who.agentId, '');
    if (!state.agent) throw notFound('No such agent.');
    const at = deps.clock.now();
    const p = effectivePermissions(state.agent, who.identityId, state.snapshot, at.toISOString());
    return {
      agent_id: who.agentId,
      contained: p.contained,
      reason_codes: p.reasonCodes,
      operation: 'invoke' as const,
      tools: p.tools.map(({ tool, constrained }) => ({
        tool: tool.key,
        privilege_class: tool.privilegeClass,
        approval_class: tool.approvalClass,
        mcp_server_id: tool.mcpServerId,
        constrained,
      })),
      registry_version: version,
      evaluated_at: iso(at),
    };
  });
}
