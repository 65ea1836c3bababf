import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import type { MemberRow } from './users.repository.js';
import { userIn, userOut, userParams, userPatchIn, usersQuery } from './users.schemas.js';
import { addUser, listUsers, updateUser } from './users.service.js';

const tags = ['Users, roles and settings'];

function toUser(m: MemberRow) {
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
      const rows = await listUsers(db, p.orgId, { q: req.query.q, after, limit: req.query.limit });
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
      const created = await addUser(db, req, p.orgId, req.body, clock.now());
      return reply.status(201).send(toUser(created));
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
        headers: ifMatchHeaders.optional,
        body: userPatchIn,
        response: { 200: userOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return toUser(await updateUser(db, req, p.orgId, req.params.user_id, req.body, req.headers['if-match'], clock.now()));
    },
  );
}
