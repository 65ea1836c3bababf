import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { agentOf } from '../../platform/auth.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { answerMalformedWith400, refuseDuplicateKeys } from '../../platform/malformed.js';
import type { Asker } from './authzen.service.js';
import { checkBody, checkHeaders, checkOut, checkParams, DECISION_HEADER, EXT_AUTHZ_MCP_PATH } from './ext-authz.schemas.js';
import { checkMcp } from './ext-authz.service.js';

const tags = ['Gateway: AuthZEN decision API'];
const path = `${EXT_AUTHZ_MCP_PATH}/:prefix/*`;

const askerOf = (req: FastifyRequest): Asker => ({ agent: agentOf(req), correlationId: req.id });

/**
 * The MCP external-authorisation check for proxies whose HTTP ext_authz allows on a 2xx and denies
 * otherwise (Envoy's `http_service`, agentgateway's `protocol.http`), which therefore cannot use the
 * AuthZEN endpoints (a denial there is a 200). The proxy sends the agent's request as it came (method,
 * path behind a prefix, the headers it is told to pass, the body); Tollgate decides its tools/calls
 * through `app.deps.submissions`, as the sidecar's MCP proxy does, and answers 200 or 403
 * (docs/integrations.md). A malformed request answers 400, which the proxy passes to the client.
 */
export async function extAuthzRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { submissions } = app.deps;
  answerMalformedWith400(app);
  refuseDuplicateKeys(app);

  r.post(
    path,
    {
      // The agent's own token, as the proxy forwards it; each tools/call counted on its gateway budget.
      ...beyondSpec(caller('agent', 'gateway_submission')),
      schema: {
        summary: "MCP ext_authz check: decide every tools/call of the agent's MCP request (HTTP external authorisation: 200 allows, 403 denies)",
        tags,
        params: checkParams,
        headers: checkHeaders,
        body: checkBody.nullish(),
        response: { 200: checkOut },
      },
    },
    async (req, reply) => {
      const { out, headers } = await checkMcp(submissions, askerOf(req), {
        prefix: req.params.prefix,
        session: req.headers['tollgate-session'],
        partial: req.headers['x-envoy-auth-partial-body'] === 'true',
        body: req.body,
      });
      reply.headers(headers);
      return out;
    },
  );

  // The rest of MCP's streamable HTTP: the GET that opens the server's SSE stream and the DELETE that
  // ends a session carry no tool call, so an agent with a valid token passes; other methods answer 405.
  r.route({
    method: ['GET', 'DELETE'],
    url: path,
    // One request, one hit on the agent's gateway budget (the rate limiter's `gateway` group).
    ...beyondSpec(caller('agent')),
    schema: {
      summary: "MCP ext_authz check of the agent's SSE stream (GET) or session end (DELETE): no tool call in them, so a valid agent token is allowed",
      tags,
      params: checkParams,
      response: { 200: checkOut },
    },
    handler: async (req, reply) => {
      agentOf(req);
      reply.header(DECISION_HEADER, 'allow');
      return { decision: 'allow' as const, decisions: [] };
    },
  });
}
