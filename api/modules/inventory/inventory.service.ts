import type { RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { changesOf, valuesOf } from '../../platform/changes.js';
import { ApiError, validationFailed } from '../../platform/errors.js';
import { outboundUrlProblem } from '../../platform/outbound.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import {
  checkReference,
  findTools,
  insertCredential,
  insertMcpServer,
  insertModel,
  insertResource,
  insertTool,
  listRecords,
  recordOr404,
  toCredential,
  toMcpServer,
  toModel,
  toolCountsByServer,
  toolsOfServer,
  toResource,
  toTool,
  updateRecord,
  type ResourceIn,
  type ToolFilters,
} from './inventory.repository.js';
import type { credentialIn, mcpServerIn, mcpServerPatch, modelIn, modelPatch, toolIn, toolPatch } from './inventory.schemas.js';

/** Maps a unique violation to 409 conflict naming the field that must be unique. */
async function unique<T>(field: string, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('conflict', `${what} exists already.`, { field });
    throw err;
  }
}

/**
 * Refuses an endpoint Tollgate must not call (loopback, private, link-local, metadata: the connectors
 * would call it from inside the deployment's network) with 422 naming the field, unless
 * ALLOW_PRIVATE_ENDPOINTS is on (development) or the address is in OUTBOUND_ALLOWED_CIDRS. Checked here rather than in the zod schema because it
 * depends on that setting.
 */
function checkEndpoint(req: RequestContext, field: string, url: string): void {
  const { config } = req.server.deps;
  const problem = outboundUrlProblem(url, { allowPrivate: config.allowPrivateEndpoints, allowedCidrs: config.outbound.allowedCidrs });
  if (problem) throw validationFailed([{ field, message: problem }], `The ${field} ${problem}.`);
}

// MCP servers

export function listMcpServers(db: Db, orgId: string) {
  return inScope(db, { orgId }, async (tx) => {
    const servers = await listRecords(tx, 'mcp_servers', orgId);
    const counts = await toolCountsByServer(tx, orgId);
    return servers.map((s) => toMcpServer(s, counts.get(s.id) ?? 0));
  });
}

/** Registers an MCP server; it starts as unknown. */
export async function createMcpServer(db: Db, clock: Clock, req: RequestContext, orgId: string, body: z.output<typeof mcpServerIn>) {
  checkEndpoint(req, 'endpoint', body.endpoint);
  const row = await unique('endpoint', 'An MCP server with this endpoint', () =>
    inScope(db, { orgId }, async (tx) => {
      const s = await insertMcpServer(tx, orgId, body, clock.now());
      await audit(tx, req, orgId, { action: 'mcp_server.created', targetType: 'mcp_server', targetId: s.id, details: { endpoint: s.endpoint } });
      return s;
    }),
  );
  return toMcpServer(row, 0);
}

/** Sets an MCP server's trust state: audited and recorded as evidence, with the reason. */
export function setMcpServerTrust(db: Db, clock: Clock, req: RequestContext, orgId: string, serverId: string, body: z.output<typeof mcpServerPatch>) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await recordOr404(tx, 'mcp_servers', orgId, serverId, 'MCP server', true);
    const after = await updateRecord(tx, 'mcp_servers', orgId, before.id, {
      trust_state: body.trust_state,
      version: before.version + 1,
      updated_at: clock.now(),
    });
    const trustState = { from: before.trust_state, to: after.trust_state };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'mcp_server.trust_changed', targetType: 'mcp_server', targetId: before.id, details: { reason: body.reason, trust_state: trustState } },
      { eventType: 'mcp_trust_change', payload: { mcp_server_id: before.id, reason: body.reason, trust_state: trustState } },
    );
    await recordTelemetry(tx, orgId, [
      telemetryEvents.trustChanged({
        at: clock.now(),
        correlationId: req.id,
        mcpServerId: before.id,
        serverName: before.name,
        from: before.trust_state,
        to: after.trust_state,
        reason: body.reason,
        source: 'person',
      }),
    ]);
    const tools = await toolsOfServer(tx, orgId, before.id);
    return toMcpServer(after, tools.length);
  });
}

// Models

export async function listModels(db: Db, orgId: string) {
  const rows = await inScope(db, { orgId }, (tx) => listRecords(tx, 'models', orgId));
  return rows.map(toModel);
}

export async function createModel(db: Db, clock: Clock, req: RequestContext, orgId: string, body: z.output<typeof modelIn>) {
  const row = await inScope(db, { orgId }, async (tx) => {
    const m = await insertModel(tx, orgId, body, clock.now());
    await audit(tx, req, orgId, { action: 'model.created', targetType: 'model', targetId: m.id });
    return m;
  });
  return toModel(row);
}

/** Applies a model patch; a patch that changes nothing writes nothing. */
export function updateModel(db: Db, clock: Clock, req: RequestContext, orgId: string, modelId: string, body: z.output<typeof modelPatch>) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await recordOr404(tx, 'models', orgId, modelId, 'model', true);
    const changes = changesOf(before, body);
    if (Object.keys(changes).length === 0) return toModel(before);
    const after = await updateRecord(tx, 'models', orgId, before.id, { ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() });
    await audit(tx, req, orgId, { action: 'model.updated', targetType: 'model', targetId: before.id, details: changes });
    return toModel(after);
  });
}

// API and data resources, credential references

export async function listResources(db: Db, orgId: string) {
  const rows = await inScope(db, { orgId }, (tx) => listRecords(tx, 'resources', orgId));
  return rows.map(toResource);
}

export async function createResource(db: Db, clock: Clock, req: RequestContext, orgId: string, type: 'api' | 'data', body: ResourceIn) {
  if (type === 'api') checkEndpoint(req, 'base_url', body.base_url);
  const row = await inScope(db, { orgId }, async (tx) => {
    const res = await insertResource(tx, orgId, type, body, clock.now());
    await audit(tx, req, orgId, { action: `resource.${type}_created`, targetType: 'resource', targetId: res.id });
    return res;
  });
  return toResource(row);
}

export async function listCredentials(db: Db, orgId: string) {
  const rows = await inScope(db, { orgId }, (tx) => listRecords(tx, 'credential_refs', orgId));
  return rows.map(toCredential);
}

export async function createCredential(db: Db, clock: Clock, req: RequestContext, orgId: string, body: z.output<typeof credentialIn>) {
  const row = await inScope(db, { orgId }, async (tx) => {
    const c = await insertCredential(tx, orgId, body, clock.now());
    await audit(tx, req, orgId, { action: 'credential.created', targetType: 'credential', targetId: c.id, details: { provider: c.provider } });
    return c;
  });
  return toCredential(row);
}

/** Revokes a credential reference or records its rotation; a revoked one answers 409. */
export function actOnCredential(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  credentialId: string,
  body: { action: 'revoke' | 'rotate'; reason: string },
) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await recordOr404(tx, 'credential_refs', orgId, credentialId, 'credential', true);
    if (before.status === 'revoked') throw new ApiError('conflict', 'The credential is revoked.');
    const now = clock.now();
    const after = await updateRecord(tx, 'credential_refs', orgId, before.id, {
      ...(body.action === 'revoke' ? { status: 'revoked' } : { last_rotated_at: now }),
      version: before.version + 1,
      updated_at: now,
    });
    await audit(tx, req, orgId, {
      action: `credential.${body.action}`,
      targetType: 'credential',
      targetId: before.id,
      details: { reason: body.reason },
    });
    return toCredential(after);
  });
}

// Tools

export async function listTools(db: Db, orgId: string, filters: ToolFilters) {
  const rows = await inScope(db, { orgId }, (tx) => findTools(tx, orgId, filters));
  return rows.map(toTool);
}

/** Registers a tool; every record it references must be the organisation's. */
export async function createTool(db: Db, clock: Clock, req: RequestContext, orgId: string, b: z.output<typeof toolIn>) {
  const row = await unique('tool_key', `The tool ${b.tool_key}`, () =>
    inScope(db, { orgId }, async (tx) => {
      await checkReference(tx, orgId, 'mcp_server_id', 'mcp_servers', b.mcp_server_id);
      await checkReference(tx, orgId, 'api_resource_id', 'resources', b.api_resource_id, 'api');
      await checkReference(tx, orgId, 'data_resource_id', 'resources', b.data_resource_id, 'data');
      await checkReference(tx, orgId, 'credential_ref_id', 'credential_refs', b.credential_ref_id);
      const t = await insertTool(tx, orgId, b, clock.now());
      await audit(tx, req, orgId, {
        action: 'tool.created',
        targetType: 'tool',
        targetId: t.id,
        details: { tool_key: t.tool_key, privilege_class: t.privilege_class },
      });
      return t;
    }),
  );
  return toTool(row);
}

/**
 * Applies a tool patch; a patch that changes nothing writes nothing. A privilege class set here is
 * staff's (privilege_source `staff`): discovery keeps it from then on instead of its own classification.
 */
export function updateTool(db: Db, clock: Clock, req: RequestContext, orgId: string, toolId: string, body: z.output<typeof toolPatch>) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await recordOr404(tx, 'tools', orgId, toolId, 'tool', true);
    await checkReference(tx, orgId, 'credential_ref_id', 'credential_refs', body.credential_ref_id);
    // Sending the class the tool already has still makes it staff's: a person confirmed it.
    const source = body.privilege_class != null ? { privilege_source: 'staff' as const } : {};
    const changes = changesOf(before, { ...body, ...source });
    if (Object.keys(changes).length === 0) return toTool(before);
    const after = await updateRecord(tx, 'tools', orgId, before.id, { ...valuesOf(changes), version: before.version + 1, updated_at: clock.now() });
    await audit(tx, req, orgId, { action: 'tool.updated', targetType: 'tool', targetId: before.id, details: changes });
    return toTool(after);
  });
}

/** Blocks or unblocks a tool for every agent. */
export function blockTool(db: Db, clock: Clock, req: RequestContext, orgId: string, toolId: string, body: { blocked: boolean; reason: string }) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await recordOr404(tx, 'tools', orgId, toolId, 'tool', true);
    const after = await updateRecord(tx, 'tools', orgId, before.id, { blocked: body.blocked, version: before.version + 1, updated_at: clock.now() });
    await audit(tx, req, orgId, {
      action: body.blocked ? 'tool.blocked' : 'tool.unblocked',
      targetType: 'tool',
      targetId: before.id,
      details: { reason: body.reason },
    });
    return toTool(after);
  });
}
