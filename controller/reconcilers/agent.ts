import type { AgentSpec, KindObject } from '../kinds.js';
import {
  AGENT_PATCHABLE,
  agentBody,
  differing,
  IDENTITY_ANNOTATION,
  identitySecretLabels,
  identitySecretName,
  sameJson,
  snakeKeys,
} from '../resources.js';
import { TollgateApiError } from '../tollgate-api.js';
import { waiting, type KindReconciler, type ReconcileContext } from './types.js';

type AgentObject = KindObject<'Agent'>;

interface AgentRecord extends Record<string, unknown> {
  id: string;
  slug: string;
  status: 'active' | 'suspended' | 'revoked';
  owners: { email: string; owner_type: string }[];
}
interface Binding {
  id: string;
  target_kind: string;
  target_id: string;
  actions: string[];
  delegated: boolean;
  constraints: Record<string, unknown>;
  expires_at: string | null;
  identity_id: string | null;
}
interface Delegation {
  id: string;
  principal_ref: string;
  display_name: string;
  principal_type: string;
  scopes: string[];
  expires_at: string | null;
}

/** The registry record of an Agent: by the id its status holds, else by slug (adoption after a restart). */
export async function findAgent(ctx: ReconcileContext, obj: AgentObject): Promise<AgentRecord | undefined> {
  const id = obj.status?.registryId;
  if (id) {
    try {
      return await ctx.api.get<AgentRecord>(`/agents/${id}`);
    } catch (err) {
      if (!(err instanceof TollgateApiError && err.status === 404)) throw err;
    }
  }
  const slug = obj.metadata!.name!;
  const found = await ctx.api.list<AgentRecord>(`/agents?q=${encodeURIComponent(slug)}`);
  return found.find((a) => a.slug === slug);
}

const sameTime = (a: string | null | undefined, b: string | null | undefined) =>
  (a ? Date.parse(a) : null) === (b ? Date.parse(b) : null);

/**
 * Agent → the agent record (AgentIn fields, owners), its permission bindings on tools (`spec.tools`) and
 * its delegations. Bindings and delegations that the spec does not declare are removed: the resource is
 * the whole truth about a managed agent's grants. Containment (suspension, gateway access) is the
 * security team's, never undone here. Deleting the resource revokes the agent; its evidence stays.
 */
export function agentReconciler(ctx: ReconcileContext): KindReconciler<AgentObject> {
  const { api } = ctx;
  return {
    async apply(obj) {
      const declared = agentBody(obj);
      const slug = declared.slug as string;
      // An object the controller never registered is created straight away (a 409 means it exists: adopt it);
      // one it did is read by id.
      let record = obj.status?.registryId ? await findAgent(ctx, obj) : undefined;
      let created = false;
      if (!record) {
        try {
          record = await api.post<AgentRecord>('/agents', declared);
          created = true;
        } catch (err) {
          // Created meanwhile (another replica, a person): adopt it.
          if (!(err instanceof TollgateApiError && err.status === 409)) throw err;
          record = await findAgent(ctx, obj);
          if (!record) throw err;
        }
      }
      if (record.status === 'revoked') {
        return {
          registryId: record.id,
          ready: false,
          settled: true,
          reason: 'Revoked',
          message: `the agent "${slug}" is revoked in Tollgate and stays revoked; give the Agent another name to register a new one`,
        };
      }

      const putBack: string[] = [];
      if (!created) {
        const fields = AGENT_PATCHABLE.filter((f) => declared[f] !== undefined);
        const changed = differing(declared, record, fields);
        if (changed.length) {
          await api.patch(`/agents/${record.id}`, Object.fromEntries(changed.map((f) => [f, declared[f]])));
          putBack.push(...changed);
        }
        const owners = declared.owners as { email: string; owner_type: string; name: string }[];
        const missing = owners.filter(
          (o) => !record!.owners.some((r) => r.email.toLowerCase() === o.email.toLowerCase() && r.owner_type === o.owner_type),
        );
        for (const owner of missing) await api.post(`/agents/${record.id}/owners`, owner);
        if (missing.length) putBack.push('owners');
      }

      const bindings = await syncBindings(ctx, obj, record.id, created);
      if ('missing' in bindings) {
        return waiting(
          'ToolNotFound',
          `tool "${bindings.missing}" is not in Tollgate (yet): declare a Tool with toolKey ${bindings.missing}`,
          record.id,
        );
      }
      putBack.push(...bindings.putBack);
      putBack.push(...(await syncDelegations(ctx, record.id, obj.spec.delegations ?? [], created)));
      const { rotated, ...secret } = await syncIdentitySecret(ctx, obj, record.id, created);

      const contained = record.status === 'suspended' ? '; suspended in Tollgate' : record.gateway_access === false ? '; gateway access off in Tollgate' : '';
      return {
        registryId: record.id,
        ready: true,
        reason: 'Reconciled',
        message: `registered as agent ${slug}${contained}`,
        putBack,
        status: secret,
        events: rotated ? [{ type: 'Normal', reason: 'IdentityRotated', message: rotated }] : undefined,
      };
    },

    async finalize(obj) {
      const { namespace, name } = obj.metadata as { namespace: string; name: string };
      const record = await findAgent(ctx, obj);
      // Revoking the agent revokes its identities; the Secret holding one goes with the resource.
      if (!record || record.status === 'revoked') return ctx.secrets.delete(namespace, identitySecretName(name));
      try {
        await api.post(`/agents/${record.id}/revoke`, {
          reason: `Agent ${namespace}/${name} deleted in Kubernetes`,
          confirm: true,
        });
      } catch (err) {
        if (!(err instanceof TollgateApiError && (err.status === 404 || err.status === 409))) throw err;
      }
      await ctx.secrets.delete(namespace, identitySecretName(name));
    },
  };
}

/**
 * The Agent's workload identity, in a Secret of its namespace (files client-id, client-secret) that the
 * injected sidecar mounts: issued once (POST /agents/{id}/identities), and again when the Secret is gone
 * or its identity was revoked in Tollgate. The identity the controller issued before (status.identityId)
 * is revoked when its Secret was lost, so no secret lives on that nobody holds; identities people issued
 * through the API are left alone. The Secret is owned by the Agent (garbage-collected with it).
 */
async function syncIdentitySecret(
  ctx: ReconcileContext,
  obj: AgentObject,
  agentId: string,
  created: boolean,
): Promise<{ identitySecret: string; identityId: string; rotated?: string }> {
  const { namespace, name, uid } = obj.metadata as { namespace: string; name: string; uid: string };
  const secretName = identitySecretName(name);
  const secret = created ? undefined : await ctx.secrets.get(namespace, secretName);
  const held = secret?.metadata?.annotations?.[IDENTITY_ANNOTATION];
  const identities = created ? [] : await ctx.api.list<{ id: string; status: string }>(`/identities?agent_id=${agentId}`);
  if (held && identities.some((i) => i.id === held && i.status === 'active')) return { identitySecret: secretName, identityId: held };
  const previous = obj.status?.identityId;
  if (previous && previous !== held && identities.some((i) => i.id === previous && i.status === 'active')) {
    await ctx.api.post(`/identities/${previous}/revoke`, {
      reason: `its Kubernetes Secret ${namespace}/${secretName} is gone; a new identity replaces it`,
      confirm: true,
    });
  }
  const issued = await ctx.api.post<{ id: string; client_id: string; client_secret: string }>(`/agents/${agentId}/identities`, {});
  await ctx.secrets.put({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: secretName,
      namespace,
      labels: identitySecretLabels(name),
      annotations: { [IDENTITY_ANNOTATION]: issued.id },
      ownerReferences: [{ apiVersion: obj.apiVersion!, kind: obj.kind!, name, uid, controller: true, blockOwnerDeletion: false }],
    },
    stringData: { 'client-id': issued.client_id, 'client-secret': issued.client_secret },
  });
  // A replacement, not the first issue: the agent's pods pick the new credential up from the Secret.
  const replaced = held ?? previous;
  const why = !secret ? `the Secret was gone` : held ? `identity ${held} was revoked in Tollgate` : `the Secret held no identity`;
  const rotated = replaced ? `workload identity ${replaced} replaced by ${issued.id} in Secret ${secretName}: ${why}` : undefined;
  return { identitySecret: secretName, identityId: issued.id, rotated };
}

/**
 * The registry id of each tool key, from the Tool informer's cache: a Tool of the namespace with that
 * spec.toolKey records it in status.registryId, so a reconcile costs no list of every tool. Keys the cache
 * cannot answer are looked up through the API (GET /tools, once for them all): a tool registered through
 * the REST API or by a Tool of another namespace of the organisation, or a Tool whose status is not
 * written yet, is in the registry all the same.
 */
async function toolIds(ctx: ReconcileContext, namespace: string, keys: string[]): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const tool of ctx.informers.Tool.list()) {
    const id = tool.status?.registryId;
    if (id && tool.metadata?.namespace === namespace && keys.includes(tool.spec.toolKey)) ids.set(tool.spec.toolKey, id);
  }
  if (keys.every((k) => ids.has(k))) return ids;
  for (const tool of await ctx.api.list<{ id: string; tool_key: string }>('/tools')) {
    if (keys.includes(tool.tool_key) && !ids.has(tool.tool_key)) ids.set(tool.tool_key, tool.id);
  }
  return ids;
}

/**
 * Makes the agent's tool bindings those declared; answers the fields put back (['tools'] when it changed
 * any of an existing agent), or the first tool key Tollgate does not know.
 */
async function syncBindings(
  ctx: ReconcileContext,
  obj: AgentObject,
  agentId: string,
  created: boolean,
): Promise<{ putBack: string[] } | { missing: string }> {
  const { api } = ctx;
  const declared = obj.spec.tools ?? [];
  const existing = created ? [] : await api.list<Binding>(`/agents/${agentId}/permissions`);
  if (declared.length === 0 && existing.length === 0) return { putBack: [] };
  const ids = declared.length ? await toolIds(ctx, obj.metadata!.namespace!, declared.map((t) => t.tool)) : new Map<string, string>();
  const missing = declared.find((t) => !ids.has(t.tool));
  if (missing) return { missing: missing.tool };
  const wanted = declared.map((t) => ({
    target_kind: 'tool',
    target_id: ids.get(t.tool)!,
    actions: [...new Set(t.actions)].sort(),
    constraints: snakeKeys(t.constraints ?? {}) as Record<string, unknown>,
  }));
  const keep = new Set<string>();
  const toCreate = wanted.filter((w) => {
    const match = existing.find(
      (b) =>
        !keep.has(b.id) &&
        !b.delegated &&
        b.expires_at === null &&
        b.identity_id === null &&
        b.target_kind === w.target_kind &&
        b.target_id === w.target_id &&
        sameJson([...b.actions].sort(), w.actions) &&
        sameJson(b.constraints, w.constraints),
    );
    if (match) keep.add(match.id);
    return !match;
  });
  const toDelete = existing.filter((b) => !keep.has(b.id));
  for (const b of toDelete) {
    try {
      await api.delete(`/agents/${agentId}/permissions/${b.id}`);
    } catch (err) {
      if (!(err instanceof TollgateApiError && err.status === 404)) throw err;
    }
  }
  for (const w of toCreate) await api.post(`/agents/${agentId}/permissions`, w);
  return { putBack: !created && (toCreate.length || toDelete.length) ? ['tools'] : [] };
}

/** Makes the agent's delegations those declared; answers ['delegations'] when it changed any of an existing agent. */
async function syncDelegations(
  ctx: ReconcileContext,
  agentId: string,
  declared: NonNullable<AgentSpec['delegations']>,
  created: boolean,
): Promise<string[]> {
  const { api } = ctx;
  const existing = created ? [] : await api.list<Delegation>(`/agents/${agentId}/delegations`);
  if (declared.length === 0 && existing.length === 0) return [];
  const wanted = declared.map((d) => ({
    principal_ref: d.principalRef,
    display_name: d.displayName,
    principal_type: d.principalType ?? 'user',
    scopes: d.scopes,
    expires_at: d.expiresAt ?? null,
  }));
  const keep = new Set<string>();
  const toCreate = wanted.filter((w) => {
    const match = existing.find(
      (d) =>
        !keep.has(d.id) &&
        d.principal_ref === w.principal_ref &&
        d.display_name === w.display_name &&
        d.principal_type === w.principal_type &&
        sameJson([...d.scopes].sort(), [...w.scopes].sort()) &&
        sameTime(d.expires_at, w.expires_at),
    );
    if (match) keep.add(match.id);
    return !match;
  });
  const toDelete = existing.filter((d) => !keep.has(d.id));
  for (const d of toDelete) {
    try {
      await api.delete(`/agents/${agentId}/delegations/${d.id}?reason=${encodeURIComponent('not declared in its Agent resource')}`);
    } catch (err) {
      if (!(err instanceof TollgateApiError && err.status === 404)) throw err;
    }
  }
  for (const w of toCreate) await api.post(`/agents/${agentId}/delegations`, w);
  return !created && (toCreate.length || toDelete.length) ? ['delegations'] : [];
}
