import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { personOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import { markNotificationRead, notificationsOf } from './notifications.service.js';

const notificationOut = z.object({
  id: z.uuid(),
  kind: z.string(),
  title: z.string(),
  body: z.string(),
  read: z.boolean(),
  read_at: timestamp.nullable(),
  created_at: timestamp,
});
const tags = ['Users, roles and settings'];

export async function notificationsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/notifications',
    {
      ...caller('signed in'),
      schema: {
        summary: "The signed-in person's notifications in this organisation, newest first",
        tags,
        querystring: pageQuery(20),
        response: { 200: pageOf(notificationOut) },
      },
    },
    async (req) => {
      const p = personOf(req);
      const scope = `notifications:${p.orgId}:${p.userId}`;
      const after = cursors.decode(scope, req.query.cursor);
      const rows = await notificationsOf(db, p.orgId, p.userId, after, req.query.limit);
      return cursors.page(scope, rows, req.query.limit, (n) => ({ t: iso(n.created_at), id: n.id }), (n) => ({
        id: n.id,
        kind: n.kind,
        title: n.title,
        body: n.body,
        read: n.read_at !== null,
        read_at: n.read_at ? iso(n.read_at) : null,
        created_at: iso(n.created_at),
      }));
    },
  );

  r.post(
    '/notifications/:notification_id/read',
    {
      ...caller('signed in'),
      schema: {
        summary: 'Mark a notification read',
        tags,
        params: z.object({ notification_id: z.uuid() }),
        response: { 204: z.null() },
      },
    },
    async (req, reply) => {
      const p = personOf(req);
      await markNotificationRead(db, clock, p.orgId, p.userId, req.params.notification_id);
      return reply.status(204).send(null);
    },
  );
}
