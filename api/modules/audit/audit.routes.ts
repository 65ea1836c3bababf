import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { iso, timestamp } from '../../platform/schemas.js';
import { caller } from '../../platform/route.js';
import { auditLog } from './audit.service.js';

const auditOut = z.object({
  id: z.uuid(),
  at: timestamp,
  actor: z.object({ type: z.string(), id: z.string().nullable() }),
  action: z.string(),
  target_type: z.string().nullable(),
  target_id: z.string().nullable(),
  outcome: z.string(),
  correlation_id: z.string(),
  details: z.record(z.string(), z.unknown()),
});
const filters = z.object({
  action: z.string().max(200).optional(),
  actor_id: z.string().max(200).optional(),
  outcome: z.string().max(40).optional(),
  target_id: z.string().max(200).optional(),
});

export async function auditRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/audit',
    {
      ...caller('audit:read'),
      schema: {
        summary: 'The audit log, newest first; filters match exactly',
        tags: ['Evidence and governance'],
        querystring: pageQuery().extend(filters.shape),
        response: { 200: pageOf(auditOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const { limit, cursor, action, actor_id, outcome, target_id } = req.query;
      const scope = `audit:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      const rows = await auditLog(db, p.orgId, { action, actor_id, outcome, target_id }, after, limit);
      return cursors.page(scope, rows, limit, (e) => ({ t: iso(e.at), id: e.id }), (e) => ({
        id: e.id,
        at: iso(e.at),
        actor: { type: e.actor_type, id: e.actor_id },
        action: e.action,
        target_type: e.target_type,
        target_id: e.target_id,
        outcome: e.outcome,
        correlation_id: e.correlation_id,
        details: e.details,
      }));
    },
  );
}
