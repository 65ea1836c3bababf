import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sql } from 'kysely';
import { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import { agentOf, personOf } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { agentOr404 } from '../agents/agents.routes.js';
import { auditWithEvidence } from '../evidence/record.js';
import { PRIVILEGE_CLASS } from '../shared/enums.js';
import { actionIn, approvalSummary, idempotencyHeaders, STATES, submissionOut } from './actions.schemas.js';
import { ActionsService, expireIfDue, type ActionRow } from './actions.service.js';
import { cancelApprovals } from './approvals.repository.js';
import { approvalsRoutes } from './approvals.routes.js';

const tags = ['Gateway: actions, decisions, approvals'];

const actionOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  source: z.enum(['gateway', 'console']),
  idempotency_key: z.string(),
  tool: z.string(),
  operation: z.string(),
  target: z.string(),
  parameters: z.unknown(),
  environment: z.string().nullable(),
  on_behalf_of: z.string().nullable(),
  justification: z.string().nullable(),
  state: z.enum(STATES),
  decision: z.enum(['allow', 'deny', 'require_approval']),
  reason_codes: z.array(z.string()),
  trace: z.unknown(),
  approvals_required: z.number().int(),
  execution_status: z.string().nullable(),
  output_redacted: z.unknown(),
  correlation_id: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
  executed_at: timestamp.nullable(),
});

export const toAction = (a: ActionRow) => ({
  id: a.id,
  agent_id: a.agent_id,
  source: a.source as 'gateway' | 'console',
  idempotency_key: a.idempotency_key,
  tool: a.tool,
  operation: a.operation,
  target: a.target,
  parameters: a.parameters,
  environment: a.environment,
  on_behalf_of: a.on_behalf_of,
  justification: a.justification,
  state: a.state as (typeof STATES)[number],
  decision: a.decision as 'allow' | 'deny' | 'require_approval',
  reason_codes: a.reason_codes,
  trace: a.trace,
  approvals_required: a.approvals_required,
  execution_status: a.execution_status,
  output_redacted: a.output_redacted,
  correlation_id: a.correlation_id,
  created_at: iso(a.created_at),
  updated_at: iso(a.updated_at),
  executed_at: a.executed_at ? iso(a.executed_at) : null,
});

export async function actionOr404(tx: Tx, orgId: string, id: string, lock = false) {
  const q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound('No such action.');
  return row;
}

const denyClassOut = z.object({
  rule_id: z.string(),
  privilege_class: z.enum(PRIVILEGE_CLASS),
  agent_id: z.uuid().nullable(),
  reason: z.string(),
  created_at: timestamp,
  lifted_at: timestamp.nullable(),
});

export async function gatewayRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const service = new ActionsService(app);
  const cursors = new Cursors(config.sessionSecret);

  r.post(
    '/actions',
    {
      // Counted against the agent's gateway budget inside the submission's batch (ActionsService).
      ...caller('agent', 'gateway_submission'),
      schema: {
        summary: 'Submit a proposed tool call: decided, run only when allowed, recorded as evidence',
        tags,
        headers: idempotencyHeaders,
        body: actionIn,
        response: { 200: submissionOut },
      },
    },
    async (req) => {
      const agent = agentOf(req);
      return service.submit(
        { orgId: agent.orgId, agentId: agent.agentId, identityId: agent.identityId, source: 'gateway', requestedBy: null, correlationId: req.id },
        req.headers['idempotency-key'],
        req.body,
      );
    },
  );

  r.post(
    '/actions/console',
    {
      ...caller('action:test'),
      schema: {
        summary: "Submit an action on an agent's behalf from the console (simulated executors)",
        tags,
        headers: idempotencyHeaders,
        body: actionIn.extend({ agent_id: z.uuid() }),
        response: { 200: submissionOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      const { agent_id, ...body } = req.body;
      await inScope(db, { orgId: p.orgId }, (tx) => agentOr404(tx, p.orgId, agent_id));
      return service.submit(
        { orgId: p.orgId, agentId: agent_id, identityId: null, source: 'console', requestedBy: p.userId, correlationId: req.id },
        req.headers['idempotency-key'],
        body,
      );
    },
  );

  r.get(
    '/actions/gateway/:action_id',
    {
      ...caller('agent'),
      schema: {
        summary: "The requesting agent's view of its action, with the approval token once approved",
        tags,
        params: z.object({ action_id: z.uuid() }),
        response: {
          200: z.object({
            id: z.uuid(),
            state: z.enum(STATES),
            decision: z.enum(['allow', 'deny', 'require_approval']),
            reason_codes: z.array(z.string()),
            approval: approvalSummary.extend({ approval_token: z.string().optional() }).nullable(),
          }),
        },
      },
    },
    async (req) => {
      const agent = agentOf(req);
      return inScope(db, { orgId: agent.orgId }, async (tx) => {
        const action = await actionOr404(tx, agent.orgId, req.params.action_id);
        if (action.agent_id !== agent.agentId) throw notFound('No such action.');
        let approval = await tx.selectFrom('approvals').selectAll().where('action_id', '=', action.id).executeTakeFirst();
        if (approval) approval = await expireIfDue(tx, approval, clock.now());
        const fresh = await actionOr404(tx, agent.orgId, action.id);
        const showToken = approval?.status === 'approved' && !approval.token_used_at;
        return {
          id: fresh.id,
          state: fresh.state as (typeof STATES)[number],
          decision: fresh.decision as 'allow' | 'deny' | 'require_approval',
          reason_codes: fresh.reason_codes,
          approval: approval
            ? {
                id: approval.id,
                status: approval.status as 'pending',
                approvals_required: approval.approvals_required,
                expires_at: iso(approval.expires_at),
                ...(showToken ? { approval_token: service.tokens.token(approval.id, approval.request_hash) } : {}),
              }
            : null,
        };
      });
    },
  );

  r.get(
    '/actions',
    {
      ...caller('action:read'),
      schema: {
        summary: 'Actions, newest first',
        tags,
        querystring: pageQuery().extend({
          agent_id: z.uuid().optional(),
          state: z.enum(STATES).optional(),
          decision: z.enum(['allow', 'deny', 'require_approval']).optional(),
          tool: z.string().max(200).optional(),
        }),
        response: { 200: pageOf(actionOut) },
      },
    },
    async (req) => {
      const p = personOf(req);
      const { limit, cursor, agent_id, state, decision, tool } = req.query;
      const scope = `actions:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', p.orgId);
        if (agent_id) q = q.where('agent_id', '=', agent_id);
        if (state) q = q.where('state', '=', state);
        if (decision) q = q.where('decision', '=', decision);
        if (tool) q = q.where('tool', '=', tool);
        if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
        return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
      });
      return cursors.page(scope, rows, limit, (a) => ({ t: iso(a.created_at), id: a.id }), toAction);
    },
  );

  r.get(
    '/actions/:action_id',
    {
      ...caller('action:read'),
      schema: { summary: 'One action with its decision trace and execution', tags, params: z.object({ action_id: z.uuid() }), response: { 200: actionOut } },
    },
    async (req) => {
      const p = personOf(req);
      return toAction(await inScope(db, { orgId: p.orgId }, (tx) => actionOr404(tx, p.orgId, req.params.action_id)));
    },
  );

  r.post(
    '/actions/:action_id/cancel',
    {
      ...caller('action:control'),
      schema: {
        summary: 'Cancel an action waiting for approval (or approved and not yet run)',
        tags,
        params: z.object({ action_id: z.uuid() }),
        body: reasonBody,
        response: { 200: actionOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        const action = await actionOr404(tx, p.orgId, req.params.action_id, true);
        let approval = await tx.selectFrom('approvals').selectAll().where('action_id', '=', action.id).forUpdate().executeTakeFirst();
        if (approval) approval = await expireIfDue(tx, approval, now);
        const open = approval && (approval.status === 'pending' || (approval.status === 'approved' && !approval.token_used_at));
        if (!approval || !open) throw new ApiError('conflict', `The action is ${action.state}; only an action awaiting approval or resubmission can be cancelled.`);
        await cancelApprovals(tx, [approval], now);
        await auditWithEvidence(
          tx,
          req,
          p.orgId,
          { action: 'action.cancelled', targetType: 'action', targetId: action.id, details: { reason: req.body.reason } },
          { eventType: 'approval_cancelled', agentId: action.agent_id, actionRequestId: action.id, payload: { approval_id: approval.id, reason: req.body.reason } },
        );
        return toAction(await actionOr404(tx, p.orgId, action.id));
      });
    },
  );

  r.post(
    '/actions/deny-class',
    {
      ...caller('action:control'),
      schema: {
        summary: 'Deny a privilege class for every agent, or for one',
        tags,
        body: reasonBody.extend({ privilege_class: z.enum(PRIVILEGE_CLASS), agent_id: z.uuid().nullable().optional() }),
        response: { 200: denyClassOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        if (req.body.agent_id) await agentOr404(tx, p.orgId, req.body.agent_id);
        const rule = await tx
          .insertInto('deny_class_rules')
          .values({
            id: `DC-${randomBytes(5).toString('hex').toUpperCase()}`,
            org_id: p.orgId,
            privilege_class: req.body.privilege_class,
            agent_id: req.body.agent_id ?? null,
            reason: req.body.reason,
            created_by: p.userId,
            created_at: now,
            lifted_at: null,
            lifted_by: null,
            lift_reason: null,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await auditWithEvidence(
          tx,
          req,
          p.orgId,
          { action: 'deny_class.added', targetType: 'deny_class_rule', targetId: rule.id, details: { privilege_class: rule.privilege_class, agent_id: rule.agent_id, reason: rule.reason } },
          { eventType: 'containment', agentId: rule.agent_id, payload: { action: 'deny_class', rule_id: rule.id, privilege_class: rule.privilege_class, reason: rule.reason } },
        );
        return toDenyClass(rule);
      });
    },
  );

  r.post(
    '/actions/deny-class/lift',
    {
      ...caller('action:control'),
      schema: {
        summary: 'Lift a deny-class rule',
        tags,
        body: reasonBody.extend({ rule_id: z.string().min(1).max(40) }),
        response: { 200: denyClassOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        const rule = await tx.selectFrom('deny_class_rules').selectAll().where('org_id', '=', p.orgId).where('id', '=', req.body.rule_id).forUpdate().executeTakeFirst();
        if (!rule) throw notFound('No such deny-class rule.');
        if (rule.lifted_at) throw new ApiError('conflict', 'The rule is already lifted.');
        const lifted = await tx
          .updateTable('deny_class_rules')
          .set({ lifted_at: now, lifted_by: p.userId, lift_reason: req.body.reason })
          .where('id', '=', rule.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await auditWithEvidence(
          tx,
          req,
          p.orgId,
          { action: 'deny_class.lifted', targetType: 'deny_class_rule', targetId: rule.id, details: { reason: req.body.reason } },
          { eventType: 'containment', agentId: rule.agent_id, payload: { action: 'deny_class_lifted', rule_id: rule.id, reason: req.body.reason } },
        );
        return toDenyClass(lifted);
      });
    },
  );

  r.get(
    '/decisions',
    {
      ...caller('action:read'),
      schema: {
        summary: 'Decisions, newest first',
        tags,
        querystring: pageQuery().extend({ decision: z.enum(['allow', 'deny', 'require_approval']).optional() }),
        response: {
          200: pageOf(
            z.object({
              action_id: z.uuid(),
              agent_id: z.uuid(),
              tool: z.string(),
              decision: z.enum(['allow', 'deny', 'require_approval']),
              reason_codes: z.array(z.string()),
              decided_at: timestamp,
            }),
          ),
        },
      },
    },
    async (req) => {
      const p = personOf(req);
      const scope = `decisions:${p.orgId}`;
      const after = cursors.decode(scope, req.query.cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', p.orgId);
        if (req.query.decision) q = q.where('decision', '=', req.query.decision);
        if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
        return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(req.query.limit + 1).execute();
      });
      return cursors.page(scope, rows, req.query.limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => ({
        action_id: a.id,
        agent_id: a.agent_id,
        tool: a.tool,
        decision: a.decision as 'allow',
        reason_codes: a.reason_codes,
        decided_at: iso(a.updated_at),
      }));
    },
  );

  r.get(
    '/executions',
    {
      ...caller('action:read'),
      schema: {
        summary: 'Executions of allowed actions, newest first',
        tags,
        querystring: pageQuery(),
        response: {
          200: pageOf(
            z.object({ action_id: z.uuid(), agent_id: z.uuid(), tool: z.string(), status: z.string(), output_redacted: z.unknown(), executed_at: timestamp.nullable() }),
          ),
        },
      },
    },
    async (req) => {
      const p = personOf(req);
      const scope = `executions:${p.orgId}`;
      const after = cursors.decode(scope, req.query.cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', p.orgId).where('execution_status', 'is not', null);
        if (after) q = q.where(sql<boolean>`(updated_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
        return q.orderBy('updated_at', 'desc').orderBy('id', 'desc').limit(req.query.limit + 1).execute();
      });
      return cursors.page(scope, rows, req.query.limit, (a) => ({ t: iso(a.updated_at), id: a.id }), (a) => ({
        action_id: a.id,
        agent_id: a.agent_id,
        tool: a.tool,
        status: a.execution_status!,
        output_redacted: a.output_redacted,
        executed_at: a.executed_at ? iso(a.executed_at) : null,
      }));
    },
  );

  await approvalsRoutes(app);
}

const toDenyClass = (r: { id: string; privilege_class: string; agent_id: string | null; reason: string; created_at: Date; lifted_at: Date | null }) => ({
  rule_id: r.id,
  privilege_class: r.privilege_class as (typeof PRIVILEGE_CLASS)[number],
  agent_id: r.agent_id,
  reason: r.reason,
  created_at: iso(r.created_at),
  lifted_at: r.lifted_at ? iso(r.lifted_at) : null,
});
