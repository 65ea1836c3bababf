import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { agentOf } from '../../platform/auth.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { AUTHZEN_EVALUATION_PATH, AUTHZEN_EVALUATIONS_PATH, evaluationIn, evaluationOut, evaluationsIn, evaluationsOut } from './authzen.schemas.js';
import { evaluate, evaluateBatch, type Asker } from './authzen.service.js';
import { answerMalformedWith400 } from '../../platform/malformed.js';

const tags = ['Gateway: AuthZEN decision API'];

/**
 * AuthZEN asks the PDP to answer a request's X-Request-ID in its response (HTTPS binding, Request
 * Identification), errors included. Node's HTTP parser has already refused header values that could
 * not be sent back.
 */
async function echoRequestId(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const id = req.headers['x-request-id'];
  if (typeof id === 'string' && id.length <= 200) reply.header('x-request-id', id);
  return payload;
}

const askerOf = (req: FastifyRequest): Asker => ({ agent: agentOf(req), correlationId: req.id });

/**
 * The OpenID AuthZEN Authorization API 1.0 evaluation endpoints: Tollgate as the decision point of an
 * Envoy, MCP gateway or any AuthZEN PEP. They decide through the app's one SubmissionService
 * (`app.deps.submissions`), so that an evaluation is a gateway decision like POST /actions: the same group
 * commit, idempotency, budget, evidence and execution.
 */
export async function authzenRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { submissions } = app.deps;
  answerMalformedWith400(app);
  // This plugin's own hook, for these two operations only; onSend, so that refusals (400, 401) carry it too.
  app.addHook('onSend', echoRequestId);

  r.post(
    AUTHZEN_EVALUATION_PATH,
    {
      // The agent's workload token, counted on its gateway budget as POST /actions.
      ...beyondSpec(caller('agent', 'gateway_submission')),
      schema: {
        summary: 'AuthZEN Access Evaluation: decide one tool call of the calling agent (recorded as POST /actions records it)',
        tags,
        body: evaluationIn,
        response: { 200: evaluationOut },
      },
    },
    async (req) => evaluate(submissions, askerOf(req), req.body),
  );

  r.post(
    AUTHZEN_EVALUATIONS_PATH,
    {
      ...beyondSpec(caller('agent', 'gateway_submission')),
      schema: {
        summary: 'AuthZEN Access Evaluations: decide several tool calls of the calling agent, with defaults and evaluation semantics',
        tags,
        body: evaluationsIn,
        response: { 200: evaluationsOut },
      },
    },
    async (req) => evaluateBatch(submissions, askerOf(req), req.body),
  );
}
