import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Updateable } from 'kysely';
import { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import type { AgentsTable } from '../../db/schema.js';
import { actorOf } from '../../platform/auth.js';
import { ApiError } from '../../platform/errors.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { auditWithEvidence } from '../evidence/record.js';
import { cancelApprovals } from '../gateway/approvals.repository.js';
import type { AgentRow } from './agents.repository.js';
import { agentOr404, agentWithOwners } from './agents.routes.js';
import { agentOut, agentParams, containmentEventOut } from './agents.schemas.js';

const tags = ['Agent registry and identities'];

type Action = 'suspend' | 'restore' | 'revoke' | 'revoke_sessions' | 'gateway_access';

/**
 * What each containment operation does to the agent. A transition that makes no sense (restoring an
 * active agent, anything but reading a revoked one) answers 409 conflict and changes nothing.
 */
function transition(agent: AgentRow, action: Action, enabled?: boolean): Updateable<AgentsTable> {
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

async function contain(tx: Tx, req: FastifyRequest, agentId: string, action: Action, reason: string, enabled?: boolean) {
  const p = actorOf(req);
  const now = req.server.deps.clock.now();
  const agent = await agentOr404(tx, p.orgId, agentId, true);
  const change = transition(agent, action, enabled);
  await tx
    .updateTable('agents')
    .set({ ...change, version: agent.version + 1, updated_at: now })
    .where('org_id', '=', p.orgId)
    .where('id', '=', agentId)
    .execute();
  const details: Record<string, unknown> = { status: { from: agent.status, to: change.status ?? agent.status } };
  if (action === 'gateway_access') details.gateway_access = { from: agent.gateway_access, to: enabled };
  if (action === 'revoke') {
    const revoked = await tx
      .updateTable('workload_identities')
      .set({ status: 'revoked', revoked_at: now })
      .where('org_id', '=', p.orgId)
      .where('agent_id', '=', agentId)
      .where('status', '=', 'active')
      .returning('id')
      .execute();
    details.identities_revoked = revoked.map((r) => r.id);
  }
  if (action === 'suspend' || action === 'revoke') {
    // A contained agent's pending approvals are cancelled: nothing it asked for runs later.
    const open = await tx
      .selectFrom('approvals')
      .selectAll()
      .where('org_id', '=', p.orgId)
      .where('agent_id', '=', agentId)
      .where('status', 'in', ['pending', 'approved'])
      .where('token_used_at', 'is', null)
      .forUpdate()
      .execute();
    await cancelApprovals(tx, open, now, action === 'revoke' ? 'revoked' : 'cancelled');
    details.approvals_cancelled = open.map((a) => a.id);
  }
  await tx
    .insertInto('containment_events')
    .values({
      id: randomUUID(),
      org_id: p.orgId,
      agent_id: agentId,
      action,
      reason,
      actor_id: p.userId,
      correlation_id: req.id,
      details: JSON.stringify(details),
      at: now,
    })
    .execute();
  await auditWithEvidence(
    tx,
    req,
    p.orgId,
    { action: `agent.${action}`, targetType: 'agent', targetId: agentId, details: { reason, ...details } },
    { eventType: 'containment', agentId, payload: { action, reason, ...details } },
  );
  return agentWithOwners(tx, p.orgId, agentId);
}

export async function containmentRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, revocations } = app.deps;

  const operations: Array<[string, Action, string]> = [
    ['suspend', 'suspend', 'Suspend an agent (kill switch): its tokens stop working and pending approvals are cancelled'],
    ['restore', 'restore', 'Restore a suspended agent'],
    ['revoke', 'revoke', 'Revoke an agent permanently, with its identities'],
    ['revoke-sessions', 'revoke_sessions', "Revoke the agent's sessions: every token issued so far stops working"],
  ];
  for (const [path, action, summary] of operations) {
    r.post(
      `/agents/:agent_id/${path}`,
      {
        ...caller('agent:control'),
        schema: { summary, tags, params: agentParams, body: reasonBody, response: { 200: agentOut } },
      },
      async (req) => {
        requireConfirmation(req.body);
        const p = actorOf(req);
        const agent = await inScope(db, { orgId: p.orgId }, (tx) => contain(tx, req, req.params.agent_id, action, req.body.reason));
        revocations.invalidate(req.params.agent_id);
        return agent;
      },
    );
  }

  r.post(
    '/agents/:agent_id/gateway-access',
    {
      ...caller('agent:control'),
      schema: {
        summary: 'Switch the agent’s gateway access on or off',
        tags,
        params: agentParams,
        body: reasonBody.extend({ enabled: z.boolean() }),
        response: { 200: agentOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = actorOf(req);
      const agent = await inScope(db, { orgId: p.orgId }, (tx) =>
        contain(tx, req, req.params.agent_id, 'gateway_access', req.body.reason, req.body.enabled),
      );
      revocations.invalidate(req.params.agent_id);
      return agent;
    },
  );

  r.get(
    '/agents/:agent_id/containment',
    {
      ...caller('agent:read'),
      schema: {
        summary: 'Containment history of an agent: who did what, when and why, oldest first',
        tags,
        params: agentParams,
        response: { 200: z.object({ items: z.array(containmentEventOut) }) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const rows = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        return tx
          .selectFrom('containment_events')
          .selectAll()
          .where('org_id', '=', p.orgId)
          .where('agent_id', '=', req.params.agent_id)
          .orderBy('seq')
          .execute();
      });
      return {
        items: rows.map((e) => ({
          id: e.id,
          action: e.action,
          reason: e.reason,
          actor_id: e.actor_id,
          correlation_id: e.correlation_id,
          details: e.details,
          at: iso(e.at),
        })),
      };
    },
  );
}
