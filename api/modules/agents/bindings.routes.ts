import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { agentParams } from './agents.schemas.js';
import { toBinding, toDelegation } from './bindings.repository.js';
import {
  bindingIn,
  bindingOut,
  bindingParams,
  delegationIn,
  delegationOut,
  delegationParams,
  reapproveIn,
  removalQuery,
} from './bindings.schemas.js';
import {
  addDelegation,
  agentBindings,
  agentDelegations,
  bindPermission,
  reapproveBinding,
  removeBinding,
  removeDelegation,
} from './bindings.service.js';

const tags = ['Agent registry and identities'];

export async function bindingsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;
  const now = () => clock.now();

  r.post(
    '/agents/:agent_id/delegations',
    {
      ...caller('identity:manage'),
      schema: {
        summary: 'Let the agent act on behalf of a person (or group, or service) within scopes',
        tags,
        params: agentParams,
        body: delegationIn(now),
        response: { 201: delegationOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const row = await addDelegation(db, clock, req, p, req.params.agent_id, req.body);
      return reply.status(201).send(toDelegation(row));
    },
  );

  r.post(
    '/agents/:agent_id/permissions',
    {
      ...caller('identity:manage'),
      schema: {
        summary: 'Bind a permission: the agent may take these actions on this target, within constraints',
        tags,
        params: agentParams,
        body: bindingIn(now),
        response: { 201: bindingOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const row = await bindPermission(db, clock, req, p, req.params.agent_id, req.body);
      return reply.status(201).send(toBinding(row));
    },
  );

  r.delete(
    '/agents/:agent_id/permissions/:binding_id',
    {
      ...caller('identity:manage'),
      schema: {
        summary: 'Remove a permission binding',
        tags,
        params: bindingParams,
        querystring: removalQuery,
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      await removeBinding(db, req, p.orgId, req.params.agent_id, req.params.binding_id, req.query.reason);
      return reply.status(204).send(null);
    },
  );

  // What the Kubernetes controller reads and removes to converge an agent on its resource: operations
  // outside the spec's list (docs/operations.md, Extensions).

  r.get(
    '/agents/:agent_id/permissions',
    {
      ...beyondSpec(caller('identity:read')),
      schema: {
        summary: "The agent's permission bindings, oldest first, expired ones included (each with expires_at)",
        tags,
        params: agentParams,
        response: { 200: z.object({ items: z.array(bindingOut) }) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const rows = await agentBindings(db, p.orgId, req.params.agent_id);
      return { items: rows.map(toBinding) };
    },
  );

  // Rug-pull protection (docs/registry.md, Permission bindings): also beyond the spec's list.
  r.post(
    '/agents/:agent_id/permissions/:binding_id/reapprove',
    {
      ...beyondSpec(caller('identity:manage')),
      schema: {
        summary:
          "Re-approve a binding on a tool whose definition changed since it was granted: pins it to the tool's current " +
          'definition, so the gateway allows calls under it again (audited, evidence). 409 when the binding is not on a ' +
          'discovered tool or is already pinned to its current definition',
        tags,
        params: bindingParams,
        body: reapproveIn,
        response: { 200: bindingOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const row = await reapproveBinding(db, clock, req, p, req.params.agent_id, req.params.binding_id, req.body.reason);
      return toBinding(row);
    },
  );

  r.get(
    '/agents/:agent_id/delegations',
    {
      ...beyondSpec(caller('identity:read')),
      schema: {
        summary: "The agent's delegations, oldest first, expired ones included (each with expires_at)",
        tags,
        params: agentParams,
        response: { 200: z.object({ items: z.array(delegationOut) }) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const rows = await agentDelegations(db, p.orgId, req.params.agent_id);
      return { items: rows.map(toDelegation) };
    },
  );

  r.delete(
    '/agents/:agent_id/delegations/:delegation_id',
    {
      ...beyondSpec(caller('identity:manage')),
      schema: {
        summary: 'Remove a delegation: the agent no longer acts on behalf of that principal',
        tags,
        params: delegationParams,
        querystring: removalQuery,
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      await removeDelegation(db, req, p.orgId, req.params.agent_id, req.params.delegation_id, req.query.reason);
      return reply.status(204).send(null);
    },
  );
}
