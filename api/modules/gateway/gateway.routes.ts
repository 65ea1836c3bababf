import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { agentOf, personOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { PRIVILEGE_CLASS } from '../shared/index.js';
import { toAction } from './actions.repository.js';
import { actionIn, agentSession, approvalSummary, idempotencyHeaders, STATES, submissionHeaders, submissionOut } from './actions.schemas.js';
import { actionsPage, agentAction, cancelAction, executionsPage, readAction, requireAgent } from './actions.service.js';
import { toDenyClass } from './deny-classes.repository.js';
import { addDenyClass, liftDenyClass } from './deny-classes.service.js';
import { permissionsOut } from './permissions.schemas.js';
import { ApprovalTokens } from './submission/approval-tokens.js';
import { agentPermissions } from './permissions.service.js';

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
  const { db, clock, config, snapshots, submissions } = app.deps;
  const tokens = new ApprovalTokens(config.tokenSigningSeed);
  const cursors = new Cursors(config.sessionSecret);

  r.post(
    '/actions',
    {
      // Counted against the agent's gateway budget inside the submission's batch (SubmissionService).
      ...caller('agent', 'gateway_submission'),
      schema: {
        summary: 'Submit a proposed tool call: decided, run only when allowed, recorded as evidence',
        tags,
        headers: submissionHeaders,
        body: actionIn,
        response: { 200: submissionOut },
      },
    },
    async (req) => {
      const agent = agentOf(req);
      return submissions.submit(
        {
          orgId: agent.orgId,
          agentId: agent.agentId,
          identityId: agent.identityId,
          source: 'gateway',
          requestedBy: null,
          correlationId: req.id,
          session: agentSession(req.headers['tollgate-session'], agent.tokenId),
        },
        req.headers['idempotency-key'],
        req.body,
      );
    },
  );

  // An extension: the agent's own containment and callable tools, for the sidecar's filtered tools/list.
  r.get(
    '/gateway/permissions',
    {
      ...beyondSpec(caller('agent')),
      schema: { summary: "The calling agent's containment state and the tools it may invoke", tags, response: { 200: permissionsOut } },
    },
    async (req) => agentPermissions({ db, clock, snapshots }, agentOf(req)),
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
      await requireAgent(db, p.orgId, agent_id);
      return submissions.submit(
        { orgId: p.orgId, agentId: agent_id, identityId: null, source: 'console', requestedBy: p.userId, correlationId: req.id, session: null },
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
      const { action, approval, token } = await agentAction(db, clock, tokens, agent, req.params.action_id);
      return {
        id: action.id,
        state: action.state as (typeof STATES)[number],
        decision: action.decision as 'allow' | 'deny' | 'require_approval',
        reason_codes: action.reason_codes,
        approval: approval
          ? {
              id: approval.id,
              status: approval.status as 'pending',
              approvals_required: approval.approvals_required,
              expires_at: iso(approval.expires_at),
              ...(token ? { approval_token: token } : {}),
            }
          : null,
      };
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
      const rows = await actionsPage(db, p.orgId, { agent_id, state, decision, tool }, after, limit + 1);
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
      return toAction(await readAction(db, p.orgId, req.params.action_id));
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
      return toAction(await cancelAction(db, clock, req, p.orgId, req.params.action_id, req.body.reason));
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
      const rule = await addDenyClass(db, clock, req, p, {
        privilegeClass: req.body.privilege_class,
        agentId: req.body.agent_id ?? null,
        reason: req.body.reason,
      });
      return toDenyClass(rule);
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
      return toDenyClass(await liftDenyClass(db, clock, req, p, req.body.rule_id, req.body.reason));
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
      const rows = await actionsPage(db, p.orgId, { decision: req.query.decision }, after, req.query.limit + 1);
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
      const rows = await executionsPage(db, p.orgId, after, req.query.limit + 1);
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
}
