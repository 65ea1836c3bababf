import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { personOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { APPROVAL_STATUS, approvalDecisionIn, approvalOut, approvalParams } from './approvals.schemas.js';
import { decideApproval, listApprovalsPage, readApproval } from './approvals.service.js';

const tags = ['Gateway: actions, decisions, approvals'];

export async function approvalsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config, evidence } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/approvals',
    {
      ...caller('approval:read'),
      schema: {
        summary: 'Approval requests, newest first; pending by default',
        tags,
        querystring: pageQuery().extend({ status: z.enum(APPROVAL_STATUS).default('pending') }),
        response: { 200: pageOf(approvalOut) },
      },
    },
    async (req) => {
      const p = personOf(req);
      return listApprovalsPage(db, clock, cursors, p.orgId, req.query);
    },
  );

  r.get(
    '/approvals/:approval_id',
    {
      ...caller('approval:read'),
      schema: { summary: 'One approval request with its votes', tags, params: approvalParams, response: { 200: approvalOut } },
    },
    async (req) => {
      const p = personOf(req);
      return readApproval(db, clock, p.orgId, req.params.approval_id);
    },
  );

  r.post(
    '/approvals/:approval_id/decision',
    {
      ...caller('approval:decide'),
      schema: {
        summary: 'Approve or reject; approvals needing two people take two different ones',
        tags,
        params: approvalParams,
        body: approvalDecisionIn,
        response: { 200: approvalOut },
      },
    },
    async (req) => {
      const p = personOf(req);
      return decideApproval(db, clock, evidence, req, p, req.params.approval_id, req.body);
    },
  );
}
