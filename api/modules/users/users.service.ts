import type { RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import { inScope, prepared, readInScope, type Db } from '../../db/database.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { sessionsChanged } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import type { Position } from '../../platform/pagination.js';
import { audit } from '../audit/index.js';
import { notify } from '../notifications/index.js';
import { deleteSessionsOf } from '../sessions/index.js';
import { getOrganisation, insertMembership } from '../tenants/index.js';
import {
  countActiveAdmins,
  findOrCreatePerson,
  getMember,
  listMembers,
  lockMembership,
  updateMembership,
  type MemberRow,
} from './users.repository.js';
import type { userIn, userPatchIn } from './users.schemas.js';

/**
 * A page of the organisation's people: one read in its scope, one round trip (readInScope), as a prepared
 * statement (its text varies only with whether q and a cursor are given), so PostgreSQL does not parse it
 * again on every request.
 */
export function listUsers(db: Db, orgId: string, opts: { q?: string; after?: Position; limit: number }) {
  return readInScope(db, { orgId }, { compile: () => prepared(listMembers(db, orgId, opts).compile()) });
}


/** Adds a person (created on first sight) to the organisation, tells them and audits it. */
export async function addUser(
  db: Db,
  req: RequestContext,
  orgId: string,
  input: z.output<typeof userIn>,
  now: Date,
): Promise<MemberRow> {
  const person = await findOrCreatePerson(db, input.email.trim(), input.display_name);
  const created = await inScope(db, { orgId }, async (tx) => {
    if (await getMember(tx, orgId, person.id)) {
      throw new ApiError('conflict', 'This person already belongs to the organisation.', { field: 'email' });
    }
    await insertMembership(tx, {
      org_id: orgId,
      user_id: person.id,
      display_name: input.display_name,
      roles: [...new Set(input.roles)],
      created_at: now,
      updated_at: now,
    });
    const org = await getOrganisation(tx, orgId);
    await notify(
      tx,
      orgId,
      person.id,
      'membership.added',
      `You were added to ${org?.name ?? 'an organisation'}`,
      `Roles: ${input.roles.join(', ')}.`,
      now,
    );
    await audit(tx, req, orgId, {
      action: 'user.created',
      targetType: 'user',
      targetId: person.id,
      details: { roles: input.roles },
    });
    return getMember(tx, orgId, person.id);
  });
  // The person's organisations (GET /auth/me) now include this one: what their sessions remembered is stale.
  sessionsChanged(db);
  return created!;
}

/**
 * Changes a membership (honours If-Match when sent); disabling ends the person's sessions in the
 * organisation, and the last active organisation administrator cannot step down.
 */
export async function updateUser(
  db: Db,
  req: RequestContext,
  orgId: string,
  userId: string,
  patch: z.output<typeof userPatchIn>,
  ifMatch: string | undefined,
  now: Date,
): Promise<MemberRow> {
  const { roles, status, display_name } = patch;
  const updated = await inScope(db, { orgId }, async (tx) => {
    // Membership changes of one organisation run one at a time, so two administrators stepping
    // down together cannot both pass the last-administrator check.
    await getOrganisation(tx, orgId, true);
    const before = await lockMembership(tx, orgId, userId);
    if (!before) throw notFound('No such user.');
    checkIfMatch(ifMatch, before.version, false);

    const changes = changesOf(before, { roles: roles && [...new Set(roles)], status, display_name });
    const next = { ...before, ...valuesOf(changes) } as typeof before;
    const wasAdmin = before.status === 'active' && before.roles.includes('org_admin');
    const staysAdmin = next.status === 'active' && next.roles.includes('org_admin');
    if (wasAdmin && !staysAdmin && (await countActiveAdmins(tx, orgId)) <= 1) {
      throw new ApiError('conflict', 'The organisation needs at least one active organisation administrator.');
    }
    if (Object.keys(changes).length > 0) {
      await updateMembership(tx, orgId, userId, { ...valuesOf(changes), version: before.version + 1, updated_at: now });
      if (changes.status?.to === 'disabled') await deleteSessionsOf(tx, userId, orgId);
      if (changes.roles) {
        await notify(tx, orgId, userId, 'membership.roles_changed', 'Your roles changed', `Roles: ${next.roles.join(', ')}.`, now);
      }
      await audit(tx, req, orgId, { action: 'user.updated', targetType: 'user', targetId: userId, details: changes });
    }
    return getMember(tx, orgId, userId);
  });
  // Roles, status and name are what a signed-in request carries: sessions read before this are stale.
  sessionsChanged(db);
  return updated!;
}
