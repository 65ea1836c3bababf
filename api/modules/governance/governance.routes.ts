import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { actorOf, personOf } from '../../platform/auth.js';
import { Cursors, pageOf, pageQuery } from '../../platform/pagination.js';
import { caller } from '../../platform/route.js';
import { decisionIn, exceptionIn, exceptionOut, exceptionParams, exceptionsQuery } from './exceptions.schemas.js';
import { decideException, listExceptionsPage, requestException } from './exceptions.service.js';
import { controlOut, controlParams, frameworksOut, frameworksQuery, mappingIn, mappingOut } from './governance.schemas.js';
import { addMapping, governanceReadiness, readControl } from './governance.service.js';
import { taskIn, taskOut, taskParams, taskPatch, tasksQuery } from './remediation.schemas.js';
import { changeTask, createTask, listTasksPage } from './remediation.service.js';
import { classifiedOut, classifyIn, systemOut, systemParams, systemsQuery } from './systems.schemas.js';
import { classifySystem, listSystemsPage } from './systems.service.js';

const tags = ['Evidence and governance'];

/** Frameworks and controls, mappings, exceptions, remediation and the AI-system register (docs/governance.md). */
export async function governanceRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock, config } = app.deps;
  const cursors = new Cursors(config.sessionSecret);
  const now = () => clock.now();

  r.get(
    '/controls/:control_id',
    {
      ...caller('governance:read'),
      schema: {
        summary: 'One control of the framework catalogue: its mappings (the catalogue’s and the organisation’s) and its status over the last 90 days',
        tags,
        params: controlParams,
        response: { 200: controlOut },
      },
    },
    async (req) => readControl(db, actorOf(req).orgId, req.params.control_id, clock.now()),
  );

  r.post(
    '/controls/:control_id/mappings',
    {
      ...caller('governance:write'),
      schema: {
        summary:
          'Map an evidence event type to a control for the organisation, optionally on a condition its payload must contain (jsonb @>); ' +
          'audited, with evidence. The same type and condition twice answers 409 conflict',
        tags,
        params: controlParams,
        body: mappingIn,
        response: { 201: mappingOut },
      },
    },
    async (req, reply) => {
      const out = await addMapping(db, clock, req, actorOf(req).orgId, req.params.control_id, req.body);
      reply.code(201);
      return out;
    },
  );

  r.get(
    '/exceptions',
    {
      ...caller('governance:read'),
      schema: {
        summary: 'Exceptions to controls, newest first; expired is an approved (or undecided) exception past its expires_at',
        tags,
        querystring: pageQuery().extend(exceptionsQuery.shape),
        response: { 200: pageOf(exceptionOut) },
      },
    },
    async (req) => listExceptionsPage(db, clock, cursors, actorOf(req).orgId, req.query),
  );

  r.post(
    '/exceptions',
    {
      ...caller('governance:write'),
      schema: {
        summary: 'Ask for an exception to a control, for the organisation or one agent; pending until another person with exception:approve decides it',
        tags,
        body: exceptionIn(now),
        response: { 201: exceptionOut },
      },
    },
    async (req, reply) => {
      const out = await requestException(db, clock, req, actorOf(req), req.body);
      reply.code(201);
      return out;
    },
  );

  r.post(
    '/exceptions/:exception_id/decision',
    {
      ...caller('exception:approve'),
      schema: {
        summary:
          'Approve or reject a pending exception (a person; not its requester: 403 self_approval_prohibited; decided or lapsed already: 409 conflict). ' +
          'Audited, with evidence; the requester is notified',
        tags,
        params: exceptionParams,
        body: decisionIn,
        response: { 200: exceptionOut },
      },
    },
    async (req) => decideException(db, clock, req, personOf(req), req.params.exception_id, req.body),
  );

  r.get(
    '/governance/frameworks',
    {
      ...caller('governance:read'),
      schema: {
        summary: 'Coverage and readiness of each framework over a window of evidence (default 90 days), with the controls not met named',
        tags,
        querystring: frameworksQuery,
        response: { 200: frameworksOut },
      },
    },
    async (req) => ({ items: await governanceReadiness(db, actorOf(req).orgId, clock.now(), req.query.days) }),
  );

  r.get(
    '/governance/remediation',
    {
      ...caller('governance:read'),
      schema: {
        summary: 'Remediation tasks, newest first',
        tags,
        querystring: pageQuery().extend(tasksQuery.shape),
        response: { 200: pageOf(taskOut) },
      },
    },
    async (req) => listTasksPage(db, cursors, actorOf(req).orgId, req.query),
  );

  r.post(
    '/governance/remediation',
    {
      ...caller('governance:write'),
      schema: {
        summary: 'Open a remediation task; while it is open or in progress its control is not met. Audited',
        tags,
        body: taskIn,
        response: { 201: taskOut },
      },
    },
    async (req, reply) => {
      const out = await createTask(db, clock, req, actorOf(req), req.body);
      reply.code(201);
      return out;
    },
  );

  r.patch(
    '/governance/remediation/:task_id',
    {
      ...caller('governance:write'),
      schema: {
        summary:
          'Move a task (open → in_progress → done; open or in_progress → cancelled; done and cancelled are final: 409 conflict) ' +
          'and/or change its assignee. Audited',
        tags,
        params: taskParams,
        body: taskPatch,
        response: { 200: taskOut },
      },
    },
    async (req) => changeTask(db, clock, req, actorOf(req).orgId, req.params.task_id, req.body),
  );

  r.get(
    '/governance/systems',
    {
      ...caller('governance:read'),
      schema: {
        summary: 'The AI-system register: every agent with its classification (unclassified until classified), rationale and evidence gaps',
        tags,
        querystring: pageQuery().extend(systemsQuery.shape),
        response: { 200: pageOf(systemOut) },
      },
    },
    async (req) => listSystemsPage(db, clock, cursors, actorOf(req).orgId, req.query),
  );

  r.post(
    '/governance/systems/:agent_id/classify',
    {
      ...caller('governance:write'),
      schema: {
        summary:
          'Classify an agent as an AI system; opens a remediation task for each evidence gap of the class not yet covered ' +
          '(classifying again opens none twice). Audited, with evidence',
        tags,
        params: systemParams,
        body: classifyIn,
        response: { 200: classifiedOut },
      },
    },
    async (req) => classifySystem(db, clock, req, actorOf(req), req.params.agent_id, req.body),
  );
}
