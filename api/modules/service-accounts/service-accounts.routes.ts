import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { enforceLimit } from '../../platform/rate-limit.js';
import { beyondSpec, caller, operationOf } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { afterAnswer } from '../identities/index.js';
import { toServiceAccount } from './service-accounts.repository.js';
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
import {
  createServiceAccount,
  exchangeServiceCredentials,
  revokeServiceAccount,
  rotateServiceAccountSecret,
  serviceAccountsPage,
} from './service-accounts.service.js';

const tags = ['Service accounts'];

/**
 * Service accounts (docs/registry.md, Service accounts): operations outside the spec's list, for
 * callers of the REST API that are not persons, the Kubernetes controller first.
 */
export async function serviceAccountsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config, tokens, serviceAccounts } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

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
      const rows = await serviceAccountsPage(db, p.orgId, status, after, limit);
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
      const now = clock.now();
      const { account, secret } = await createServiceAccount(db, req, operationOf(req), actorOf(req), req.body, config.secretPepper, now);
      return reply.status(201).send({ ...toServiceAccount(account, now), client_secret: secret });
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
      const now = clock.now();
      const { account, secret } = await rotateServiceAccountSecret(
        db,
        req,
        operationOf(req),
        actorOf(req),
        req.params.service_account_id,
        req.body.overlap_seconds,
        config.secretPepper,
        now,
      );
      return { ...toServiceAccount(account, now), client_secret: secret };
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
      const row = await revokeServiceAccount(db, req, serviceAccounts, p.orgId, req.params.service_account_id, req.body.reason, now);
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
      const issued = await exchangeServiceCredentials(
        { db, tokens, pepper: config.secretPepper, afterAnswer: afterAnswer((err) => req.log.error({ err }, 'refused token exchange not audited')) },
        { clientId: client_id, clientSecret: client_secret },
        req.id,
        clock.now(),
      );
      return { access_token: issued.token, token_type: 'Bearer' as const, expires_in: issued.expiresIn };
    },
  );
}
