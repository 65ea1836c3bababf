import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import { personOf } from '../../platform/auth.js';
import { notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { caller } from '../../platform/route.js';
import { audit } from '../audit/audit.js';
import { getOrganisation, type OrganisationRow } from '../tenants/tenants.repository.js';

/** How much of an action's parameters and output Tollgate keeps (docs/decisions.md). */
export const CONTENT_RETENTION = ['full', 'redacted', 'metadata_only'] as const;

const settingsOut = z.object({
  content_retention: z.enum(CONTENT_RETENTION),
  approval_ttl_seconds: z.number().int(),
  version: z.number().int(),
});
const settingsIn = z.object({
  content_retention: z.enum(CONTENT_RETENTION).nullable().optional(),
  approval_ttl_seconds: z.number().int().min(60).max(86400).nullable().optional(),
});
const tags = ['Users, roles and settings'];

const toSettings = (o: OrganisationRow) => ({
  content_retention: o.content_retention as (typeof CONTENT_RETENTION)[number],
  approval_ttl_seconds: o.approval_ttl_seconds,
  version: o.version,
});

export async function settingsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  r.get(
    '/settings',
    {
      ...caller('settings:read'),
      schema: { summary: 'Organisation settings', tags, response: { 200: settingsOut } },
    },
    async (req) => {
      const p = personOf(req);
      const org = await inScope(db, { orgId: p.orgId }, (tx) => getOrganisation(tx, p.orgId));
      if (!org) throw notFound();
      return toSettings(org);
    },
  );

  r.patch(
    '/settings',
    {
      ...caller('settings:manage'),
      schema: {
        summary: 'Change organisation settings (honours If-Match when sent)',
        tags,
        body: settingsIn,
        response: { 200: settingsOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const org = await getOrganisation(tx, p.orgId, true);
        if (!org) throw notFound();
        checkIfMatch(req.headers['if-match'], org.version, false);
        const next = {
          content_retention: req.body.content_retention ?? org.content_retention,
          approval_ttl_seconds: req.body.approval_ttl_seconds ?? org.approval_ttl_seconds,
        };
        const changes: Record<string, { from: unknown; to: unknown }> = {};
        if (next.content_retention !== org.content_retention)
          changes.content_retention = { from: org.content_retention, to: next.content_retention };
        if (next.approval_ttl_seconds !== org.approval_ttl_seconds)
          changes.approval_ttl_seconds = { from: org.approval_ttl_seconds, to: next.approval_ttl_seconds };
        if (Object.keys(changes).length === 0) return toSettings(org);
        const updated = await tx
          .updateTable('organisations')
          .set({ ...next, version: org.version + 1, updated_at: clock.now() })
          .where('id', '=', p.orgId)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, { action: 'settings.updated', targetType: 'tenant', targetId: p.orgId, details: changes });
        return toSettings(updated);
      });
    },
  );
}
