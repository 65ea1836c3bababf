import { randomBytes } from 'node:crypto';
import type { RequestContext } from '../../platform/context.js';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { agentOr404 } from '../agents/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import { insertDenyClassRule, liftDenyClassRule, lockDenyClassRule, type DenyClassRuleRow } from './deny-classes.repository.js';

/** Denies a privilege class for every agent (`agentId` null) or for one; audited, with evidence. */
export function addDenyClass(
  db: Db,
  clock: Clock,
  req: RequestContext,
  actor: { orgId: string; userId: string },
  input: { privilegeClass: string; agentId: string | null; reason: string },
): Promise<DenyClassRuleRow> {
  const { orgId } = actor;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    if (input.agentId) await agentOr404(tx, orgId, input.agentId);
    const rule = await insertDenyClassRule(tx, {
      id: `DC-${randomBytes(5).toString('hex').toUpperCase()}`,
      org_id: orgId,
      privilege_class: input.privilegeClass,
      agent_id: input.agentId,
      reason: input.reason,
      created_by: actor.userId,
      created_at: now,
      lifted_at: null,
      lifted_by: null,
      lift_reason: null,
    });
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'deny_class.added', targetType: 'deny_class_rule', targetId: rule.id, details: { privilege_class: rule.privilege_class, agent_id: rule.agent_id, reason: rule.reason } },
      { eventType: 'containment', agentId: rule.agent_id, payload: { action: 'deny_class', rule_id: rule.id, privilege_class: rule.privilege_class, reason: rule.reason } },
    );
    await recordTelemetry(tx, orgId, [
      telemetryEvents.containment({
        at: now,
        agentId: rule.agent_id,
        correlationId: req.id,
        action: 'deny_class',
        reason: rule.reason,
        actorId: actor.userId,
        details: { rule_id: rule.id, privilege_class: rule.privilege_class },
        subject: `${rule.privilege_class} tools ${rule.agent_id ? 'for one agent' : 'for every agent'}`,
      }),
    ]);
    return rule;
  });
}

/** Lifts a deny-class rule; audited, with evidence. */
export function liftDenyClass(db: Db, clock: Clock, req: RequestContext, actor: { orgId: string; userId: string }, ruleId: string, reason: string): Promise<DenyClassRuleRow> {
  const { orgId } = actor;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    const rule = await lockDenyClassRule(tx, orgId, ruleId);
    if (!rule) throw notFound('No such deny-class rule.');
    if (rule.lifted_at) throw new ApiError('conflict', 'The rule is already lifted.');
    const lifted = await liftDenyClassRule(tx, rule.id, { lifted_at: now, lifted_by: actor.userId, lift_reason: reason });
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'deny_class.lifted', targetType: 'deny_class_rule', targetId: rule.id, details: { reason } },
      { eventType: 'containment', agentId: rule.agent_id, payload: { action: 'deny_class_lifted', rule_id: rule.id, reason } },
    );
    await recordTelemetry(tx, orgId, [
      telemetryEvents.containment({
        at: now,
        agentId: rule.agent_id,
        correlationId: req.id,
        action: 'deny_class_lifted',
        reason,
        actorId: actor.userId,
        details: { rule_id: rule.id, privilege_class: rule.privilege_class },
        subject: `${rule.privilege_class} tools ${rule.agent_id ? 'for one agent' : 'for every agent'}`,
      }),
    ]);
    return lifted;
  });
}
