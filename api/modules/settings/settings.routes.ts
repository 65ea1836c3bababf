import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import { actorOf } from '../../platform/auth.js';
import { notFound } from '../../platform/errors.js';
import { caller } from '../../platform/route.js';
import { getOrganisation, type OrganisationRow } from '../tenants/tenants.repository.js';
import { updateOrganisation } from '../tenants/tenants.service.js';

/** How much of an action's parameters and output Tollgate keeps (spec: Shared enumerations; docs/decisions.md). */
export const CONTENT_RETENTION = ['metadata_only', 'redacted_excerpts'] as const;

const settingsOut = z.object({
  content_retention: z.enum(CONTENT_RETENTION),
  approval_ttl_seconds: z.number().int(),
  owners_count_as_self: z.boolean(),
  version: z.number().int(),
});
const settingsIn = z.object({
  content_retention: z.enum(CONTENT_RETENTION).nullable().optional(),
  approval_ttl_seconds: z.number().int().min(60).max(86400).nullable().optional(),
  owners_count_as_self: z
    .boolean()
    .nullable()
    .optional()
    .describe("an agent's owners may not approve its actions (opt-in)"),
});
const tags = ['Users, roles and settings'];

const toSettings = (o: OrganisationRow) => ({
  content_retention: o.content_retention as (typeof CONTENT_RETENTION)[number],
  approval_ttl_seconds: o.approval_ttl_seconds,
  owners_count_as_self: o.owners_count_as_self,
  version: o.version,
});

export async function settingsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db } = app.deps;

  r.get(
    '/settings',
    {
      ...caller('settings:read'),
      schema: { summary: 'Organisation settings', tags, response: { 200: settingsOut } },
    },
    async (req) => {
      const p = actorOf(req);
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
      const p = actorOf(req);
      return toSettings(await updateOrganisation(db, req, p.orgId, req.body, 'settings.updated'));
    },
  );
}
