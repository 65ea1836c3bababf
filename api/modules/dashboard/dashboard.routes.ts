import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { caller } from '../../platform/route.js';
import { dashboardOut, dashboardQuery } from './dashboard.schemas.js';
import { dashboard } from './dashboard.service.js';

export async function dashboardRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  r.get(
    '/dashboard',
    {
      ...caller('agent:read'),
      schema: {
        summary: 'The governance dashboard: agents, decisions, deny reasons, approvals, findings, MCP trust, risk trend',
        description:
          'Counts as of now (agents by environment, risk band and status; pending approvals; open findings by severity; ' +
          'MCP servers by trust state) and daily series over the last `days` days, today included (UTC): decisions ' +
          'per day by outcome, the most frequent deny reasons, the average and highest risk score per day. Every ' +
          'breakdown lists each value of its enumeration, zero included. docs/telemetry.md, The dashboard.',
        tags: ['Integrations and reports'],
        querystring: dashboardQuery,
        response: { 200: dashboardOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return dashboard(db, clock, p.orgId, req.query.days);
    },
  );
}
