import { deny, pass, type Step } from '../context.js';
import { globMatch } from '../operators.js';
import type { BindingView } from '../types.js';

/**
 * Default deny: a binding must allow this operation on the tool (or on the tool's MCP server), be
 * unexpired and, when tied to an identity, be used by that identity. Its constraints then apply.
 */
export const permission: Step = (ctx) => {
  const tool = ctx.tool;
  if (!tool) return;
  const { action, identityId, now } = ctx.input;
  const applies = (b: BindingView) =>
    ((b.targetKind === 'tool' && b.targetId === tool.id) || (b.targetKind === 'mcp_server' && b.targetId === tool.mcpServerId)) &&
    b.actions.includes(action.operation) &&
    (b.expiresAt === null || Date.parse(b.expiresAt) > Date.parse(now)) &&
    (b.identityId === null || b.identityId === identityId);
  const candidates = ctx.snapshot.bindings.filter(applies);
  if (candidates.length === 0) return deny(ctx, 'permission', 'PERMISSION_NOT_GRANTED');

  // Any one binding whose constraints the call meets is enough.
  const violations = candidates.map((b) => ({ binding: b, broken: brokenConstraints(b, action.parameters, action.target) }));
  const fitting = violations.find((v) => v.broken.length === 0);
  if (!fitting) {
    return deny(ctx, 'permission', 'PERMISSION_CONSTRAINT_EXCEEDED', { constraints: violations[0]!.broken });
  }
  ctx.binding = fitting.binding;
  pass(ctx, 'permission', { binding_id: fitting.binding.id });
};

function brokenConstraints(b: BindingView, parameters: Record<string, unknown>, target: string): string[] {
  const broken: string[] = [];
  const c = b.constraints;
  if (c.max_amount !== undefined) {
    const amount = parameters.amount;
    // An amount that is not a number cannot be checked against a maximum: refuse rather than guess.
    if (amount !== undefined && (typeof amount !== 'number' || amount > c.max_amount)) broken.push('max_amount');
  }
  if (c.currency !== undefined && parameters.currency !== undefined && parameters.currency !== c.currency) broken.push('currency');
  if (c.allowed_targets !== undefined && !c.allowed_targets.some((p) => globMatch(p, target))) broken.push('allowed_targets');
  return broken;
}
