import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { catalogueDescription } from './telemetry.catalogue.js';
import { statsOut, statsQuery, telemetryEventOut, telemetryQuery } from './telemetry.schemas.js';
import { telemetryPage, telemetryStats } from './telemetry.service.js';

const tags = ['Risk, findings and telemetry'];

export async function telemetryRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);
  const reads = { db, clock, retentionDays: config.telemetryRetentionDays };

  r.get(
    '/telemetry',
    {
      ...caller('telemetry:read'),
      schema: {
        summary: 'Telemetry events of the organisation, newest first; filters combine (all must hold)',
        description:
          `Operational events, kept for TELEMETRY_RETENTION_DAYS (default 30). The event types: ${catalogueDescription()} ` +
          'Severities, lowest first: info, low, medium, high, critical. docs/telemetry.md has the attributes in full.',
        tags,
        querystring: pageQuery(100).extend(telemetryQuery.shape),
        response: { 200: pageOf(telemetryEventOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return telemetryPage(reads, cursors, p.orgId, req.query);
    },
  );

  r.get(
    '/telemetry/stats',
    {
      ...caller('telemetry:read'),
      schema: {
        summary: 'Telemetry counted per hour: events by type and severity, decisions by outcome, decision latency p50/p95',
        description:
          'Covers the last `hours` hours (UTC, on the hour), the current hour included: `series` has one entry per hour, ' +
          'oldest first, hours without events included with zeros, and `totals` the whole window. Latency is the ' +
          '`latency_ms` attribute of `gateway.decision` events (docs/telemetry.md).',
        tags,
        querystring: statsQuery,
        response: { 200: statsOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return telemetryStats(reads, p.orgId, req.query.hours);
    },
  );
}
