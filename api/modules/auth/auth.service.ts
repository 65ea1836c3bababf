import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { createSession, setSessionOrg } from '../sessions/index.js';
import { findOrganisation, getOrganisation, organisationsOf } from '../tenants/index.js';
import { findOrCreatePerson } from '../users/index.js';

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

/** The session's organisation and every organisation the person belongs to, read together. */
export async function whoAmI(db: Db, orgId: string, userId: string) {
  const [org, tenants] = await inScope(db, { orgId, userId }, async (tx) => [
    await getOrganisation(tx, orgId),
    await organisationsOf(tx, userId),
  ] as const);
  if (!org) throw new ApiError('unauthenticated');
  return { org, tenants };
}

/** Moves the session to another organisation the person belongs to. */
export async function switchTenant(db: Db, sessionId: string, userId: string, tenantId: string): Promise<void> {
  const tenants = await tenantsOf(db, userId);
  if (!tenants.some((t) => t.id === tenantId)) throw notFound('No such organisation for this person.');
  await setSessionOrg(db, sessionId, tenantId);
}
