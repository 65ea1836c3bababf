import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { enforceLimit } from '../../platform/rate-limit.js';
import { caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { agentParams } from '../agents/index.js';
import type { IdentityRow } from './identities.repository.js';
import { afterAnswer } from './secrets.js';
import { exchangeClientCredentials, identitiesOf, issueIdentity, revokeIdentity } from './identities.service.js';

const tags = ['Agent registry and identities'];

const identityOut = z.object({
  id: z.uuid(),
  agent_id: z.uuid(),
  client_id: z.string(),
  status: z.enum(['active', 'revoked']),
  created_at: timestamp,
  revoked_at: timestamp.nullable(),
  last_used_at: timestamp.nullable(),
});

const toIdentity = (i: IdentityRow) => ({
  id: i.id,
  agent_id: i.agent_id,
  client_id: i.client_id,
  status: i.status as 'active' | 'revoked',
  created_at: iso(i.created_at),
  revoked_at: i.revoked_at ? iso(i.revoked_at) : null,
  last_used_at: i.last_used_at ? iso(i.last_used_at) : null,
});

export async function identitiesRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config, tokens, revocations } = app.deps;

  r.post(
    '/agents/:agent_id/identities',
    {
      ...caller('identity:manage'),
      schema: {
        summary: 'Issue a workload identity: a client ID and a secret shown this once',
        tags,
        params: agentParams,
        response: { 201: identityOut.extend({ client_secret: z.string() }) },
      },
    },
    async (req, reply) => {
      const { identity, secret } = await issueIdentity(db, req, clock, config.secretPepper, actorOf(req), req.params.agent_id);
      return reply.status(201).send({ ...toIdentity(identity), client_secret: secret });
    },
  );

  r.get(
    '/identities',
    {
      ...caller('identity:read'),
      schema: {
        summary: 'Workload identities, optionally of one agent; secrets are never returned',
        tags,
        querystring: z.object({ agent_id: z.uuid().optional() }),
        response: { 200: z.object({ items: z.array(identityOut) }) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const rows = await identitiesOf(db, p.orgId, req.query.agent_id);
      return { items: rows.map(toIdentity) };
    },
  );

  r.post(
    '/identities/:identity_id/revoke',
    {
      ...caller('identity:manage'),
      schema: {
        summary: 'Revoke a workload identity: its tokens stop working',
        tags,
        params: z.object({ identity_id: z.uuid() }),
        body: reasonBody,
        response: { 200: identityOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = actorOf(req);
      const row = await revokeIdentity(db, req, clock, revocations, p.orgId, req.params.identity_id, req.body.reason);
      return toIdentity(row);
    },
  );

  r.post(
    '/identities/token',
    {
      ...caller('client', 'token'),
      schema: {
        summary: 'Exchange client credentials for a 300-second agent token',
        tags: ['Authentication and accounts'],
        body: z.object({
          grant_type: z.literal('client_credentials'),
          client_id: z.string().max(80),
          client_secret: z.string().max(200),
        }),
        response: {
          200: z.object({
            access_token: z.string(),
            token_type: z.literal('Bearer'),
            expires_in: z.number().int(),
            agent_uri: z.string(),
          }),
        },
      },
    },
    async (req) => {
      // Unknown client IDs must not buy unlimited guesses: exchanges are limited per client address.
      await enforceLimit(app.deps.hits, `token-ip:${req.ip}`, config.rateLimits.tokenPerIpPerMinute);
      const { client_id, client_secret } = req.body;
      const issued = await exchangeClientCredentials(
        { db, clock, tokens, pepper: config.secretPepper, afterAnswer: afterAnswer((err) => req.log.error({ err }, 'refused token exchange not audited')), metrics: app.deps.metrics },
        { clientId: client_id, clientSecret: client_secret },
        req.id,
      );
      return { access_token: issued.token, token_type: 'Bearer' as const, expires_in: issued.expiresIn, agent_uri: issued.agentUri };
    },
  );
}
