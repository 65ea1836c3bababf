import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf } from '../../platform/auth.js';
import { ifMatchHeaders } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { toOwner } from './agents.repository.js';
import {
  agentIn,
  agentOut,
  agentParams,
  agentPatch,
  agentsQuery,
  attestationOut,
  attestIn,
  ownerIn,
  ownerOut,
  versionIn,
  versionOut,
} from './agents.schemas.js';
import { addOwner, addVersion, attestAgent, changeAgent, listAgentsPage, readAgent, registerAgent } from './agents.service.js';

const tags = ['Agent registry and identities'];

export async function agentsRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);

  r.get(
    '/agents',
    {
      ...caller('agent:read'),
      schema: {
        summary: 'Agents of the organisation; q searches name, slug and description',
        tags,
        querystring: pageQuery().extend(agentsQuery.shape),
        response: { 200: pageOf(agentOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return listAgentsPage(db, cursors, p.orgId, req.query);
    },
  );

  r.post(
    '/agents',
    {
      ...caller('agent:write'),
      schema: {
        summary: 'Register an agent; the slug is derived from the name when absent',
        tags,
        body: agentIn,
        response: { 201: agentOut },
      },
    },
    async (req, reply) => {
      const p = actorOf(req);
      return reply.status(201).send(await registerAgent(db, clock, req, p.orgId, req.body));
    },
  );

  r.get(
    '/agents/:agent_id',
    {
      ...caller('agent:read'),
      schema: { summary: 'One agent', tags, params: agentParams, response: { 200: agentOut } },
    },
    async (req) => {
      const p = actorOf(req);
      return readAgent(db, p.orgId, req.params.agent_id);
    },
  );

  r.patch(
    '/agents/:agent_id',
    {
      ...caller('agent:write'),
      schema: {
        summary: 'Change an agent (honours If-Match when sent)',
        tags,
        params: agentParams,
        headers: ifMatchHeaders.optional,
        body: agentPatch,
        response: { 200: agentOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return changeAgent(db, clock, req, p.orgId, req.params.agent_id, req.body, req.headers['if-match']);
    },
  );

  r.post(
    '/agents/:agent_id/owners',
    {
      ...caller('agent:write'),
      schema: { summary: 'Add an owner to an agent', tags, params: agentParams, body: ownerIn, response: { 201: ownerOut } },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const owner = await addOwner(db, clock, req, p.orgId, req.params.agent_id, req.body);
      return reply.status(201).send(toOwner(owner));
    },
  );

  r.post(
    '/agents/:agent_id/versions',
    {
      ...caller('agent:write'),
      schema: { summary: 'Record a new version of an agent', tags, params: agentParams, body: versionIn, response: { 201: versionOut } },
    },
    async (req, reply) => {
      const p = actorOf(req);
      const row = await addVersion(db, clock, req, p, req.params.agent_id, req.body);
      return reply.status(201).send({
        id: row.id,
        agent_id: row.agent_id,
        version_label: row.version_label,
        model_id: row.model_id,
        manifest: row.manifest,
        change_summary: row.change_summary,
        created_by: row.created_by,
        created_at: iso(row.created_at),
      });
    },
  );

  r.post(
    '/agents/:agent_id/attest',
    {
      ...caller('agent:read'),
      schema: {
        summary: "Attest that the agent's registration is accurate (kept with its date for risk scoring)",
        tags,
        params: agentParams,
        body: attestIn,
        response: { 200: attestationOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return attestAgent(db, req, p, req.params.agent_id, req.body.statement, clock.now());
    },
  );
}
