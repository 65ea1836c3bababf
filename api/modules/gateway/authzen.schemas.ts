import { z } from 'zod';
import { actionIn, approvalSummary, IDEMPOTENCY_KEY, SESSION_ID, STATES } from './actions.schemas.js';

/**
 * The OpenID AuthZEN Authorization API 1.0 evaluation endpoints (docs/integrations.md): the shapes of
 * the spec's Subject, Action, Resource and Context, and what Tollgate reads of them. Unknown members
 * are ignored, as the spec asks for forward compatibility (zod strips them).
 */

/**
 * Where the AuthZEN endpoints live under /api/v1: the spec's `/access/v1/...` paths. The PDP metadata
 * (api/app.ts, /.well-known/authzen-configuration) names them from here, so they cannot drift.
 */
export const AUTHZEN_EVALUATION_PATH = '/access/v1/evaluation';
export const AUTHZEN_EVALUATIONS_PATH = '/access/v1/evaluations';

/** At most this many evaluations in one batch: each is a gateway decision of its own, recorded and counted on the agent's budget. */
export const MAX_EVALUATIONS = 50;

export const EVALUATIONS_SEMANTICS = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] as const;

/** Properties and context are open JSON objects in AuthZEN; Tollgate reads the members it names and ignores the rest. */
const properties = z.record(z.string(), z.unknown());

const subject = z.object({
  type: z.string().min(1).max(100),
  id: z.string().min(1).max(500),
  properties: properties.optional(),
});
const resource = z.object({
  type: z.string().min(1).max(100),
  id: z.string().min(1).max(500),
  properties: properties.optional(),
});
const action = z.object({
  name: z.string().min(1).max(100),
  properties: properties.optional(),
});

/** An Access Evaluation request: subject, action and resource are required (AuthZEN 1.0, Access Evaluation API). */
export const evaluationIn = z.object({
  subject: subject.describe('The agent whose token authenticates the request: type `agent`, id its id or its agent URI'),
  action: action.describe('`name` is the operation (for example `invoke`); `properties.parameters` the call\'s parameters'),
  resource: resource.describe('type `tool`, id the tool key; `properties.target` the target URI'),
  context: properties
    .optional()
    .describe('justification, on_behalf_of, environment, session_id, idempotency_key, approval_token; other members are ignored'),
});
export type EvaluationIn = z.output<typeof evaluationIn>;

/**
 * In a batch every member may come from the top-level defaults, so nothing is required in an item or
 * a default; an item's entity replaces the default's whole, except that a missing `type` or `id` falls
 * back to the default's (the certification scenario's entity-level merging).
 */
const partial = <T extends z.ZodRawShape>(o: z.ZodObject<T>) => o.partial();
const evaluationItem = z.object({
  subject: partial(subject).optional(),
  action: partial(action).optional(),
  resource: partial(resource).optional(),
  context: properties.optional(),
});
export type EvaluationItem = z.output<typeof evaluationItem>;

export const evaluationsIn = evaluationItem.extend({
  evaluations: z
    .array(evaluationItem)
    .max(MAX_EVALUATIONS)
    .optional()
    .describe(`Up to ${MAX_EVALUATIONS} evaluations; without it (or empty) the request is a single evaluation of the top-level members`),
  options: z
    .object({ evaluations_semantic: z.enum(EVALUATIONS_SEMANTICS).default('execute_all') })
    .optional()
    .describe('evaluations_semantic: execute_all (the default), deny_on_first_deny or permit_on_first_permit; other options are ignored'),
});
export type EvaluationsIn = z.output<typeof evaluationsIn>;

/** The members of `context` Tollgate reads, as POST /actions takes them. */
export const contextFields = z.object({
  justification: actionIn.shape.justification,
  on_behalf_of: actionIn.shape.on_behalf_of,
  environment: actionIn.shape.environment,
  // As POST /actions' Tollgate-Session header: the agent's session for flow rules, else its token's lifetime.
  session_id: z.string().regex(SESSION_ID, '1-200 characters of A-Z a-z 0-9 . _ : -').nullable().optional(),
  idempotency_key: z.string().regex(IDEMPOTENCY_KEY, '8-200 characters of A-Z a-z 0-9 . _ : -').optional(),
  approval_token: actionIn.shape.approval_token,
});

/** What Tollgate adds to a decision: the gateway's answer, as POST /actions gives it, with its decision flattened. */
const decisionContext = z.object({
  decision: z.enum(['allow', 'deny', 'require_approval']).describe("Tollgate's decision; only `allow` is `decision: true`"),
  reason_codes: z.array(z.string()),
  action: z.object({ id: z.uuid(), status: z.enum(STATES) }).describe('The recorded action: GET /actions/{id}, GET /actions/gateway/{id}'),
  approval: approvalSummary.nullable().describe('For require_approval: the approval the agent waits for (GET /actions/gateway/{action_id} hands out its token)'),
  execution: z.object({ status: z.string(), output_redacted: z.unknown() }).nullable(),
  replayed: z.boolean(),
  idempotency_key: z.string(),
});

/** An evaluation that could not be decided (a batch item that is incomplete or refused): closed, with the error. */
const errorContext = z.object({
  error: z.object({ status: z.number().int(), code: z.string(), message: z.string(), details: z.unknown() }),
});

export const evaluationOut = z.object({
  decision: z.boolean(),
  context: z.union([decisionContext, errorContext]),
});
export type EvaluationOut = z.infer<typeof evaluationOut>;

export const evaluationsOut = z.object({
  decision: z.boolean().optional().describe('Only when the request had no evaluations (a single evaluation)'),
  context: z.union([decisionContext, errorContext]).optional(),
  evaluations: z
    .array(evaluationOut)
    .optional()
    .describe('In the order of the request; shorter when deny_on_first_deny or permit_on_first_permit stopped early'),
});
export type EvaluationsOut = z.infer<typeof evaluationsOut>;
