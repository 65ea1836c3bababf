import { randomUUID } from 'node:crypto';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import type { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound, validationFailed } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { recordExists } from '../inventory/index.js';
import { agentOr404 } from './agents.service.js';
import {
  bindingOf,
  bindingsOf,
  deleteBinding,
  deleteDelegation,
  delegationsOf,
  insertBinding,
  insertDelegation,
  isIdentityOf,
  repinBinding,
  toolDefinitionHashOf,
} from './bindings.repository.js';
import type { bindingIn, delegationIn } from './bindings.schemas.js';

type DelegationIn = z.output<ReturnType<typeof delegationIn>>;
type BindingIn = z.output<ReturnType<typeof bindingIn>>;

const TARGET_TABLE = {
  tool: ['tools', undefined],
  mcp_server: ['mcp_servers', undefined],
  api_resource: ['resources', 'api'],
  data_resource: ['resources', 'data'],
} as const;

export function addDelegation(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, agentId: string, body: DelegationIn) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const d = await insertDelegation(tx, {
      id: randomUUID(),
      org_id: orgId,
      agent_id: agentId,
      principal_ref: body.principal_ref,
      display_name: body.display_name,
      principal_type: body.principal_type,
      scopes: body.scopes,
      expires_at: body.expires_at ? new Date(body.expires_at) : null,
      created_by: actor.userId,
      created_at: clock.now(),
    });
    await audit(tx, req, orgId, {
      action: 'agent.delegation_added',
      targetType: 'agent',
      targetId: agentId,
      details: { delegation_id: d.id, principal_ref: d.principal_ref, scopes: d.scopes },
    });
    return d;
  });
}

/** Binds a permission on a target of the organisation, optionally to one of the agent's identities. */
export function bindPermission(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, agentId: string, b: BindingIn) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const [table, resourceType] = TARGET_TABLE[b.target_kind];
    if (!(await recordExists(tx, orgId, table, b.target_id, resourceType))) {
      throw notFound(`No such ${b.target_kind.replace('_', ' ')} in this organisation.`);
    }
    if (b.identity_id && !(await isIdentityOf(tx, orgId, agentId, b.identity_id))) {
      throw validationFailed([{ field: 'identity_id', message: 'not an identity of this agent' }]);
    }
    const now = clock.now();
    // A binding on a discovered tool is granted against the definition the person sees now.
    const pin = b.target_kind === 'tool' ? ((await toolDefinitionHashOf(tx, orgId, b.target_id)) ?? null) : null;
    const binding = await insertBinding(tx, {
      id: randomUUID(),
      org_id: orgId,
      agent_id: agentId,
      target_kind: b.target_kind,
      target_id: b.target_id,
      actions: [...new Set(b.actions)],
      delegated: b.delegated,
      constraints: JSON.stringify(b.constraints),
      expires_at: b.expires_at ? new Date(b.expires_at) : null,
      identity_id: b.identity_id ?? null,
      created_by: actor.userId,
      created_at: now,
      pinned_definition_hash: pin,
      pinned_at: pin ? now : null,
      pinned_by: pin ? actor.userId : null,
    });
    await audit(tx, req, orgId, {
      action: 'agent.permission_bound',
      targetType: 'agent',
      targetId: agentId,
      details: {
        binding_id: binding.id,
        target_kind: b.target_kind,
        target_id: b.target_id,
        actions: binding.actions,
        ...(pin ? { pinned_definition_hash: pin } : {}),
      },
    });
    return { ...binding, tool_definition_hash: pin };
  });
}

const notReapprovable = (message: string) => new ApiError('conflict', message);

/**
 * Re-approves a binding on a tool whose definition changed since it was granted: pins it to the tool's
 * current definition, so the gateway allows calls under it again. Audited and recorded as evidence
 * (binding_reapproval, with both hashes and the reason). 409 conflict when the binding is not on a tool,
 * the tool has no discovered definition, or the pin is already the current definition (nothing to approve).
 */
export function reapproveBinding(
  db: Db,
  clock: Clock,
  req: RequestContext,
  actor: ActorPrincipal,
  agentId: string,
  bindingId: string,
  reason: string,
) {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const before = await bindingOf(tx, orgId, agentId, bindingId);
    if (!before) throw notFound('No such permission binding.');
    if (before.target_kind !== 'tool') throw notReapprovable('Only a binding on a tool is pinned to a definition; this one is on another target.');
    const current = before.tool_definition_hash;
    if (current === null) throw notReapprovable('The tool has never been discovered: there is no definition to approve.');
    if (before.pinned_definition_hash === current) throw notReapprovable("The binding is already pinned to the tool's current definition.");
    const after = await repinBinding(tx, orgId, before.id, { from: before.pinned_definition_hash, hash: current, by: actor.userId, at: clock.now() });
    if (!after) throw notReapprovable('The binding changed meanwhile; read it again.');
    const definition = { from: before.pinned_definition_hash, to: current };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      {
        action: 'agent.permission_reapproved',
        targetType: 'agent',
        targetId: agentId,
        details: { binding_id: before.id, tool_id: before.target_id, reason, definition_hash: definition },
      },
      {
        eventType: 'binding_reapproval',
        agentId,
        payload: { binding_id: before.id, tool_id: before.target_id, reason, previous_definition_hash: definition.from, definition_hash: definition.to },
      },
    );
    return { ...after, tool_definition_hash: current };
  });
}

export function removeBinding(db: Db, req: RequestContext, orgId: string, agentId: string, bindingId: string, reason: string | undefined) {
  return inScope(db, { orgId }, async (tx) => {
    const removed = await deleteBinding(tx, orgId, agentId, bindingId);
    if (!removed) throw notFound('No such permission binding.');
    await audit(tx, req, orgId, {
      action: 'agent.permission_removed',
      targetType: 'agent',
      targetId: agentId,
      details: {
        reason: reason ?? null,
        binding: { id: removed.id, target_kind: removed.target_kind, target_id: removed.target_id, actions: removed.actions, constraints: removed.constraints },
      },
    });
  });
}

export function agentBindings(db: Db, orgId: string, agentId: string) {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    return bindingsOf(tx, orgId, agentId);
  });
}

export function agentDelegations(db: Db, orgId: string, agentId: string) {
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    return delegationsOf(tx, orgId, agentId);
  });
}

export function removeDelegation(db: Db, req: RequestContext, orgId: string, agentId: string, delegationId: string, reason: string | undefined) {
  // The registry version moves with the delete (migration 0006's trigger on delegations), so the
  // next decision of any API process reads the agent without it.
  return inScope(db, { orgId }, async (tx) => {
    await agentOr404(tx, orgId, agentId);
    const removed = await deleteDelegation(tx, orgId, agentId, delegationId);
    if (!removed) throw notFound('No such delegation.');
    await audit(tx, req, orgId, {
      action: 'agent.delegation_removed',
      targetType: 'agent',
      targetId: agentId,
      details: {
        reason: reason ?? null,
        delegation: { id: removed.id, principal_ref: removed.principal_ref, principal_type: removed.principal_type, scopes: removed.scopes, expires_at: removed.expires_at ? iso(removed.expires_at) : null },
      },
    });
  });
}
