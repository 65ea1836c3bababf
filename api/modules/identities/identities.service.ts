import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import type { TokenExchangeMetrics } from '../../platform/metrics.js';
import { agentOr404, agentUri } from '../agents/index.js';
import { audit, recordAudit } from '../audit/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import {
  identityForClient,
  insertIdentity,
  listIdentities,
  lockIdentity,
  markIdentityRevoked,
  markIdentityUsed,
  type IdentityRow,
} from './identities.repository.js';
import type { RevocationCache } from './revocation.js';
import { hashSecret, newClientId, newClientSecret, UNKNOWN_CLIENT_HASH, verifySecret, type AfterAnswer } from './secrets.js';
import type { TokenService } from './tokens.js';

/** A new workload identity of an agent that is not revoked, with its secret (shown this once). */
export async function issueIdentity(
  db: Db,
  req: RequestContext,
  clock: Clock,
  pepper: string,
  actor: ActorPrincipal,
  agentId: string,
): Promise<{ identity: IdentityRow; secret: string }> {
  const secret = newClientSecret();
  const secretHash = await hashSecret(secret, pepper);
  const identity = await inScope(db, { orgId: actor.orgId }, async (tx) => {
    const agent = await agentOr404(tx, actor.orgId, agentId);
    if (agent.status === 'revoked') throw new ApiError('conflict', 'The agent is revoked; it gets no new identity.');
    const created = await insertIdentity(tx, actor.orgId, {
      agentId: agent.id,
      clientId: newClientId(),
      secretHash,
      createdBy: actor.userId,
      createdAt: clock.now(),
    });
    await audit(tx, req, actor.orgId, {
      action: 'identity.issued',
      targetType: 'identity',
      targetId: created.id,
      details: { agent_id: agent.id, client_id: created.client_id },
    });
    return created;
  });
  return { identity, secret };
}

export function identitiesOf(db: Db, orgId: string, agentId: string | undefined): Promise<IdentityRow[]> {
  return inScope(db, { orgId }, (tx) => listIdentities(tx, orgId, agentId));
}

/** Revokes an identity; this process stops accepting its agent's cached token state at once. */
export async function revokeIdentity(
  db: Db,
  req: RequestContext,
  clock: Clock,
  revocations: RevocationCache,
  orgId: string,
  identityId: string,
  reason: string,
): Promise<IdentityRow> {
  const row = await inScope(db, { orgId }, async (tx) => {
    const identity = await lockIdentity(tx, orgId, identityId);
    if (!identity) throw notFound('No such identity.');
    if (identity.status === 'revoked') throw new ApiError('conflict', 'The identity is already revoked.');
    const updated = await markIdentityRevoked(tx, orgId, identity.id, clock.now());
    await audit(tx, req, orgId, {
      action: 'identity.revoked',
      targetType: 'identity',
      targetId: identity.id,
      details: { reason, agent_id: identity.agent_id },
    });
    return updated;
  });
  revocations.invalidate(row.agent_id);
  return row;
}

/**
 * Client credentials exchanged for an agent token (audience svc-gateway), every outcome audited. An
 * unknown client and a wrong secret do the same work before their answer: one lookup, one check.
 */
export async function exchangeClientCredentials(
  deps: { db: Db; clock: Clock; tokens: TokenService; pepper: string; afterAnswer: AfterAnswer; metrics?: TokenExchangeMetrics },
  credentials: { clientId: string; clientSecret: string },
  correlationId: string,
): Promise<{ token: string; expiresIn: number; agentUri: string }> {
  const { db, clock, tokens, pepper } = deps;
  const client = await identityForClient(db, credentials.clientId);
  // An unknown client and a wrong secret cost the same and answer the same.
  const ok = await verifySecret(credentials.clientSecret, client?.secret_hash ?? UNKNOWN_CLIENT_HASH, pepper);
  if (!client) {
    deps.metrics?.tokenExchange('unknown_client');
    throw new ApiError('invalid_client');
  }
  // A known client's refusal is recorded once the answer is on its way (telemetry; a wrong secret is audited too).
  const refused = (reason: 'wrong_secret' | 'identity_revoked' | 'agent_suspended' | 'agent_revoked', error: ApiError) => {
    deps.metrics?.tokenExchange(reason);
    const at = clock.now();
    const event = telemetryEvents.tokenRefused({
      at,
      agentId: client.agent_id,
      identityId: client.identity_id,
      clientId: credentials.clientId,
      correlationId,
      reason,
      errorCode: error.code,
    });
    deps.afterAnswer(() =>
      inScope(db, { orgId: client.org_id }, async (tx) => {
        // A wrong secret for a known client is worth a security team's attention.
        if (reason === 'wrong_secret') {
          await recordAudit(
            tx,
            client.org_id,
            {
              actorType: 'client',
              actorId: client.identity_id,
              action: 'identity.token_denied',
              targetType: 'identity',
              targetId: client.identity_id,
              outcome: 'denied',
              correlationId,
              details: { reason: 'wrong client secret' },
            },
            at,
          );
        }
        await recordTelemetry(tx, client.org_id, [event]);
      }),
    );
    return error;
  };
  if (!ok) throw refused('wrong_secret', new ApiError('invalid_client'));
  // details.reason tells the sidecar which containment it is, so it can say so instead of failing as an outage.
  if (client.identity_status !== 'active') throw refused('identity_revoked', new ApiError('identity_revoked', undefined, { reason: 'identity_revoked' }));
  if (client.agent_status === 'revoked') throw refused('agent_revoked', new ApiError('identity_revoked', undefined, { reason: 'agent_revoked' }));
  if (client.agent_status !== 'active') {
    throw refused('agent_suspended', new ApiError('session_revoked', 'The agent is suspended.', { reason: 'agent_suspended' }));
  }
  const uri = agentUri(client.org_slug, client.agent_slug);
  const issued = await tokens.issue(
    { org: client.org_id, agt: client.agent_id, idn: client.identity_id, epc: client.session_epoch, uri },
    uri,
  );
  await inScope(db, { orgId: client.org_id }, async (tx) => {
    await markIdentityUsed(tx, client.org_id, client.identity_id, clock.now());
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
        correlationId,
      },
      clock.now(),
    );
    await recordTelemetry(tx, client.org_id, [
      telemetryEvents.tokenIssued({ at: clock.now(), agentId: client.agent_id, identityId: client.identity_id, clientId: credentials.clientId, correlationId }),
    ]);
  });
  deps.metrics?.tokenExchange('issued');
  return { token: issued.token, expiresIn: issued.expiresIn, agentUri: uri };
}
