import type { Clock } from '../lib/clock.js';
import { inScope, type Db } from './db/database.js';
import type { PrincipalSources } from './platform/context.js';
import { ApiError } from './platform/errors.js';
import { recordAudit } from './modules/audit/index.js';
import type { RevocationCache, TokenService } from './modules/identities/index.js';
import { permissionsOf } from './modules/roles/index.js';
import type { ServiceAccountStates } from './modules/service-accounts/index.js';
import { findSessionPrincipal } from './modules/sessions/index.js';
import { findPerson } from './modules/users/index.js';

/**
 * The platform's authentication port (platform/context.ts), answered by the modules that own each kind
 * of caller: sessions and roles for people, identities for agents, service accounts for controllers,
 * the audit log for refusals.
 */
export function principalSources(deps: {
  db: Db;
  clock: Clock;
  tokens: TokenService;
  revocations: RevocationCache;
  serviceAccounts: ServiceAccountStates;
}): PrincipalSources {
  const { db, clock, tokens, revocations, serviceAccounts } = deps;
  return {
    async person(sessionToken) {
      const s = await findSessionPrincipal(db, sessionToken, clock.now());
      if (!s || s.status !== 'active') return null;
      return {
        kind: 'person',
        sessionId: s.sessionId,
        userId: s.user_id,
        email: s.email,
        displayName: s.display_name,
        orgId: s.org_id,
        roles: s.roles,
        permissions: permissionsOf(s.roles),
        csrfToken: s.csrf_token,
      };
    },

    async personById(userId) {
      const person = await findPerson(db, userId);
      return person ? { id: person.id, email: person.email, displayName: person.display_name } : null;
    },

    // Signature, audience and expiry are checked by the token service, revocation by the cached
    // revocation state. A service token fails here on its audience.
    async agent(bearer) {
      const token = await tokens.verify(bearer);
      await revocations.check(token);
      return {
        kind: 'agent',
        orgId: token.org,
        agentId: token.agt,
        identityId: token.idn,
        agentUri: token.uri,
        tokenId: token.jti,
        userId: null,
      };
    },

    // Audience `tollgate-api` (an agent token fails with invalid_audience), then the account's current
    // status and roles: a revoked account answers 401 at once, whatever its tokens' expiry.
    async service(bearer) {
      const claims = await tokens.verifyService(bearer);
      const account = await serviceAccounts.current(claims.org, claims.sac);
      if (!account || account.status !== 'active') throw new ApiError('identity_revoked', 'The service account was revoked.');
      return {
        kind: 'service',
        orgId: claims.org,
        userId: claims.sac,
        serviceAccountId: claims.sac,
        name: account.name,
        roles: account.roles,
        permissions: permissionsOf(account.roles),
      };
    },

    async permissionDenied(principal, operation, permission, correlationId) {
      await inScope(db, { orgId: principal.orgId }, (tx) =>
        recordAudit(
          tx,
          principal.orgId,
          {
            actorType: principal.kind === 'service' ? 'service_account' : 'person',
            actorId: principal.userId,
            action: 'permission.denied',
            targetType: 'operation',
            targetId: operation,
            outcome: 'denied',
            correlationId,
            details: { required_permission: permission },
          },
          clock.now(),
        ),
      );
    },
  };
}
