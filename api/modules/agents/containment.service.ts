import { randomUUID } from 'node:crypto';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import type { Updateable } from 'kysely';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import type { AgentsTable } from '../../db/schema.js';
import { ApiError } from '../../platform/errors.js';
import { cancelApprovals, openApprovalsOfAgent } from '../approvals/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import { updateAgent, type AgentRow } from './agents.repository.js';
import { agentOr404, agentWithOwners } from './agents.service.js';
import { containmentEventsOf, insertContainmentEvent, revokeIdentitiesOf } from './containment.repository.js';

export type ContainmentAction = 'suspend' | 'restore' | 'revoke' | 'revoke_sessions' | 'gateway_access';

/**
 * What each containment operation does to the agent. A transition that makes no sense (restoring an
 * active agent, anything but reading a revoked one) answers 409 conflict and changes nothing.
 */
function transition(agent: AgentRow, action: ContainmentAction, enabled?: boolean): Updateable<AgentsTable> {
  if (agent.status === 'revoked') throw new ApiError('conflict', 'The agent is revoked permanently; it cannot be changed.');
  const nextEpoch = agent.session_epoch + 1;
  switch (action) {
    case 'suspend':
      if (agent.status === 'suspended') throw new ApiError('conflict', 'The agent is already suspended.');
      return { status: 'suspended', session_epoch: nextEpoch };
    case 'restore':
      if (agent.status === 'active') throw new ApiError('conflict', 'The agent is not suspended.');
      return { status: 'active' };
    case 'revoke':
      return { status: 'revoked', session_epoch: nextEpoch, gateway_access: false };
    case 'revoke_sessions':
      return { session_epoch: nextEpoch };
    case 'gateway_access':
      return { gateway_access: enabled ?? agent.gateway_access };
  }
}

/**
 * Applies a containment operation in one transaction: the agent's change, what it revokes or cancels,
 * the containment event, the audit entry and the evidence. Answers the agent as it now is.
 */
export function containAgent(
  db: Db,
  clock: Clock,
  req: RequestContext,
  actor: ActorPrincipal,
  agentId: string,
  action: ContainmentAction,
  reason: string,
  enabled?: boolean,
) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    const agent = await agentOr404(tx, orgId, agentId, true);
    const change = transition(agent, action, enabled);
    await updateAgent(tx, orgId, agentId, { ...change, version: agent.version + 1, updated_at: now });
    const details: Record<string, unknown> = { status: { from: agent.status, to: change.status ?? agent.status } };
    if (action === 'gateway_access') details.gateway_access = { from: agent.gateway_access, to: enabled };
    if (action === 'revoke') details.identities_revoked = await revokeIdentitiesOf(tx, orgId, agentId, now);
    if (action === 'suspend' || action === 'revoke') {
      // A contained agent's pending approvals are cancelled: nothing it asked for runs later.
      const open = await openApprovalsOfAgent(tx, orgId, agentId);
      await cancelApprovals(tx, open, now, action === 'revoke' ? 'revoked' : 'cancelled');
      details.approvals_cancelled = open.map((a) => a.id);
    }
    await insertContainmentEvent(tx, {
      id: randomUUID(),
      org_id: orgId,
      agent_id: agentId,
      action,
      reason,
      actor_id: actor.userId,
      correlation_id: req.id,
      details: JSON.stringify(details),
      at: now,
    });
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: `agent.${action}`, targetType: 'agent', targetId: agentId, details: { reason, ...details } },
      { eventType: 'containment', agentId, payload: { action, reason, ...details } },
    );
    const cancelled = details.approvals_cancelled as string[] | undefined;
    await recordTelemetry(tx, orgId, [
      telemetryEvents.containment({
        at: now,
        agentId,
        correlationId: req.id,
        action,
        reason,
        actorId: actor.userId,
        details: { ...details, ...(cancelled ? { approvals_cancelled: cancelled.length } : {}) },
        subject: agent.name,
      }),
    ]);
    return agentWithOwners(tx, orgId, agentId);
  });
}

/** The agent's containment events, oldest first. */
export function containmentHistory(db: Db, orgId: string, agentId: string) {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    return containmentEventsOf(tx, orgId, agentId);
  });
}
