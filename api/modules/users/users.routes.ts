import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { inScope } from '../../db/database.js';
import { actorOf } from '../../platform/auth.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import { audit } from '../audit/audit.js';
import { deleteSessionsOf } from '../auth/sessions.repository.js';
import { notify } from '../notifications/notifications.repository.js';
import { getOrganisation } from '../tenants/tenants.repository.js';
import { countActiveAdmins, findOrCreatePerson, getMember, listMembers, type MemberRow } from './users.repository.js';
import { userIn, userOut, userParams, userPatchIn, usersQuery } from './users.schemas.js';

const tags = ['Users, roles and settings'];

function toUser(m: NonNullable<MemberRow>) {
  return {
    id: m.id,
    email: m.email,
    display_name: m.display_name,
    roles: m.roles,
    status: m.status as 'active' | 'disabled',
    created_at: iso(m.created_at),
    updated_at: iso(m.updated_at),
    version: m.version,
  };
}

export async function usersRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/users',
    {
      ...caller('user:read'),
      schema: {
        summary: 'People of the organisation; q searches email and name',
        tags,
        querystring: pageQuery().extend(usersQuery.shape),
        response: { 200: pageOf(userOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const scope = `users:${p.orgId}`;
      const after = cursors.decode(scope, req.query.cursor);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) =>
        listMembers(tx, p.orgId, { q: req.query.q, after, limit: req.query.limit }),
      );
      return cursors.page(scope, rows, req.query.limit, (m) => ({ t: iso(m.created_at), id: m.id }), toUser);
    },
  );

  r.post(
    '/users',
    {
      ...caller('user:manage'),
      schema: {
        summary: 'Add a person to the organisation with roles',
        tags,
        body: userIn,
        response: { 201: userOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const now = clock.now();
      const person = await findOrCreatePerson(db, req.body.email.trim(), req.body.display_name);
      const created = await inScope(db, { orgId: p.orgId }, async (tx) => {
        if (await getMember(tx, p.orgId, person.id)) {
          throw new ApiError('conflict', 'This person already belongs to the organisation.', { field: 'email' });
        }
        await tx
          .insertInto('memberships')
          .values({
            org_id: p.orgId,
            user_id: person.id,
            display_name: req.body.display_name,
            roles: [...new Set(req.body.roles)],
            created_at: now,
            updated_at: now,
          })
          .execute();
        const org = await getOrganisation(tx, p.orgId);
        await notify(
          tx,
          p.orgId,
          person.id,
          'membership.added',
          `You were added to ${org?.name ?? 'an organisation'}`,
          `Roles: ${req.body.roles.join(', ')}.`,
          now,
        );
        await audit(tx, req, p.orgId, {
          action: 'user.created',
          targetType: 'user',
          targetId: person.id,
          details: { roles: req.body.roles },
        });
        return getMember(tx, p.orgId, person.id);
      });
      return reply.status(201).send(toUser(created!));
    },
  );

  r.patch(
    '/users/:user_id',
    {
      ...caller('user:manage'),
      schema: {
        summary: "Change a person's roles, status or name; disabling ends their sessions (honours If-Match)",
        tags,
        params: userParams,
        body: userPatchIn,
        response: { 200: userOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const id = req.params.user_id;
      const now = clock.now();
      const { roles, status, display_name } = req.body;
      const updated = await inScope(db, { orgId: p.orgId }, async (tx) => {
        // Membership changes of one organisation run one at a time, so two administrators stepping
        // down together cannot both pass the last-administrator check.
        await getOrganisation(tx, p.orgId, true);
        const before = await tx
          .selectFrom('memberships')
          .select(['roles', 'status', 'display_name', 'version'])
          .where('org_id', '=', p.orgId)
          .where('user_id', '=', id)
          .forUpdate()
          .executeTakeFirst();
        if (!before) throw notFound('No such user.');
        checkIfMatch(req.headers['if-match'], before.version, false);

        const changes = changesOf(before, { roles: roles && [...new Set(roles)], status, display_name });
        const next = { ...before, ...valuesOf(changes) } as typeof before;
        const wasAdmin = before.status === 'active' && before.roles.includes('org_admin');
        const staysAdmin = next.status === 'active' && next.roles.includes('org_admin');
        if (wasAdmin && !staysAdmin && (await countActiveAdmins(tx, p.orgId)) <= 1) {
          throw new ApiError('conflict', 'The organisation needs at least one active organisation administrator.');
        }
        if (Object.keys(changes).length > 0) {
          await tx
            .updateTable('memberships')
            .set({ ...valuesOf(changes), version: before.version + 1, updated_at: now })
            .where('org_id', '=', p.orgId)
            .where('user_id', '=', id)
            .execute();
          if (changes.status?.to === 'disabled') await deleteSessionsOf(tx, id, p.orgId);
          if (changes.roles) {
            await notify(tx, p.orgId, id, 'membership.roles_changed', 'Your roles changed', `Roles: ${next.roles.join(', ')}.`, now);
          }
          await audit(tx, req, p.orgId, { action: 'user.updated', targetType: 'user', targetId: id, details: changes });
        }
        return getMember(tx, p.orgId, id);
      });
      return toUser(updated!);
    },
  );
}
