import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { findingOut, findingParams, findingPatch, findingsQuery } from './findings.schemas.js';
import { changeFinding, listFindingsPage, readFinding } from './findings.service.js';

const tags = ['Risk, findings and telemetry'];

export async function findingsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/findings',
    {
      ...caller('finding:read'),
      schema: {
        summary: 'Findings of the organisation, newest first; q searches title and description',
        tags,
        querystring: pageQuery().extend(findingsQuery.shape),
        response: { 200: pageOf(findingOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return listFindingsPage(db, cursors, p.orgId, req.query);
    },
  );

  r.get(
    '/findings/:finding_id',
    {
      ...caller('finding:read'),
      schema: { summary: 'One finding', tags, params: findingParams, response: { 200: findingOut } },
    },
    async (req) => {
      const p = actorOf(req);
      return readFinding(db, p.orgId, req.params.finding_id);
    },
  );

  r.patch(
    '/findings/:finding_id',
    {
      ...caller('finding:write'),
      schema: {
        summary:
          'Triage a finding: status, assignee, note (honours If-Match when sent). Closing it (resolved, accepted, ' +
          'false_positive) sets resolved_at, reopening clears it',
        tags,
        params: findingParams,
        headers: ifMatchHeaders.optional,
        body: findingPatch,
        response: { 200: findingOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return changeFinding(db, clock, req, p.orgId, req.params.finding_id, req.body, req.headers['if-match']);
    },
  );
}
