import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { sql, type Selectable } from 'kysely';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import type { WorkloadIdentitiesTable } from '../../db/schema.js';
import { actorOf } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { enforceLimit } from '../../platform/rate-limit.js';
import { caller } from '../../platform/route.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { agentOr404 } from '../agents/agents.routes.js';
import { agentParams } from '../agents/agents.schemas.js';
import { agentUri } from '../agents/agents.repository.js';
import { audit } from '../audit/audit.js';
import { recordAudit } from '../audit/audit.repository.js';
import { hashSecret, newClientId, newClientSecret, UNKNOWN_CLIENT_HASH, verifySecret } from './secrets.js';

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

const toIdentity = (i: Omit<Selectable<WorkloadIdentitiesTable>, 'secret_hash'>) => ({
  id: i.id,
  agent_id: i.agent_id,
  client_id: i.client_id,
  status: i.status as 'active' | 'revoked',
  created_at: iso(i.created_at),
  revoked_at: i.revoked_at ? iso(i.revoked_at) : null,
  last_used_at: i.last_used_at ? iso(i.last_used_at) : null,
});

const publicColumns = ['id', 'org_id', 'agent_id', 'client_id', 'status', 'created_by', 'created_at', 'revoked_at', 'last_used_at'] as const;

interface ClientRow {
  identity_id: string;
  org_id: string;
  agent_id: string;
  secret_hash: string;
  identity_status: string;
  agent_status: string;
  session_epoch: number;
  agent_slug: string;
  org_slug: string;
}

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
      const p = actorOf(req);
      const secret = newClientSecret();
      const secretHash = await hashSecret(secret, config.secretPepper);
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const agent = await agentOr404(tx, p.orgId, req.params.agent_id);
        if (agent.status === 'revoked') throw new ApiError('conflict', 'The agent is revoked; it gets no new identity.');
        const identity = await tx
          .insertInto('workload_identities')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            agent_id: agent.id,
            client_id: newClientId(),
            secret_hash: secretHash,
            created_by: p.userId,
            created_at: clock.now(),
            revoked_at: null,
            last_used_at: null,
          })
          .returning(publicColumns)
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'identity.issued',
          targetType: 'identity',
          targetId: identity.id,
          details: { agent_id: agent.id, client_id: identity.client_id },
        });
        return identity;
      });
      return reply.status(201).send({ ...toIdentity(row), client_secret: secret });
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
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('workload_identities').select(publicColumns).where('org_id', '=', p.orgId);
        if (req.query.agent_id) q = q.where('agent_id', '=', req.query.agent_id);
        return q.orderBy('created_at').orderBy('id').execute();
      });
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
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const identity = await tx
          .selectFrom('workload_identities')
          .select(publicColumns)
          .where('org_id', '=', p.orgId)
          .where('id', '=', req.params.identity_id)
          .forUpdate()
          .executeTakeFirst();
        if (!identity) throw notFound('No such identity.');
        if (identity.status === 'revoked') throw new ApiError('conflict', 'The identity is already revoked.');
        const updated = await tx
          .updateTable('workload_identities')
          .set({ status: 'revoked', revoked_at: clock.now() })
          .where('org_id', '=', p.orgId)
          .where('id', '=', identity.id)
          .returning(publicColumns)
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'identity.revoked',
          targetType: 'identity',
          targetId: identity.id,
          details: { reason: req.body.reason, agent_id: identity.agent_id },
        });
        return updated;
      });
      revocations.invalidate(row.agent_id);
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
      const { rows } = await sql<ClientRow>`select * from identity_for_client(${client_id})`.execute(db);
      const client = rows[0];
      // An unknown client and a wrong secret cost the same and answer the same.
      const ok = await verifySecret(client_secret, client?.secret_hash ?? UNKNOWN_CLIENT_HASH, config.secretPepper);
      if (client && !ok) {
        // A wrong secret for a known client is worth a security team's attention.
        await inScope(db, { orgId: client.org_id }, (tx) =>
          recordAudit(
            tx,
            client.org_id,
            {
              actorType: 'client',
              actorId: client.identity_id,
              action: 'identity.token_denied',
              targetType: 'identity',
              targetId: client.identity_id,
              outcome: 'denied',
              correlationId: req.id,
              details: { reason: 'wrong client secret' },
            },
            clock.now(),
          ),
        );
      }
      if (!client || !ok) throw new ApiError('invalid_client');
      if (client.identity_status !== 'active' || client.agent_status === 'revoked') throw new ApiError('identity_revoked');
      if (client.agent_status !== 'active') throw new ApiError('session_revoked', 'The agent is suspended.');
      const uri = agentUri(client.org_slug, client.agent_slug);
      const issued = await tokens.issue(
        { org: client.org_id, agt: client.agent_id, idn: client.identity_id, epc: client.session_epoch, uri },
        uri,
      );
      await inScope(db, { orgId: client.org_id }, async (tx) => {
        await tx
          .updateTable('workload_identities')
          .set({ last_used_at: clock.now() })
          .where('org_id', '=', client.org_id)
          .where('id', '=', client.identity_id)
          .execute();
        await recordAudit(
          tx,
          client.org_id,
          {
            actorType: 'agent',
            actorId: client.agent_id,
            action: 'identity.token_issued',
            targetType: 'identity',
            targetId: client.identity_id,
            outcome: 'success',
            correlationId: req.id,
          },
          clock.now(),
        );
      });
      return { access_token: issued.token, token_type: 'Bearer' as const, expires_in: issued.expiresIn, agent_uri: uri };
    },
  );
}
