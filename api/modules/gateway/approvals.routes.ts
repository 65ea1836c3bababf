import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sql } from 'kysely';
import { z } from 'zod';
import { inScope, type Tx } from '../../db/database.js';
import { personOf } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { audit } from '../audit/audit.js';
import { appendEvidence } from '../evidence/chain.js';
import { expireIfDue, type ApprovalRow } from './actions.service.js';

const tags = ['Gateway: actions, decisions, approvals'];
const APPROVAL_STATUS = ['pending', 'approved', 'rejected', 'expired', 'cancelled'] as const;

const approvalOut = z.object({
  id: z.uuid(),
  status: z.enum(APPROVAL_STATUS),
  approvals_required: z.number().int(),
  expires_at: timestamp,
  created_at: timestamp,
  decided_at: timestamp.nullable(),
  action: z.object({
    id: z.uuid(),
    agent_id: z.uuid(),
    tool: z.string(),
    operation: z.string(),
    target: z.string(),
    parameters: z.unknown(),
    on_behalf_of: z.string().nullable(),
    justification: z.string().nullable(),
    reason_codes: z.array(z.string()),
  }),
  votes: z.array(z.object({ approver_id: z.uuid(), decision: z.enum(['approve', 'reject']), reason: z.string(), at: timestamp })),
});

async function approvalView(tx: Tx, approval: ApprovalRow) {
  const action = await tx.selectFrom('action_requests').selectAll().where('id', '=', approval.action_id).executeTakeFirstOrThrow();
  const votes = await tx.selectFrom('approval_votes').selectAll().where('approval_id', '=', approval.id).orderBy('created_at').orderBy('id').execute();
  return {
    id: approval.id,
    status: approval.status as (typeof APPROVAL_STATUS)[number],
    approvals_required: approval.approvals_required,
    expires_at: iso(approval.expires_at),
    created_at: iso(approval.created_at),
    decided_at: approval.decided_at ? iso(approval.decided_at) : null,
    action: {
      id: action.id,
      agent_id: action.agent_id,
      tool: action.tool,
      operation: action.operation,
      target: action.target,
      parameters: action.parameters,
      on_behalf_of: action.on_behalf_of,
      justification: action.justification,
      reason_codes: action.reason_codes,
    },
    votes: votes.map((v) => ({ approver_id: v.approver_id, decision: v.decision as 'approve' | 'reject', reason: v.reason, at: iso(v.created_at) })),
  };
}

/**
 * Who counts as "self" for an approval (docs/gateway.md): the person the action acts for, the person
 * who submitted it, and, where the organisation opts in, the agent's owners.
 */
async function isSelf(
  tx: Tx,
  orgId: string,
  approver: { email: string; userId: string },
  action: { agent_id: string; on_behalf_of: string | null; requested_by: string | null },
): Promise<boolean> {
  const email = approver.email.toLowerCase();
  const behalf = action.on_behalf_of?.toLowerCase();
  if (action.requested_by === approver.userId || behalf === email || behalf === `user:${email}`) return true;
  const org = await tx.selectFrom('organisations').select('owners_count_as_self').where('id', '=', orgId).executeTakeFirstOrThrow();
  if (!org.owners_count_as_self) return false;
  const owner = await tx
    .selectFrom('agent_owners')
    .select('id')
    .where('org_id', '=', orgId)
    .where('agent_id', '=', action.agent_id)
    .where(sql<boolean>`lower(email) = ${email}`)
    .executeTakeFirst();
  return owner !== undefined;
}

export async function approvalsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config, evidence } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/approvals',
    {
      ...caller('approval:read'),
      schema: {
        summary: 'Approval requests, newest first; pending by default',
        tags,
        querystring: pageQuery().extend({ status: z.enum(APPROVAL_STATUS).default('pending') }),
        response: { 200: pageOf(approvalOut) },
      },
    },
    async (req) => {
      const p = personOf(req);
      const scope = `approvals:${p.orgId}:${req.query.status}`;
      const after = cursors.decode(scope, req.query.cursor);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        // Approvals whose time has passed are expired before they are listed.
        const due = await tx.selectFrom('approvals').selectAll().where('org_id', '=', p.orgId).where('status', 'in', ['pending', 'approved']).where('expires_at', '<=', now).execute();
        for (const a of due) await expireIfDue(tx, a, now);
        let q = tx.selectFrom('approvals').selectAll().where('org_id', '=', p.orgId).where('status', '=', req.query.status);
        if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
        const rows = await q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(req.query.limit + 1).execute();
        const page = cursors.page(scope, rows, req.query.limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => a);
        return { items: await Promise.all(page.items.map((a) => approvalView(tx, a))), next_cursor: page.next_cursor };
      });
    },
  );

  r.get(
    '/approvals/:approval_id',
    {
      ...caller('approval:read'),
      schema: { summary: 'One approval request with its votes', tags, params: z.object({ approval_id: z.uuid() }), response: { 200: approvalOut } },
    },
    async (req) => {
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const a = await tx.selectFrom('approvals').selectAll().where('org_id', '=', p.orgId).where('id', '=', req.params.approval_id).executeTakeFirst();
        if (!a) throw notFound('No such approval.');
        return approvalView(tx, await expireIfDue(tx, a, clock.now()));
      });
    },
  );

  r.post(
    '/approvals/:approval_id/decision',
    {
      ...caller('approval:decide'),
      schema: {
        summary: 'Approve or reject; approvals needing two people take two different ones',
        tags,
        params: z.object({ approval_id: z.uuid() }),
        body: z.object({ decision: z.enum(['approve', 'reject']), reason: z.string().trim().min(3).max(2000) }),
        response: { 200: approvalOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        let approval = await tx.selectFrom('approvals').selectAll().where('org_id', '=', p.orgId).where('id', '=', req.params.approval_id).forUpdate().executeTakeFirst();
        if (!approval) throw notFound('No such approval.');
        approval = await expireIfDue(tx, approval, now);
        if (approval.status === 'expired') throw new ApiError('approval_expired');
        if (approval.status !== 'pending') throw new ApiError('approval_not_pending', `The approval is ${approval.status}.`);
        const action = await tx.selectFrom('action_requests').selectAll().where('id', '=', approval.action_id).executeTakeFirstOrThrow();
        if (await isSelf(tx, p.orgId, { email: p.email, userId: p.userId }, action)) throw new ApiError('self_approval_prohibited');
        const voted = await tx.selectFrom('approval_votes').select('id').where('approval_id', '=', approval.id).where('approver_id', '=', p.userId).executeTakeFirst();
        if (voted) throw new ApiError('duplicate_approver');
        await tx
          .insertInto('approval_votes')
          .values({ id: randomUUID(), org_id: p.orgId, approval_id: approval.id, approver_id: p.userId, decision: req.body.decision, reason: req.body.reason, created_at: now })
          .execute();
        const approvals = await tx
          .selectFrom('approval_votes')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('approval_id', '=', approval.id)
          .where('decision', '=', 'approve')
          .executeTakeFirstOrThrow();
        const status = req.body.decision === 'reject' ? 'rejected' : Number(approvals.n) >= approval.approvals_required ? 'approved' : 'pending';
        if (status !== 'pending') {
          await tx.updateTable('approvals').set({ status, decided_at: now }).where('id', '=', approval.id).execute();
          await tx.updateTable('action_requests').set({ state: status, updated_at: now }).where('id', '=', action.id).execute();
        }
        await audit(tx, req, p.orgId, { action: `approval.${req.body.decision}`, targetType: 'approval', targetId: approval.id, details: { reason: req.body.reason, status } });
        await appendEvidence(tx, evidence, p.orgId, [
          {
            eventType: 'approval',
            agentId: action.agent_id,
            actionRequestId: action.id,
            correlationId: req.id,
            payload: { approval_id: approval.id, approver_id: p.userId, decision: req.body.decision, reason: req.body.reason, status },
          },
        ], now);
        const fresh = await tx.selectFrom('approvals').selectAll().where('id', '=', approval.id).executeTakeFirstOrThrow();
        return approvalView(tx, fresh);
      });
    },
  );
}
