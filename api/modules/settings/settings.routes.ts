import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { caller } from '../../platform/route.js';
import { updateOrganisation, type OrganisationRow } from '../tenants/index.js';
import { CONTENT_RETENTION, settingsIn, settingsOut } from './settings.schemas.js';
import { organisationSettings } from './settings.service.js';

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
      return toSettings(await organisationSettings(db, p.orgId));
    },
  );

  r.patch(
    '/settings',
    {
      ...caller('settings:manage'),
      schema: {
        summary: 'Change organisation settings (honours If-Match when sent)',
        tags,
        headers: ifMatchHeaders.optional,
        body: settingsIn,
        response: { 200: settingsOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return toSettings(await updateOrganisation(db, req, p.orgId, req.body, 'settings.updated', req.headers['if-match']));
    },
  );
}
