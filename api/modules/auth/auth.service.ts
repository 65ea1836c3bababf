import type { Config } from '../../config.js';
import { inScope, readInScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { recordAudit } from '../audit/index.js';
import { createSession, setSessionOrg } from '../sessions/index.js';
import { findOrganisation, organisationsOf, organisationWithTenants } from '../tenants/index.js';
import { findOrCreatePerson, findPerson } from '../users/index.js';
import { showsMfa, type IdTokenClaims } from './oidc.js';
import { findIdentity, hasOtherIdentity, linkIdentity, membershipsOf, personWithEmail, touchIdentity } from './oidc.repository.js';

/** The active organisations a person belongs to, oldest membership first. */
export const tenantsOf = (db: Db, userId: string) => inScope(db, { userId }, (tx) => organisationsOf(tx, userId));

/**
 * Development sign-in: finds or creates the person with this email and opens a session in the
 * organisation asked for, or their oldest one. A person who belongs to none gets no session: they
 * go on to create an organisation.
 */
export async function devLogin(
  db: Db,
  email: string,
  tenantId: string | null | undefined,
  now: Date,
  sessionTtlSeconds: number,
) {
  const person = await findOrCreatePerson(db, email, email.split('@')[0] ?? email);
  const tenants = await tenantsOf(db, person.id);
  const chosen = tenantId ? tenants.find((t) => t.id === tenantId) : tenants[0];
  if (tenantId && !chosen) throw notFound('No such organisation for this person.');
  if (!chosen) return { person, session: null, org: undefined };
  const session = await createSession(db, person.id, chosen.id, now, sessionTtlSeconds);
  const org = await findOrganisation(db, chosen.id);
  return { person, session, org };
}

/** The session's organisation and every organisation the person belongs to, read together in one round trip. */
export async function whoAmI(db: Db, orgId: string, userId: string) {
  const [row] = await readInScope(db, { orgId, userId }, organisationWithTenants(db, orgId, userId));
  if (!row) throw new ApiError('unauthenticated');
  const { tenants, ...org } = row;
  return { org, tenants };
}

/** Moves the session to another organisation the person belongs to. */
export async function switchTenant(db: Db, sessionId: string, userId: string, tenantId: string): Promise<void> {
  const tenants = await tenantsOf(db, userId);
  if (!tenants.some((t) => t.id === tenantId)) throw notFound('No such organisation for this person.');
  await setSessionOrg(db, sessionId, tenantId);
}

/** What an OpenID Connect sign-in needs besides the ID token. */
export interface OidcSignInContext {
  settings: Config['oidcSignIn'];
  now: Date;
  sessionTtlSeconds: number;
  /** The request's correlation ID, for the audit entries. */
  correlationId: string;
}

/**
 * Signs in the person of a checked ID token (docs/authentication.md, OpenID Connect sign-in). The person
 * is found by issuer and subject; on the first sign-in, by the provider's verified email, and linked. A
 * token that does not show multi-factor authentication, a person whose every membership is disabled, and a
 * new identity without a verified email are refused, audited in the person's organisations where one is
 * known. A person with no organisation gets no session: they go on to create one (onboarding).
 */
export async function oidcSignIn(db: Db, claims: IdTokenClaims, ctx: OidcSignInContext) {
  const { iss: issuer, sub: subject } = claims;
  const linked = await findIdentity(db, issuer, subject);
  const email = typeof claims.email === 'string' ? claims.email.trim() : '';
  const verified = claims[ctx.settings.emailVerifiedClaim];
  const verifiedEmail = (verified === true || verified === 'true') && email !== '' ? email : undefined;
  const known = linked ? await findPerson(db, linked.user_id) : verifiedEmail ? await personWithEmail(db, verifiedEmail) : undefined;

  const refuse = async (reason: string, message: string) => {
    if (known) await auditRefusal(db, known.id, ctx, { reason, issuer });
    throw new ApiError('forbidden', message, { reason });
  };

  if (!showsMfa(claims, ctx.settings)) {
    await refuse(
      'mfa_required',
      'Your identity provider did not confirm multi-factor authentication for this sign-in. Sign in there with ' +
        'your authenticator app or passkey, or ask your administrator to require it, then try again.',
    );
  }
  if (!known && !verifiedEmail) {
    await refuse('email_not_verified', 'Your identity provider did not share a verified email address for this account.');
  }
  if (!linked && known && (await hasOtherIdentity(db, known.id, issuer, subject))) {
    // The email's person already signs in with another account of this provider: never taken over by email.
    await refuse('identity_mismatch', 'This email address already belongs to another account at your identity provider.');
  }

  const statuses = known ? await inScope(db, { userId: known.id }, (tx) => membershipsOf(tx, known.id)) : [];
  if (statuses.length > 0 && statuses.every((m) => m.status !== 'active')) {
    await refuse('account_disabled', 'Your account is disabled; ask an administrator of your organisation.');
  }

  const name = typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim().slice(0, 120) : undefined;
  const person = known ?? (await findOrCreatePerson(db, verifiedEmail!, name ?? verifiedEmail!.split('@')[0] ?? verifiedEmail!));
  if (linked) await touchIdentity(db, issuer, subject, ctx.now);
  else await linkIdentity(db, issuer, subject, person.id, ctx.now);

  const tenants = await tenantsOf(db, person.id);
  const chosen = tenants[0];
  if (!chosen) return { person, session: null, org: undefined };
  const session = await createSession(db, person.id, chosen.id, ctx.now, ctx.sessionTtlSeconds);
  await inScope(db, { orgId: chosen.id }, (tx) =>
    recordAudit(
      tx,
      chosen.id,
      signInEntry(person.id, ctx, 'success', { method: 'oidc', issuer, first_sign_in: !linked }),
      ctx.now,
    ),
  );
  const org = await findOrganisation(db, chosen.id);
  return { person, session, org };
}

function signInEntry(userId: string, ctx: OidcSignInContext, outcome: 'success' | 'denied', details: Record<string, unknown>) {
  return {
    actorType: 'person' as const,
    actorId: userId,
    action: 'auth.signin',
    targetType: 'user',
    targetId: userId,
    outcome,
    correlationId: ctx.correlationId,
    details,
  };
}

/** Audits a refused sign-in in each organisation the person belongs to (active or not). */
async function auditRefusal(db: Db, userId: string, ctx: OidcSignInContext, details: Record<string, unknown>): Promise<void> {
  const orgs = await inScope(db, { userId }, (tx) => membershipsOf(tx, userId));
  for (const { org_id: orgId } of orgs) {
    await inScope(db, { orgId }, (tx) => recordAudit(tx, orgId, signInEntry(userId, ctx, 'denied', { method: 'oidc', ...details }), ctx.now));
  }
}
