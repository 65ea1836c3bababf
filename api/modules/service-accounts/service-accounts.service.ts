import { randomBytes } from 'node:crypto';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import type { Position } from '../../platform/pagination.js';
import { iso, isUniqueViolation } from '../../platform/schemas.js';
import { audit, recordAudit } from '../audit/index.js';
import { hashSecret, UNKNOWN_CLIENT_HASH, verifySecret, type AfterAnswer, type TokenService } from '../identities/index.js';
import { permissionsBeyond } from '../roles/index.js';
import {
  getServiceAccount,
  insertServiceAccount,
  listServiceAccounts,
  markServiceAccountRevoked,
  markServiceAccountUsed,
  nameTaken,
  replaceSecret,
  serviceAccountForClient,
  type ServiceAccountRow,
} from './service-accounts.repository.js';
import type { ServiceAccountStates } from './service-accounts.state.js';

/** Prefixed like workload identities' (tgc_, tgs_), and told apart from them at a glance. */
export const SERVICE_CLIENT_ID_PREFIX = 'tgsa_';
export const SERVICE_SECRET_PREFIX = 'tgss_';
const newServiceClientId = () => `${SERVICE_CLIENT_ID_PREFIX}${randomBytes(12).toString('hex')}`;
const newServiceSecret = () => `${SERVICE_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;

/**
 * Whoever hands out an account's powers (creating it, or taking a new secret of it) must hold them
 * all: 403 forbidden naming what is missing, audited like any permission denial.
 */
async function refuseEscalation(db: Db, req: RequestContext, operation: string, p: ActorPrincipal, roles: string[]): Promise<void> {
  const missing = permissionsBeyond(p.permissions, roles);
  if (missing.length === 0) return;
  await inScope(db, { orgId: p.orgId }, (tx) =>
    audit(tx, req, p.orgId, {
      action: 'permission.denied',
      targetType: 'operation',
      targetId: operation,
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

export function serviceAccountsPage(db: Db, orgId: string, status: string | undefined, after: Position | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listServiceAccounts(tx, orgId, status, after, limit));
}

/** A new account with built-in roles the creator holds every permission of, and its secret (shown this once). */
export async function createServiceAccount(
  db: Db,
  req: RequestContext,
  operation: string,
  p: ActorPrincipal,
  body: { name: string; description: string; roles: string[] },
  pepper: string,
  now: Date,
): Promise<{ account: ServiceAccountRow; secret: string }> {
  const roles = [...new Set(body.roles)];
  await refuseEscalation(db, req, operation, p, roles);
  const secret = newServiceSecret();
  const secretHash = await hashSecret(secret, pepper);
  const duplicate = () => new ApiError('conflict', `A service account named "${body.name}" exists.`, { field: 'name' });
  try {
    const account = await inScope(db, { orgId: p.orgId }, async (tx) => {
      if (await nameTaken(tx, p.orgId, body.name)) throw duplicate();
      const created = await insertServiceAccount(tx, p.orgId, {
        name: body.name,
        description: body.description,
        roles,
        clientId: newServiceClientId(),
        secretHash,
        createdBy: p.userId,
        createdAt: now,
      });
      await audit(tx, req, p.orgId, {
        action: 'service_account.created',
        targetType: 'service_account',
        targetId: created.id,
        details: { name: created.name, roles, client_id: created.client_id },
      });
      return created;
    });
    return { account, secret };
  } catch (err) {
    // Two creations of one name at once: the unique constraint decides.
    if (isUniqueViolation(err)) throw duplicate();
    throw err;
  }
}

/** A new secret, shown this once; the previous one stays valid for `overlapSeconds`. */
export async function rotateServiceAccountSecret(
  db: Db,
  req: RequestContext,
  operation: string,
  p: ActorPrincipal,
  id: string,
  overlapSeconds: number,
  pepper: string,
  now: Date,
): Promise<{ account: ServiceAccountRow; secret: string }> {
  const found = await inScope(db, { orgId: p.orgId }, (tx) => getServiceAccount(tx, p.orgId, id));
  if (!found) throw notFound('No such service account.');
  // Taking a new secret is taking the account's powers: the same rule as creating it.
  await refuseEscalation(db, req, operation, p, found.roles);
  const secret = newServiceSecret();
  const secretHash = await hashSecret(secret, pepper);
  const until = new Date(now.getTime() + overlapSeconds * 1000);
  const account = await inScope(db, { orgId: p.orgId }, async (tx) => {
    const current = await getServiceAccount(tx, p.orgId, id, true);
    if (!current) throw notFound('No such service account.');
    if (current.status === 'revoked') throw new ApiError('conflict', 'The service account is revoked; it gets no new secret.');
    const updated = await replaceSecret(tx, p.orgId, current.id, secretHash, until);
    await audit(tx, req, p.orgId, {
      action: 'service_account.rotated',
      targetType: 'service_account',
      targetId: current.id,
      details: { overlap_seconds: overlapSeconds, previous_secret_valid_until: iso(until) },
    });
    return updated;
  });
  return { account, secret };
}

/** Revokes an account: both secrets and every token issued stop working, in this process at once. */
export async function revokeServiceAccount(
  db: Db,
  req: RequestContext,
  states: ServiceAccountStates,
  orgId: string,
  id: string,
  reason: string,
  now: Date,
): Promise<ServiceAccountRow> {
  const row = await inScope(db, { orgId }, async (tx) => {
    const account = await getServiceAccount(tx, orgId, id, true);
    if (!account) throw notFound('No such service account.');
    if (account.status === 'revoked') throw new ApiError('conflict', 'The service account is already revoked.');
    // The status ends both secrets: an exchange with either answers identity_revoked from now on.
    const updated = await markServiceAccountRevoked(tx, orgId, account.id, now);
    await audit(tx, req, orgId, {
      action: 'service_account.revoked',
      targetType: 'service_account',
      targetId: account.id,
      details: { reason, name: account.name },
    });
    return updated;
  });
  states.invalidate(orgId, row.id);
  return row;
}

/**
 * Client credentials exchanged for a service token (audience tollgate-api), every outcome audited. An
 * unknown client and a wrong secret do the same work before their answer: one lookup, two checks.
 */
export async function exchangeServiceCredentials(
  deps: { db: Db; tokens: TokenService; pepper: string; afterAnswer: AfterAnswer },
  credentials: { clientId: string; clientSecret: string },
  correlationId: string,
  now: Date,
): Promise<{ token: string; expiresIn: number }> {
  const { db, tokens, pepper } = deps;
  const client = await serviceAccountForClient(db, credentials.clientId);
  // Both secrets are always checked, against dummy hashes when missing, so that an unknown client,
  // a wrong secret and an account without a previous secret all cost the same.
  const [current, previous] = await Promise.all([
    verifySecret(credentials.clientSecret, client?.secret_hash ?? UNKNOWN_CLIENT_HASH, pepper),
    verifySecret(credentials.clientSecret, client?.previous_secret_hash ?? UNKNOWN_CLIENT_HASH, pepper),
  ]);
  const until = client?.previous_valid_until ? new Date(client.previous_valid_until).getTime() : 0;
  const ok = current || (previous && until > now.getTime());
  if (client && !ok) {
    // Written after the answer, which an unknown client's refusal would otherwise beat by a transaction.
    deps.afterAnswer(() =>
      inScope(db, { orgId: client.org_id }, (tx) =>
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
            correlationId,
            details: { reason: previous ? 'previous secret past its overlap' : 'wrong client secret' },
          },
          now,
        ),
      ),
    );
  }
  if (!client || !ok) throw new ApiError('invalid_client');
  if (client.status !== 'active') throw new ApiError('identity_revoked', 'The service account was revoked.');
  const issued = await tokens.issueService({ org: client.org_id, sac: client.service_account_id });
  await inScope(db, { orgId: client.org_id }, async (tx) => {
    await markServiceAccountUsed(tx, client.org_id, client.service_account_id, now);
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
        correlationId,
        details: { secret: current ? 'current' : 'previous' },
      },
      now,
    );
  });
  return { token: issued.token, expiresIn: issued.expiresIn };
}
