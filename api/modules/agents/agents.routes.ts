import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { inScope, type Tx } from '../../db/database.js';
import { actorOf } from '../../platform/auth.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { notFound, validationFailed } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/audit.js';
import { getAgent, listAgents, ownersOf, toAgent, toOwner } from './agents.repository.js';
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
import { checkPlan, checkProductionRequirements, createAgent } from './agents.service.js';

const tags = ['Agent registry and identities'];

/** The agent, or 404 not_found: another organisation's agent does not exist here. */
export async function agentOr404(tx: Tx, orgId: string, agentId: string, lock = false) {
  const agent = await getAgent(tx, orgId, agentId, lock);
  if (!agent) throw notFound('No such agent.');
  return agent;
}

export async function agentWithOwners(tx: Tx, orgId: string, agentId: string) {
  const agent = await agentOr404(tx, orgId, agentId);
  return toAgent(agent, (await ownersOf(tx, orgId, [agentId])).get(agentId)!);
}

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
      const { limit, cursor, ...filters } = req.query;
      const scope = `agents:${p.orgId}`;
      const after = cursors.decode(scope, cursor);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const rows = await listAgents(tx, p.orgId, filters, after, limit);
        const owners = await ownersOf(tx, p.orgId, rows.map((a) => a.id));
        return cursors.page(scope, rows, limit, (a) => ({ t: iso(a.created_at), id: a.id }), (a) => toAgent(a, owners.get(a.id) ?? []));
      });
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
      const created = await inScope(db, { orgId: p.orgId }, (tx) => createAgent(tx, req, p.orgId, req.body));
      return reply.status(201).send(toAgent(created.agent, created.owners));
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
      return inScope(db, { orgId: p.orgId }, (tx) => agentWithOwners(tx, p.orgId, req.params.agent_id));
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
        body: agentPatch,
        response: { 200: agentOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      const id = req.params.agent_id;
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await agentOr404(tx, p.orgId, id, true);
        checkIfMatch(req.headers['if-match'], before.version, false);
        const changes = changesOf(before, req.body);
        const next = { ...before, ...valuesOf(changes) } as typeof before;
        if (next.environment === 'production' && (changes.environment || changes.purpose || changes.data_classification)) {
          const owners = (await ownersOf(tx, p.orgId, [id])).get(id)!;
          checkProductionRequirements({ owners: owners.length, purpose: next.purpose, dataClassification: next.data_classification });
        }
        if (changes.environment) await checkPlan(tx, p.orgId, next.environment, before);
        if (Object.keys(changes).length > 0) {
          await tx
            .updateTable('agents')
            .set({ ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() })
            .where('org_id', '=', p.orgId)
            .where('id', '=', id)
            .execute();
          await audit(tx, req, p.orgId, { action: 'agent.updated', targetType: 'agent', targetId: id, details: changes });
        }
        return agentWithOwners(tx, p.orgId, id);
      });
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
      const owner = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        const row = await tx
          .insertInto('agent_owners')
          .values({ id: randomUUID(), org_id: p.orgId, agent_id: req.params.agent_id, ...req.body, created_at: clock.now() })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'agent.owner_added',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: { owner_id: row.id, owner_type: row.owner_type },
        });
        return row;
      });
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
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id);
        if (req.body.model_id) {
          const model = await tx
            .selectFrom('models')
            .select('id')
            .where('org_id', '=', p.orgId)
            .where('id', '=', req.body.model_id)
            .executeTakeFirst();
          if (!model) throw validationFailed([{ field: 'model_id', message: 'no such model in this organisation' }]);
        }
        const version = await tx
          .insertInto('agent_versions')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            agent_id: req.params.agent_id,
            version_label: req.body.version_label,
            model_id: req.body.model_id ?? null,
            manifest: JSON.stringify(req.body.manifest),
            change_summary: req.body.change_summary,
            created_by: p.userId,
            created_at: clock.now(),
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: 'agent.version_added',
          targetType: 'agent',
          targetId: req.params.agent_id,
          details: { version_id: version.id, version_label: version.version_label },
        });
        return version;
      });
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
      const now = clock.now();
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        await agentOr404(tx, p.orgId, req.params.agent_id, true);
        const id = randomUUID();
        await tx
          .insertInto('agent_attestations')
          .values({ id, org_id: p.orgId, agent_id: req.params.agent_id, statement: req.body.statement, attested_by: p.userId, attested_at: now })
          .execute();
        await tx
          .updateTable('agents')
          .set({ last_attested_at: now })
          .where('org_id', '=', p.orgId)
          .where('id', '=', req.params.agent_id)
          .execute();
        await audit(tx, req, p.orgId, { action: 'agent.attested', targetType: 'agent', targetId: req.params.agent_id });
        return { id, agent_id: req.params.agent_id, statement: req.body.statement, attested_by: p.userId, attested_at: iso(now) };
      });
    },
  );
}
