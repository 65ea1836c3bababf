import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { inScope } from '../../db/database.js';
import { actorOf } from '../../platform/auth.js';
import type { ActorPrincipal } from '../../platform/context.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { enforceLimit } from '../../platform/rate-limit.js';
import { beyondSpec, caller } from '../../platform/route.js';
import { iso, isUniqueViolation } from '../../platform/schemas.js';
import { audit } from '../audit/audit.js';
import { recordAudit } from '../audit/audit.repository.js';
import { hashSecret, UNKNOWN_CLIENT_HASH, verifySecret } from '../identities/secrets.js';
import { permissionsBeyond } from '../roles/catalogue.js';
import {
  getServiceAccount,
  listServiceAccounts,
  nameTaken,
  publicColumns,
  serviceAccountForClient,
  toServiceAccount,
} from './service-accounts.repository.js';
import {
  revokeIn,
  rotateIn,
  serviceAccountIn,
  serviceAccountOut,
  serviceAccountParams,
  serviceAccountsQuery,
  serviceAccountWithSecret,
  serviceTokenIn,
  serviceTokenOut,
} from './service-accounts.schemas.js';

const tags = ['Service accounts'];

/** Prefixed like workload identities' (tgc_, tgs_), and told apart from them at a glance. */
export const SERVICE_CLIENT_ID_PREFIX = 'tgsa_';
export const SERVICE_SECRET_PREFIX = 'tgss_';
const newServiceClientId = () => `${SERVICE_CLIENT_ID_PREFIX}${randomBytes(12).toString('hex')}`;
const newServiceSecret = () => `${SERVICE_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;

/**
 * Service accounts (docs/registry.md, Service accounts): operations outside the spec's list, for
 * callers of the REST API that are not persons, the Kubernetes controller first.
 */
export async function serviceAccountsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config, tokens, serviceAccounts } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  /**
   * Whoever hands out an account's powers (creating it, or taking a new secret of it) must hold them
   * all: 403 forbidden naming what is missing, audited like any permission denial.
   */
  async function refuseEscalation(req: FastifyRequest, p: ActorPrincipal, roles: string[]): Promise<void> {
    const missing = permissionsBeyond(p.permissions, roles);
    if (missing.length === 0) return;
    await inScope(db, { orgId: p.orgId }, (tx) =>
      audit(tx, req, p.orgId, {
        action: 'permission.denied',
        targetType: 'operation',
        targetId: `${req.method} ${req.routeOptions.url}`,
        outcome: 'denied',
        details: { required_permission: missing[0], missing_permissions: missing, roles },
      }),
    );
    throw new ApiError(
      'forbidden',
      `Granting the roles ${roles.join(', ')} needs permissions you do not hold: ${missing.join(', ')}.`,
      { required_permission: missing[0], missing_permissions: missing },
    );
  }

  r.get(
    '/service-accounts',
    {
      ...beyondSpec(caller('user:manage')),
      schema: {
        summary: 'Service accounts of the organisation, oldest first; secrets are never returned',
        tags,
        querystring: pageQuery().extend(serviceAccountsQuery.shape),
        response: { 200: pageOf(serviceAccountOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const { limit, cursor, status } = req.query;
      const scope = `service-accounts:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => listServiceAccounts(tx, p.orgId, status, after, limit));
      const now = clock.now();
      return cursors.page(scope, rows, limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => toServiceAccount(a, now));
    },
  );

  r.post(
    '/service-accounts',
    {
      ...beyondSpec(caller('user:manage')),
      schema: {
        summary: 'Create a service account with built-in roles: a client ID and a secret shown this once',
        tags,
        body: serviceAccountIn,
        response: { 201: serviceAccountWithSecret },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const roles = [...new Set(req.body.roles)];
      await refuseEscalation(req, p, roles);
      const secret = newServiceSecret();
      const secretHash = await hashSecret(secret, config.secretPepper);
      const now = clock.now();
      const duplicate = () => new ApiError('conflict', `A service account named "${req.body.name}" exists.`, { field: 'name' });
      let row;
      try {
        row = await inScope(db, { orgId: p.orgId }, async (tx) => {
          if (await nameTaken(tx, p.orgId, req.body.name)) throw duplicate();
          const created = await tx
            .insertInto('service_accounts')
            .values({
              id: randomUUID(),
              org_id: p.orgId,
              name: req.body.name,
              description: req.body.description,
              roles,
              client_id: newServiceClientId(),
              secret_hash: secretHash,
              previous_secret_hash: null,
              previous_valid_until: null,
              created_by: p.userId,
              created_at: now,
              last_used_at: null,
              revoked_at: null,
            })
            .returning(publicColumns)
            .executeTakeFirstOrThrow();
          await audit(tx, req, p.orgId, {
            action: 'service_account.created',
            targetType: 'service_account',
            targetId: created.id,
            details: { name: created.name, roles, client_id: created.client_id },
          });
          return created;
        });
      } catch (err) {
        // Two creations of one name at once: the unique constraint decides.
        if (isUniqueViolation(err)) throw duplicate();
        throw err;
      }
      return reply.status(201).send({ ...toServiceAccount(row, now), client_secret: secret });
    },
  );

  r.post(
    '/service-accounts/:service_account_id/rotate',
    {
      ...beyondSpec(caller('user:manage')),
      schema: {
        summary: 'Issue a new secret, shown this once; the previous one stays valid for the overlap',
        tags,
        params: serviceAccountParams,
        body: rotateIn,
        response: { 200: serviceAccountWithSecret },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const id = req.params.service_account_id;
      const found = await inScope(db, { orgId: p.orgId }, (tx) => getServiceAccount(tx, p.orgId, id));
      if (!found) throw notFound('No such service account.');
      // Taking a new secret is taking the account's powers: the same rule as creating it.
      await refuseEscalation(req, p, found.roles);
      const secret = newServiceSecret();
      const secretHash = await hashSecret(secret, config.secretPepper);
      const now = clock.now();
      const overlapSeconds = req.body.overlap_seconds;
      const until = new Date(now.getTime() + overlapSeconds * 1000);
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const account = await getServiceAccount(tx, p.orgId, id, true);
        if (!account) throw notFound('No such service account.');
        if (account.status === 'revoked') throw new ApiError('conflict', 'The service account is revoked; it gets no new secret.');
        const updated = await tx
          .updateTable('service_accounts')
          // The replaced secret becomes the previous one; a secret replaced earlier ends now.
          .set((eb) => ({ previous_secret_hash: eb.ref('secret_hash'), secret_hash: secretHash, previous_valid_until: until }))
          .where('org_id', '=', p.orgId)
          .where('id', '=', account.id)
          .returning(publicColumns)
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'service_account.rotated',
          targetType: 'service_account',
          targetId: account.id,
          details: { overlap_seconds: overlapSeconds, previous_secret_valid_until: iso(until) },
        });
        return updated;
      });
      return { ...toServiceAccount(row, now), client_secret: secret };
    },
  );

  r.post(
    '/service-accounts/:service_account_id/revoke',
    {
      ...beyondSpec(caller('user:manage')),
      schema: {
        summary: 'Revoke a service account: both secrets and every token issued stop working at once',
        tags,
        params: serviceAccountParams,
        body: revokeIn,
        response: { 200: serviceAccountOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const now = clock.now();
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const account = await getServiceAccount(tx, p.orgId, req.params.service_account_id, true);
        if (!account) throw notFound('No such service account.');
        if (account.status === 'revoked') throw new ApiError('conflict', 'The service account is already revoked.');
        // The status ends both secrets: an exchange with either answers identity_revoked from now on.
        const updated = await tx
          .updateTable('service_accounts')
          .set({ status: 'revoked', revoked_at: now })
          .where('org_id', '=', p.orgId)
          .where('id', '=', account.id)
          .returning(publicColumns)
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'service_account.revoked',
          targetType: 'service_account',
          targetId: account.id,
          details: { reason: req.body.reason, name: account.name },
        });
        return updated;
      });
      serviceAccounts.invalidate(p.orgId, row.id);
      return toServiceAccount(row, now);
    },
  );

  r.post(
    '/service-accounts/token',
    {
      ...beyondSpec(caller('client', 'token')),
      schema: {
        summary: 'Exchange a service account\'s client credentials for a 900-second token for the REST API',
        tags: ['Authentication and accounts'],
        body: serviceTokenIn,
        response: { 200: serviceTokenOut },
      },
    },
    async (req) => {
      // Unknown client IDs must not buy unlimited guesses: exchanges are limited per client address.
      await enforceLimit(app.deps.hits, `token-ip:${req.ip}`, config.rateLimits.tokenPerIpPerMinute);
      const { client_id, client_secret } = req.body;
      const now = clock.now();
      const client = await serviceAccountForClient(db, client_id);
      // Both secrets are always checked, against dummy hashes when missing, so that an unknown client,
      // a wrong secret and an account without a previous secret all cost the same.
      const [current, previous] = await Promise.all([
        verifySecret(client_secret, client?.secret_hash ?? UNKNOWN_CLIENT_HASH, config.secretPepper),
        verifySecret(client_secret, client?.previous_secret_hash ?? UNKNOWN_CLIENT_HASH, config.secretPepper),
      ]);
      const until = client?.previous_valid_until ? new Date(client.previous_valid_until).getTime() : 0;
      const ok = current || (previous && until > now.getTime());
      if (client && !ok) {
        await inScope(db, { orgId: client.org_id }, (tx) =>
          recordAudit(
            tx,
            client.org_id,
            {
              actorType: 'client',
              actorId: client.service_account_id,
              action: 'service_account.token_denied',
              targetType: 'service_account',
              targetId: client.service_account_id,
              outcome: 'denied',
              correlationId: req.id,
              details: { reason: previous ? 'previous secret past its overlap' : 'wrong client secret' },
            },
            now,
          ),
        );
      }
      if (!client || !ok) throw new ApiError('invalid_client');
      if (client.status !== 'active') throw new ApiError('identity_revoked', 'The service account was revoked.');
      const issued = await tokens.issueService({ org: client.org_id, sac: client.service_account_id });
      await inScope(db, { orgId: client.org_id }, async (tx) => {
        await tx
          .updateTable('service_accounts')
          .set({ last_used_at: now })
          .where('org_id', '=', client.org_id)
          .where('id', '=', client.service_account_id)
          .execute();
        await recordAudit(
          tx,
          client.org_id,
          {
            actorType: 'service_account',
            actorId: client.service_account_id,
            action: 'service_account.token_issued',
            targetType: 'service_account',
            targetId: client.service_account_id,
            outcome: 'success',
            correlationId: req.id,
            details: { secret: current ? 'current' : 'previous' },
          },
          now,
        );
      });
      return { access_token: issued.token, token_type: 'Bearer' as const, expires_in: issued.expiresIn };
    },
  );
}
