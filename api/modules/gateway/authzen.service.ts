import { randomUUID } from 'node:crypto';
import type { AgentPrincipal } from '../../platform/context.js';
import { ApiError, type ValidationDetail } from '../../platform/errors.js';
import { detailsOf, malformed } from '../../platform/malformed.js';
import { actionIn, agentSession, type ActionIn, type SubmissionOut } from './actions.schemas.js';
import {
  contextFields,
  evaluationIn,
  type EvaluationIn,
  type EvaluationItem,
  type EvaluationOut,
  type EvaluationsIn,
  type EvaluationsOut,
} from './authzen.schemas.js';
import type { Submitter } from './submission/records.js';

/** What an evaluation is decided by: the gateway's own SubmissionService, the one POST /actions uses. */
export interface Submissions {
  submit(who: Submitter, key: string, body: ActionIn): Promise<SubmissionOut>;
}

/** Who asks: the agent of the workload token, and the request's correlation ID. */
export interface Asker {
  agent: AgentPrincipal;
  correlationId: string;
}

/** Where each member of POST /actions' body comes from in an AuthZEN request (docs/integrations.md, Mapping). */
const SOURCE_OF: Record<string, string> = {
  tool: 'resource.id',
  operation: 'action.name',
  target: 'resource.properties.target',
  parameters: 'action.properties.parameters',
  environment: 'context.environment',
  on_behalf_of: 'context.on_behalf_of',
  justification: 'context.justification',
  approval_token: 'context.approval_token',
};

/** A submission an evaluation maps to, or why it cannot be one. */
type Mapped = { ok: { key: string; body: ActionIn; session: string | undefined } } | { invalid: ValidationDetail[] };

/**
 * The subject must be the calling agent, by id or agent URI: an agent asks for itself only, and a
 * PEP cannot use an agent's token to ask about another agent. Checked before anything is decided; no
 * lookup, so the answer says nothing about whether another subject exists, in this organisation or any.
 */
function requireSelf(agent: AgentPrincipal, subject: { type?: string; id?: string } | undefined, field: string): void {
  if (!subject || subject.type === undefined || subject.id === undefined) return;
  if (subject.type === 'agent' && (subject.id === agent.agentId || subject.id === agent.agentUri)) return;
  throw new ApiError('forbidden', 'The subject must be the agent whose token authenticates the request (type agent, its id or agent URI).', [
    { field, message: 'not the calling agent' },
  ]);
}

/** Maps one complete evaluation onto POST /actions' body, the idempotency key and the session. */
function mapEvaluation(e: EvaluationIn, prefix: string): Mapped {
  const invalid: ValidationDetail[] = [];
  if (e.resource.type !== 'tool') invalid.push({ field: `${prefix}resource.type`, message: 'Tollgate decides on tools: expected "tool"' });
  const ctx = contextFields.safeParse(e.context ?? {});
  if (!ctx.success) invalid.push(...detailsOf(ctx.error, `${prefix}context.`));
  const candidate = {
    tool: e.resource.id,
    operation: e.action.name,
    target: e.resource.properties?.target,
    parameters: e.action.properties?.parameters,
    ...(ctx.success
      ? {
          environment: ctx.data.environment,
          on_behalf_of: ctx.data.on_behalf_of,
          justification: ctx.data.justification,
          approval_token: ctx.data.approval_token,
        }
      : {}),
  };
  const body = actionIn.safeParse(candidate);
  if (!body.success) invalid.push(...detailsOf(body.error, prefix, (p) => SOURCE_OF[p.split('.')[0]!] ?? p));
  if (invalid.length > 0 || !body.success || !ctx.success) return { invalid };
  return {
    ok: {
      // A PEP that retries names the key; otherwise each evaluation is a decision of its own.
      key: ctx.data.idempotency_key ?? `authzen-${randomUUID()}`,
      body: body.data,
      session: ctx.data.session_id ?? undefined,
    },
  };
}

/** The AuthZEN answer of a gateway decision: true only for allow; the context is the gateway's answer. */
function answerOf(out: SubmissionOut): EvaluationOut {
  return {
    decision: out.decision.decision === 'allow',
    context: {
      decision: out.decision.decision,
      reason_codes: out.decision.reason_codes,
      action: out.action,
      approval: out.approval,
      execution: out.execution,
      replayed: out.replayed,
      idempotency_key: out.idempotency_key,
    },
  };
}

/** A batch item that was not decided: closed, with its error in the context (AuthZEN 1.0, Access Evaluations API, Errors). */
function closedBy(err: ApiError): EvaluationOut {
  return { decision: false, context: { error: { status: err.status, code: err.code, message: err.message, details: err.details } } };
}

/** The agent as POST /actions submits it: its session the one context.session_id names, else its token's lifetime. */
export function submitterOf(asker: Asker, sessionId: string | undefined): Submitter {
  const { agent, correlationId } = asker;
  return {
    orgId: agent.orgId,
    agentId: agent.agentId,
    identityId: agent.identityId,
    source: 'gateway',
    requestedBy: null,
    correlationId,
    session: agentSession(sessionId, agent.tokenId),
  };
}

/**
 * The Access Evaluation API: one gateway decision, exactly as POST /actions makes it (recorded with its
 * evidence, counted on the agent's budget, an allowed built-in tool run). Bad input answers 400 naming
 * the AuthZEN field; a subject other than the caller 403.
 */
export async function evaluate(submissions: Submissions, asker: Asker, request: EvaluationIn): Promise<EvaluationOut> {
  requireSelf(asker.agent, request.subject, 'subject');
  const mapped = mapEvaluation(request, '');
  if ('invalid' in mapped) throw malformed(mapped.invalid);
  const { key, body, session } = mapped.ok;
  return answerOf(await submissions.submit(submitterOf(asker, session), key, body));
}

/** An item's entity replaces the default's whole; a missing `type`, `id` or `name` falls back to the default's. */
function mergeEntity<T extends Record<string, unknown>>(given: T | undefined, fallback: T | undefined, keys: (keyof T)[]): T | undefined {
  if (!given) return fallback;
  const merged: Record<string, unknown> = { ...given };
  for (const k of keys) if (merged[k as string] === undefined && fallback?.[k] !== undefined) merged[k as string] = fallback[k];
  return merged as T;
}

function merge(defaults: EvaluationItem, item: EvaluationItem): EvaluationItem {
  return {
    subject: mergeEntity(item.subject, defaults.subject, ['type', 'id']),
    action: mergeEntity(item.action, defaults.action, ['name']),
    resource: mergeEntity(item.resource, defaults.resource, ['type', 'id']),
    context: item.context ?? defaults.context,
  };
}

/**
 * The Access Evaluations API. Without `evaluations` (or with an empty array) it is the Access
 * Evaluation API on the top-level members. Otherwise each item, merged with the top-level defaults, is
 * a gateway decision of its own: execute_all submits them together (they share group commits);
 * deny_on_first_deny and permit_on_first_permit decide them in order and stop at the first false or
 * true decision, so the items after it are never decided nor recorded. An item that is incomplete or
 * refused by the gateway (409, 429) is closed with its error, as the spec says; a subject other than
 * the caller in any item refuses the whole request (403) before anything is decided.
 */
export async function evaluateBatch(submissions: Submissions, asker: Asker, request: EvaluationsIn): Promise<EvaluationsOut> {
  const { evaluations, options, ...defaults } = request;
  if (!evaluations || evaluations.length === 0) {
    requireSelf(asker.agent, defaults.subject, 'subject');
    const single = evaluationIn.safeParse(defaults);
    if (!single.success) throw malformed(detailsOf(single.error, ''));
    return evaluate(submissions, asker, single.data);
  }

  const items = evaluations.map((item) => merge(defaults, item));
  items.forEach((item, i) => requireSelf(asker.agent, item.subject, `evaluations.${i}.subject`));
  const mapped: Mapped[] = items.map((item, i) => {
    const prefix = `evaluations.${i}.`;
    const complete = evaluationIn.safeParse(item);
    return complete.success ? mapEvaluation(complete.data, prefix) : { invalid: detailsOf(complete.error, prefix) };
  });

  const decideOne = async (m: Mapped): Promise<EvaluationOut> => {
    if ('invalid' in m) return closedBy(malformed(m.invalid, 'This evaluation is malformed; nothing was decided for it.'));
    try {
      return answerOf(await submissions.submit(submitterOf(asker, m.ok.session), m.ok.key, m.ok.body));
    } catch (err) {
      // An expected refusal of this one submission; anything else (the database gone) fails the request.
      if (err instanceof ApiError) return closedBy(err);
      throw err;
    }
  };

  const semantic = options?.evaluations_semantic ?? 'execute_all';
  if (semantic === 'execute_all') return { evaluations: await Promise.all(mapped.map(decideOne)) };
  const stopAt = semantic === 'deny_on_first_deny' ? false : true;
  const out: EvaluationOut[] = [];
  for (const m of mapped) {
    const answer = await decideOne(m);
    out.push(answer);
    if (answer.decision === stopAt) break;
  }
  return { evaluations: out };
}
