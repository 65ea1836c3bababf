import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { agentOut, agentParams, containmentEventOut, gatewayAccessIn } from './agents.schemas.js';
import { containAgent, containmentHistory, type ContainmentAction } from './containment.service.js';

const tags = ['Agent registry and identities'];

export async function containmentRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, revocations } = app.deps;

  const operations: Array<[string, ContainmentAction, string]> = [
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
        const agent = await containAgent(db, clock, req, p, req.params.agent_id, action, req.body.reason);
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
        body: gatewayAccessIn,
        response: { 200: agentOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = actorOf(req);
      const agent = await containAgent(db, clock, req, p, req.params.agent_id, 'gateway_access', req.body.reason, req.body.enabled);
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
      const rows = await containmentHistory(db, p.orgId, req.params.agent_id);
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
