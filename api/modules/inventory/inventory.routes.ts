import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { inScope } from '../../db/database.js';
import { actorOf } from '../../platform/auth.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { ApiError } from '../../platform/errors.js';
import { reasonBody, requireConfirmation } from '../../platform/reason.js';
import { caller } from '../../platform/route.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { audit } from '../audit/audit.js';
import { auditWithEvidence } from '../evidence/record.js';
import { PRIVILEGE_CLASS } from '../shared/enums.js';
import { checkReference, recordOr404, toCredential, toMcpServer, toModel, toResource, toTool } from './inventory.repository.js';
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

const tags = ['Inventory'];
const items = <T extends z.ZodType>(item: T) => z.object({ items: z.array(item) });

/** Maps a unique violation to 409 conflict naming the field that must be unique. */
async function unique<T>(field: string, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('conflict', `${what} exists already.`, { field });
    throw err;
  }
}

export async function inventoryRoutes(app: FastifyInstance): Promise<void> {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const { db, clock } = app.deps;

  // MCP servers

  r.get(
    '/mcp-servers',
    { ...caller('inventory:read'), schema: { summary: 'MCP servers', tags, response: { 200: items(mcpServerOut) } } },
    async (req) => {
      const p = actorOf(req);
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const servers = await tx.selectFrom('mcp_servers').selectAll().where('org_id', '=', p.orgId).orderBy('created_at').orderBy('id').execute();
        const counts = await tx
          .selectFrom('tools')
          .select((eb) => ['mcp_server_id', eb.fn.countAll<string>().as('n')])
          .where('org_id', '=', p.orgId)
          .where('mcp_server_id', 'is not', null)
          .groupBy('mcp_server_id')
          .execute();
        const n = new Map(counts.map((c) => [c.mcp_server_id, Number(c.n)]));
        return { items: servers.map((s) => toMcpServer(s, n.get(s.id) ?? 0)) };
      });
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
      const row = await unique('endpoint', 'An MCP server with this endpoint', () =>
        inScope(db, { orgId: p.orgId }, async (tx) => {
          const now = clock.now();
          const s = await tx
            .insertInto('mcp_servers')
            .values({ id: randomUUID(), org_id: p.orgId, ...req.body, publisher: req.body.publisher ?? null, created_at: now, updated_at: now })
            .returningAll()
            .executeTakeFirstOrThrow();
          await audit(tx, req, p.orgId, { action: 'mcp_server.created', targetType: 'mcp_server', targetId: s.id, details: { endpoint: s.endpoint } });
          return s;
        }),
      );
      return reply.status(201).send(toMcpServer(row, 0));
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
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await recordOr404(tx, 'mcp_servers', p.orgId, req.params.server_id as string, 'MCP server', true);
        const after = await tx
          .updateTable('mcp_servers')
          .set({ trust_state: req.body.trust_state, version: before.version + 1, updated_at: clock.now() })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        const trustState = { from: before.trust_state, to: after.trust_state };
        await auditWithEvidence(
          tx,
          req,
          p.orgId,
          { action: 'mcp_server.trust_changed', targetType: 'mcp_server', targetId: before.id, details: { reason: req.body.reason, trust_state: trustState } },
          { eventType: 'mcp_trust_change', payload: { mcp_server_id: before.id, reason: req.body.reason, trust_state: trustState } },
        );
        const tools = await tx.selectFrom('tools').select('id').where('org_id', '=', p.orgId).where('mcp_server_id', '=', before.id).execute();
        return toMcpServer(after, tools.length);
      });
    },
  );

  // Models

  r.get(
    '/models',
    { ...caller('inventory:read'), schema: { summary: 'Models', tags, response: { 200: items(modelOut) } } },
    async (req) => {
      const p = actorOf(req);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) =>
        tx.selectFrom('models').selectAll().where('org_id', '=', p.orgId).orderBy('created_at').orderBy('id').execute(),
      );
      return { items: rows.map(toModel) };
    },
  );

  r.post(
    '/models',
    { ...caller('inventory:write'), schema: { summary: 'Register a model', tags, body: modelIn, response: { 201: modelOut } } },
    async (req, reply) => {
      const p = actorOf(req);
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        const m = await tx
          .insertInto('models')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            ...req.body,
            model_version: req.body.model_version ?? null,
            max_data_classification: null,
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, { action: 'model.created', targetType: 'model', targetId: m.id });
        return m;
      });
      return reply.status(201).send(toModel(row));
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
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await recordOr404(tx, 'models', p.orgId, req.params.model_id as string, 'model', true);
        const changes = changesOf(before, req.body);
        if (Object.keys(changes).length === 0) return toModel(before);
        const after = await tx
          .updateTable('models')
          .set({ ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, { action: 'model.updated', targetType: 'model', targetId: before.id, details: changes });
        return toModel(after);
      });
    },
  );

  // API and data resources, credential references

  r.get(
    '/resources',
    { ...caller('inventory:read'), schema: { summary: 'API and data resources', tags, response: { 200: items(resourceOut) } } },
    async (req) => {
      const p = actorOf(req);
      const rows = await inScope(db, { orgId: p.orgId }, (tx) =>
        tx.selectFrom('resources').selectAll().where('org_id', '=', p.orgId).orderBy('created_at').orderBy('id').execute(),
      );
      return { items: rows.map(toResource) };
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
        const b = req.body as z.infer<typeof apiResourceIn> & z.infer<typeof dataResourceIn>;
        const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
          const res = await tx
            .insertInto('resources')
            .values({
              id: randomUUID(),
              org_id: p.orgId,
              resource_type: type,
              name: b.name,
              system: b.system,
              base_url: b.base_url ?? null,
              auth_type: b.auth_type ?? null,
              criticality: b.criticality ?? null,
              kind: b.kind ?? null,
              classification: b.classification ?? null,
              contains_personal_data: b.contains_personal_data ?? null,
              region: b.region ?? null,
              created_at: clock.now(),
            })
            .returningAll()
            .executeTakeFirstOrThrow();
          await audit(tx, req, p.orgId, { action: `resource.${type}_created`, targetType: 'resource', targetId: res.id });
          return res;
        });
        return reply.status(201).send(toResource(row));
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
      const rows = await inScope(db, { orgId: p.orgId }, (tx) =>
        tx.selectFrom('credential_refs').selectAll().where('org_id', '=', p.orgId).orderBy('created_at').orderBy('id').execute(),
      );
      return { items: rows.map(toCredential) };
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
      const row = await inScope(db, { orgId: p.orgId }, async (tx) => {
        const now = clock.now();
        const c = await tx
          .insertInto('credential_refs')
          .values({
            id: randomUUID(),
            org_id: p.orgId,
            ...req.body,
            rotation_interval_days: req.body.rotation_interval_days ?? null,
            last_rotated_at: null,
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, { action: 'credential.created', targetType: 'credential', targetId: c.id, details: { provider: c.provider } });
        return c;
      });
      return reply.status(201).send(toCredential(row));
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
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await recordOr404(tx, 'credential_refs', p.orgId, req.params.credential_id as string, 'credential', true);
        if (before.status === 'revoked') throw new ApiError('conflict', 'The credential is revoked.');
        const now = clock.now();
        const after = await tx
          .updateTable('credential_refs')
          .set({
            ...(req.body.action === 'revoke' ? { status: 'revoked' } : { last_rotated_at: now }),
            version: before.version + 1,
            updated_at: now,
          })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: `credential.${req.body.action}`,
          targetType: 'credential',
          targetId: before.id,
          details: { reason: req.body.reason },
        });
        return toCredential(after);
      });
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
      const rows = await inScope(db, { orgId: p.orgId }, (tx) => {
        let q = tx.selectFrom('tools').selectAll().where('org_id', '=', p.orgId);
        if (req.query.mcp_server_id) q = q.where('mcp_server_id', '=', req.query.mcp_server_id);
        if (req.query.privilege_class) q = q.where('privilege_class', '=', req.query.privilege_class);
        return q.orderBy('tool_key').execute();
      });
      return { items: rows.map(toTool) };
    },
  );

  r.post(
    '/tools',
    { ...caller('inventory:write'), schema: { summary: 'Register a tool', tags, body: toolIn, response: { 201: toolOut } } },
    async (req, reply) => {
      const p = actorOf(req);
      const b = req.body;
      const row = await unique('tool_key', `The tool ${b.tool_key}`, () =>
        inScope(db, { orgId: p.orgId }, async (tx) => {
          await checkReference(tx, p.orgId, 'mcp_server_id', 'mcp_servers', b.mcp_server_id);
          await checkReference(tx, p.orgId, 'api_resource_id', 'resources', b.api_resource_id, 'api');
          await checkReference(tx, p.orgId, 'data_resource_id', 'resources', b.data_resource_id, 'data');
          await checkReference(tx, p.orgId, 'credential_ref_id', 'credential_refs', b.credential_ref_id);
          const now = clock.now();
          const t = await tx
            .insertInto('tools')
            .values({
              id: randomUUID(),
              org_id: p.orgId,
              ...b,
              mcp_server_id: b.mcp_server_id ?? null,
              api_resource_id: b.api_resource_id ?? null,
              data_resource_id: b.data_resource_id ?? null,
              credential_ref_id: b.credential_ref_id ?? null,
              operations: [...new Set(b.operations)],
              input_schema: JSON.stringify(b.input_schema),
              rate_limit_per_minute: null,
              created_at: now,
              updated_at: now,
            })
            .returningAll()
            .executeTakeFirstOrThrow();
          await audit(tx, req, p.orgId, {
            action: 'tool.created',
            targetType: 'tool',
            targetId: t.id,
            details: { tool_key: t.tool_key, privilege_class: t.privilege_class },
          });
          return t;
        }),
      );
      return reply.status(201).send(toTool(row));
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
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await recordOr404(tx, 'tools', p.orgId, req.params.tool_id as string, 'tool', true);
        await checkReference(tx, p.orgId, 'credential_ref_id', 'credential_refs', req.body.credential_ref_id);
        const changes = changesOf(before, req.body);
        if (Object.keys(changes).length === 0) return toTool(before);
        const after = await tx
          .updateTable('tools')
          .set({ ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, { action: 'tool.updated', targetType: 'tool', targetId: before.id, details: changes });
        return toTool(after);
      });
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
      return inScope(db, { orgId: p.orgId }, async (tx) => {
        const before = await recordOr404(tx, 'tools', p.orgId, req.params.tool_id as string, 'tool', true);
        const after = await tx
          .updateTable('tools')
          .set({ blocked: req.body.blocked, version: before.version + 1, updated_at: clock.now() })
          .where('org_id', '=', p.orgId)
          .where('id', '=', before.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        await audit(tx, req, p.orgId, {
          action: req.body.blocked ? 'tool.blocked' : 'tool.unblocked',
          targetType: 'tool',
          targetId: before.id,
          details: { reason: req.body.reason },
        });
        return toTool(after);
      });
    },
  );
}
