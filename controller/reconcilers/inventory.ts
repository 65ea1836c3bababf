import type { KindObject } from '../kinds.js';
import { differing, MCP_FIXED, mcpServerBody, TOOL_FIXED, TOOL_PATCHABLE, toolBody } from '../resources.js';
import { TollgateApiError } from '../tollgate-api.js';
import { waiting, type KindReconciler, type Outcome, type ReconcileContext } from './types.js';

interface ToolRecord extends Record<string, unknown> {
  id: string;
  tool_key: string;
  blocked: boolean;
}
interface McpRecord extends Record<string, unknown> {
  id: string;
  name: string;
  trust_state: string;
}

async function byId<T>(ctx: ReconcileContext, list: string, id: string | undefined, match: (r: T) => boolean): Promise<T | undefined> {
  const all = await ctx.api.list<T & { id: string }>(list);
  return (id ? all.find((r) => r.id === id) : undefined) ?? all.find(match);
}

/** A declared field that the registry cannot change now differs: the record was not created from this object. */
function mismatch(registryId: string, fields: string[], what: string): Outcome {
  return {
    registryId,
    ready: false,
    settled: true,
    reason: 'RegistryMismatch',
    message: `${what} exists in Tollgate with other ${fields.join(', ')}, which Tollgate does not change; make the spec match or choose another name`,
  };
}

/**
 * Tool → the tool record. Its classes (privilegeClass, approvalClass) follow the spec; the other fields
 * are fixed once registered (the CRD refuses changes). A blocked tool stays blocked. Deleting the
 * resource blocks the tool for every agent (Tollgate keeps tools, as their history refers to them).
 */
export function toolReconciler(ctx: ReconcileContext): KindReconciler<KindObject<'Tool'>> {
  const { api } = ctx;
  const find = (obj: KindObject<'Tool'>) =>
    byId<ToolRecord>(ctx, '/tools', obj.status?.registryId, (t) => t.tool_key === obj.spec.toolKey);

  return {
    async apply(obj) {
      let mcpServerId: string | null = null;
      const ref = obj.spec.mcpServerRef?.name;
      if (ref) {
        const server = ctx.informers.MCPServer.get(`${obj.metadata!.namespace}/${ref}`);
        mcpServerId = server?.status?.registryId ?? null;
        if (!mcpServerId) return waiting('MCPServerNotReady', `waiting for MCPServer ${ref} of this namespace to be registered`);
      }
      const declared = toolBody(obj, mcpServerId);
      let record = await find(obj);
      let created = false;
      if (!record) {
        try {
          record = await api.post<ToolRecord>('/tools', declared);
          created = true;
        } catch (err) {
          if (!(err instanceof TollgateApiError && err.status === 409)) throw err;
          record = await find(obj);
          if (!record) throw err;
        }
      }
      const putBack: string[] = [];
      if (!created) {
        const fixed = differing(declared, record, TOOL_FIXED);
        if (fixed.length) return mismatch(record.id, fixed, `tool ${obj.spec.toolKey}`);
        const changed = differing(declared, record, TOOL_PATCHABLE);
        if (changed.length) {
          await api.patch(`/tools/${record.id}`, Object.fromEntries(changed.map((f) => [f, declared[f]])));
          putBack.push(...changed);
        }
      }
      return {
        registryId: record.id,
        ready: true,
        reason: 'Reconciled',
        message: `registered as tool ${obj.spec.toolKey}${record.blocked ? '; blocked in Tollgate' : ''}`,
        putBack,
      };
    },

    async finalize(obj) {
      const record = await find(obj);
      if (!record || record.blocked) return;
      const { namespace, name } = obj.metadata as { namespace: string; name: string };
      await api.post(`/tools/${record.id}/block`, {
        blocked: true,
        reason: `Tool ${namespace}/${name} deleted in Kubernetes`,
        confirm: true,
      });
    },
  };
}

/**
 * MCPServer → the MCP server record. Tollgate has no operation that edits a server's endpoint,
 * transport, auth type or publisher, so the CRD makes the spec immutable. Its trust state is a
 * reviewer's decision in Tollgate, shown in the status. Deleting the resource quarantines the server.
 */
export function mcpServerReconciler(ctx: ReconcileContext): KindReconciler<KindObject<'MCPServer'>> {
  const { api } = ctx;
  const find = (obj: KindObject<'MCPServer'>) =>
    byId<McpRecord>(ctx, '/mcp-servers', obj.status?.registryId, (s) => s.name === obj.metadata!.name);

  return {
    async apply(obj) {
      const declared = mcpServerBody(obj);
      let record = await find(obj);
      let created = false;
      if (!record) {
        try {
          record = await api.post<McpRecord>('/mcp-servers', declared);
          created = true;
        } catch (err) {
          if (!(err instanceof TollgateApiError && err.status === 409)) throw err;
          record = await find(obj);
          if (!record) throw err;
        }
      }
      const status = { trustState: record.trust_state };
      if (!created) {
        const fixed = differing(declared, record, MCP_FIXED);
        if (fixed.length) return { ...mismatch(record.id, fixed, `MCP server ${declared.name as string}`), status };
      }
      return {
        registryId: record.id,
        ready: true,
        reason: 'Reconciled',
        message: `registered as MCP server ${declared.name as string}, trust state ${record.trust_state}`,
        status,
      };
    },

    async finalize(obj) {
      const record = await find(obj);
      if (!record || record.trust_state === 'quarantined') return;
      const { namespace, name } = obj.metadata as { namespace: string; name: string };
      await api.patch(`/mcp-servers/${record.id}`, {
        trust_state: 'quarantined',
        reason: `MCPServer ${namespace}/${name} deleted in Kubernetes`,
      });
    },
  };
}
