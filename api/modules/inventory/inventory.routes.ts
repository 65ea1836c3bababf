import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { actorOf } from '../../platform/auth.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { PRIVILEGE_CLASS } from '../shared/index.js';
import type { ResourceIn } from './inventory.repository.js';
import {
  apiResourceIn,
  credentialIn,
  credentialOut,
  dataResourceIn,
  idParam,
  mcpServerIn,
  mcpServerOut,
  mcpServerPatch,
  modelIn,
  modelOut,
  modelPatch,
  resourceOut,
  toolIn,
  toolOut,
  toolPatch,
} from './inventory.schemas.js';
import {
  actOnCredential,
  blockTool,
  createCredential,
  createMcpServer,
  createModel,
  createResource,
  createTool,
  listCredentials,
  listMcpServers,
  listModels,
  listResources,
  listTools,
  setMcpServerTrust,
  updateModel,
  updateTool,
} from './inventory.service.js';

const tags = ['Inventory'];
const items = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item) });

export async function inventoryRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  // MCP servers

  r.get(
    '/mcp-servers',
    { ...caller('inventory:read'), schema: { summary: 'MCP servers', tags, response: { 200: items(mcpServerOut) } } },
    async (req) => {
      const p = actorOf(req);
      return { items: await listMcpServers(db, p.orgId) };
    },
  );

  r.post(
    '/mcp-servers',
    {
      ...caller('inventory:write'),
      schema: { summary: 'Register an MCP server; it starts as unknown', tags, body: mcpServerIn, response: { 201: mcpServerOut } },
    },
    async (req, reply) => {
      const p = actorOf(req);
      return reply.status(201).send(await createMcpServer(db, clock, req, p.orgId, req.body));
    },
  );

  r.patch(
    '/mcp-servers/:server_id',
    {
      ...caller('inventory:control'),
      schema: {
        summary: "Set an MCP server's trust state, with a reason",
        tags,
        params: idParam('server_id'),
        body: mcpServerPatch,
        response: { 200: mcpServerOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return setMcpServerTrust(db, clock, req, p.orgId, req.params.server_id as string, req.body);
    },
  );

  // Models

  r.get(
    '/models',
    { ...caller('inventory:read'), schema: { summary: 'Models', tags, response: { 200: items(modelOut) } } },
    async (req) => {
      const p = actorOf(req);
      return { items: await listModels(db, p.orgId) };
    },
  );

  r.post(
    '/models',
    { ...caller('inventory:write'), schema: { summary: 'Register a model', tags, body: modelIn, response: { 201: modelOut } } },
    async (req, reply) => {
      const p = actorOf(req);
      return reply.status(201).send(await createModel(db, clock, req, p.orgId, req.body));
    },
  );

  r.patch(
    '/models/:model_id',
    {
      ...caller('inventory:write'),
      schema: {
        summary: 'Approve a model, cap the data it may see, record its data policy',
        tags,
        params: idParam('model_id'),
        body: modelPatch,
        response: { 200: modelOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return updateModel(db, clock, req, p.orgId, req.params.model_id as string, req.body);
    },
  );

  // API and data resources, credential references

  r.get(
    '/resources',
    { ...caller('inventory:read'), schema: { summary: 'API and data resources', tags, response: { 200: items(resourceOut) } } },
    async (req) => {
      const p = actorOf(req);
      return { items: await listResources(db, p.orgId) };
    },
  );

  for (const [path, body, type] of [
    ['/resources/apis', apiResourceIn, 'api'],
    ['/resources/data', dataResourceIn, 'data'],
  ] as const) {
    r.post(
      path,
      {
        ...caller('inventory:write'),
        schema: { summary: `Register ${type === 'api' ? 'an API' : 'a data'} resource`, tags, body, response: { 201: resourceOut } },
      },
      async (req, reply) => {
        const p = actorOf(req);
        return reply.status(201).send(await createResource(db, clock, req, p.orgId, type, req.body as ResourceIn));
      },
    );
  }

  r.get(
    '/resources/credentials',
    {
      ...caller('inventory:read'),
      schema: { summary: 'Credential references (where secrets live, never the secrets)', tags, response: { 200: items(credentialOut) } },
    },
    async (req) => {
      const p = actorOf(req);
      return { items: await listCredentials(db, p.orgId) };
    },
  );

  r.post(
    '/resources/credentials',
    {
      ...caller('integration:manage'),
      schema: { summary: 'Register a credential reference: a secret-store path, never the secret', tags, body: credentialIn, response: { 201: credentialOut } },
    },
    async (req, reply) => {
      const p = actorOf(req);
      return reply.status(201).send(await createCredential(db, clock, req, p.orgId, req.body));
    },
  );

  r.post(
    '/resources/credentials/:credential_id/action',
    {
      ...caller('agent:control'),
      schema: {
        summary: 'Revoke a credential reference, or record its rotation',
        tags,
        params: idParam('credential_id'),
        body: reasonBody.extend({ action: z.enum(['revoke', 'rotate']) }),
        response: { 200: credentialOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = actorOf(req);
      return actOnCredential(db, clock, req, p.orgId, req.params.credential_id as string, req.body);
    },
  );

  // Tools

  r.get(
    '/tools',
    {
      ...caller('inventory:read'),
      schema: {
        summary: 'Tools, optionally of one MCP server or privilege class',
        tags,
        querystring: z.object({ mcp_server_id: z.uuid().optional(), privilege_class: z.enum(PRIVILEGE_CLASS).optional() }),
        response: { 200: items(toolOut) },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return { items: await listTools(db, p.orgId, req.query) };
    },
  );

  r.post(
    '/tools',
    { ...caller('inventory:write'), schema: { summary: 'Register a tool', tags, body: toolIn, response: { 201: toolOut } } },
    async (req, reply) => {
      const p = actorOf(req);
      return reply.status(201).send(await createTool(db, clock, req, p.orgId, req.body));
    },
  );

  r.patch(
    '/tools/:tool_id',
    {
      ...caller('inventory:write'),
      schema: {
        summary: "Reclassify a tool, set its rate limit or credential (Tollgate's class overrides server annotations)",
        tags,
        params: idParam('tool_id'),
        body: toolPatch,
        response: { 200: toolOut },
      },
    },
    async (req) => {
      const p = actorOf(req);
      return updateTool(db, clock, req, p.orgId, req.params.tool_id as string, req.body);
    },
  );

  r.post(
    '/tools/:tool_id/block',
    {
      ...caller('inventory:control'),
      schema: {
        summary: 'Block or unblock a tool for every agent',
        tags,
        params: idParam('tool_id'),
        body: reasonBody.extend({ blocked: z.boolean() }),
        response: { 200: toolOut },
      },
    },
    async (req) => {
      requireConfirmation(req.body);
      const p = actorOf(req);
      return blockTool(db, clock, req, p.orgId, req.params.tool_id as string, req.body);
    },
  );
}
