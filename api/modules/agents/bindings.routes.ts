import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Selectable } from 'kysely';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import type { DelegationsTable, PermissionBindingsTable } from '../../db/schema.js';
import { actorOf } from '../../platform/auth.js';
import { notFound, validationFailed } from '../../platform/errors.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { audit } from '../audit/audit.js';
import { PRINCIPAL_TYPE, TARGET_KIND } from '../shared/enums.js';
import { recordExists } from '../inventory/inventory.repository.js';
import { agentOr404 } from './agents.routes.js';
import { agentParams } from './agents.schemas.js';

const tags = ['Agent registry and identities'];

/**
 * The constraint object of a permission binding (docs/registry.md). Unknown keys are refused, so a
 * typo never silently widens a permission.
 */
export const constraintsSchema = z
  .object({
    max_amount: z.number().nonnegative().optional().describe('largest parameters.amount a call may carry'),
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'an ISO 4217 code such as EUR')
      .optional()
      .describe('the only currency a call may name in parameters.currency'),
    allowed_targets: z
      .array(z.string().min(1).max(500))
      .min(1)
      .max(50)
      .optional()
      .describe('glob patterns (* matches any run of characters) the action target must match'),
  })
  .strict();

const future = (now: () => Date) =>
  timestamp.nullable().optional().refine((v) => !v || Date.parse(v) > now().getTime(), 'must be in the future');

/** What a binding allows: shared with the Agent CRD (scripts/gen-crds.ts). */
export const bindingActions = z.array(z.string().trim().min(1).max(100)).min(1).max(50);

/** A delegation's body; `now` bounds expires_at to the future. Shared with the Agent CRD. */
export const delegationIn = (now?: () => Date) =>
  z.object({
    principal_ref: z.string().trim().min(3).max(320),
    display_name: z.string().trim().min(1).max(200),
    principal_type: z.enum(PRINCIPAL_TYPE).default('user'),
    scopes: z.array(z.string().trim().min(1).max(200)).max(100),
    expires_at: now ? future(now) : timestamp.nullable().optional(),
  });

const delegationOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  principal_ref: z.string(),
  display_name: z.string(),
  principal_type: z.enum(PRINCIPAL_TYPE),
  scopes: z.array(z.string()),
  expires_at: timestamp.nullable(),
  created_at: timestamp,
});

const bindingOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  target_kind: z.enum(TARGET_KIND),
  target_id: z.uuid(),
  actions: z.array(z.string()),
  delegated: z.boolean(),
  constraints: constraintsSchema,
  expires_at: timestamp.nullable(),
  identity_id: z.uuid().nullable(),
  created_at: timestamp,
});

const toDelegation = (row: Selectable<DelegationsTable>): z.infer<typeof delegationOut> => ({
  id: row.id,
  agent_id: row.agent_id,
  principal_ref: row.principal_ref,
  display_name: row.display_name,
  principal_type: row.principal_type as (typeof PRINCIPAL_TYPE)[number],
  scopes: row.scopes,
  expires_at: row.expires_at ? iso(row.expires_at) : null,
  created_at: iso(row.created_at),
});

const toBinding = (row: Selectable<PermissionBindingsTable>): z.infer<typeof bindingOut> => ({
  id: row.id,
  agent_id: row.agent_id,
  target_kind: row.target_kind as (typeof TARGET_KIND)[number],
  target_id: row.target_id,
  actions: row.actions,
  delegated: row.delegated,
  constraints: row.constraints,
  expires_at: row.expires_at ? iso(row.expires_at) : null,
  identity_id: row.identity_id,
  created_at: iso(row.created_at),
});

const TARGET_TABLE = {
  tool: ['tools', undefined],
  mcp_server: ['mcp_servers', undefined],
  api_resource: ['resources', 'api'],
  data_resource: ['resources', 'data'],
} as const;

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
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        const d = await tx
          .insertInto('delegations')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            agent_id: req.params.agent_id,
            principal_ref: req.body.principal_ref,
            display_name: req.body.display_name,
            principal_type: req.body.principal_type,
            scopes: req.body.scopes,
            expires_at: req.body.expires_at ? new Date(req.body.expires_at) : null,
            created_by: p.userId,
            created_at: clock.now(),
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'agent.delegation_added',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: { delegation_id: d.id, principal_ref: d.principal_ref, scopes: d.scopes },
        });
        return d;
      });
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
        body: z.object({
          target_kind: z.enum(TARGET_KIND),
          target_id: z.uuid(),
          actions: bindingActions,
          delegated: z.boolean().default(false),
          constraints: constraintsSchema.default({}),
          expires_at: future(now),
          identity_id: z.uuid().nullable().optional(),
        }),
        response: { 201: bindingOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const b = req.body;
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        const [table, resourceType] = TARGET_TABLE[b.target_kind];
        if (!(await recordExists(tx, p.orgId, table, b.target_id, resourceType))) {
          throw notFound(`No such ${b.target_kind.replace('_', ' ')} in this organisation.`);
        }
        if (b.identity_id) {
          const identity = await tx
            .selectFrom('workload_identities')
            .select('id')
            .where('org_id', '=', p.orgId)
            .where('agent_id', '=', req.params.agent_id)
            .where('id', '=', b.identity_id)
            .executeTakeFirst();
          if (!identity) throw validationFailed([{ field: 'identity_id', message: 'not an identity of this agent' }]);
        }
        const binding = await tx
          .insertInto('permission_bindings')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            agent_id: req.params.agent_id,
            target_kind: b.target_kind,
            target_id: b.target_id,
            actions: [...new Set(b.actions)],
            delegated: b.delegated,
            constraints: JSON.stringify(b.constraints),
            expires_at: b.expires_at ? new Date(b.expires_at) : null,
            identity_id: b.identity_id ?? null,
            created_by: p.userId,
            created_at: clock.now(),
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'agent.permission_bound',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: { binding_id: binding.id, target_kind: b.target_kind, target_id: b.target_id, actions: binding.actions },
        });
        return binding;
      });
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
        params: agentParams.extend({ binding_id: z.uuid() }),
        querystring: z.object({ reason: z.string().max(2000).optional() }),
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      await inScope(db, { orgId: p.orgId }, async (tx) => {
        const removed = await tx
          .deleteFrom('permission_bindings')
          .where('org_id', '=', p.orgId)
          .where('agent_id', '=', req.params.agent_id)
          .where('id', '=', req.params.binding_id)
          .returningAll()
          .executeTakeFirst();
        if (!removed) throw notFound('No such permission binding.');
        await audit(tx, req, p.orgId, {
          action: 'agent.permission_removed',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: {
            reason: req.query.reason ?? null,
            binding: { id: removed.id, target_kind: removed.target_kind, target_id: removed.target_id, actions: removed.actions, constraints: removed.constraints },
          },
        });
      });
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
      const rows = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        return tx
          .selectFrom('permission_bindings')
          .selectAll()
          .where('org_id', '=', p.orgId)
          .where('agent_id', '=', req.params.agent_id)
          .orderBy('created_at')
          .orderBy('id')
          .execute();
      });
      return { items: rows.map(toBinding) };
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
      const rows = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        return tx
          .selectFrom('delegations')
          .selectAll()
          .where('org_id', '=', p.orgId)
          .where('agent_id', '=', req.params.agent_id)
          .orderBy('created_at')
          .orderBy('id')
          .execute();
      });
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
        params: agentParams.extend({ delegation_id: z.uuid() }),
        querystring: z.object({ reason: z.string().max(2000).optional() }),
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      // The registry version moves with the delete (migration 0006's trigger on delegations), so the
      // next decision of any API process reads the agent without it.
      await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        const removed = await tx
          .deleteFrom('delegations')
          .where('org_id', '=', p.orgId)
          .where('agent_id', '=', req.params.agent_id)
          .where('id', '=', req.params.delegation_id)
          .returningAll()
          .executeTakeFirst();
        if (!removed) throw notFound('No such delegation.');
        await audit(tx, req, p.orgId, {
          action: 'agent.delegation_removed',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: {
            reason: req.query.reason ?? null,
            delegation: { id: removed.id, principal_ref: removed.principal_ref, principal_type: removed.principal_type, scopes: removed.scopes, expires_at: removed.expires_at ? iso(removed.expires_at) : null },
          },
        });
      });
      return reply.status(204).send(null);
    },
  );
}
