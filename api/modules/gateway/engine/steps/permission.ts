import { deny, pass, type Step } from '../context.js';
import { globMatch } from '../operators.js';
import type { BindingView, ToolView } from '../types.js';

/**
 * Default deny: a binding must allow this operation on the tool (or on the tool's MCP server), be
 * unexpired and, when tied to an identity, be used by that identity. Its constraints then apply. A
 * binding on the tool pinned to another definition than the tool's current one grants nothing until it
 * is re-approved (rug-pull protection): when only such a binding would have allowed the call, the deny
 * says TOOL_DEFINITION_CHANGED, so the remedy (re-approval) is plain; otherwise the usual reasons apply.
 */
export const permission: Step = (ctx) => {
  const tool = ctx.tool;
  if (!tool) return;
  const { action, identityId, now } = ctx.input;
  const candidates: BindingView[] = [];
  for (const b of ctx.snapshot.bindings) {
    if (
      ((b.targetKind === 'tool' && b.targetId === tool.id) || (b.targetKind === 'mcp_server' && b.targetId === tool.mcpServerId)) &&
      b.actions.includes(action.operation) &&
      (b.expiresAt === null || Date.parse(b.expiresAt) > Date.parse(now)) &&
      (b.identityId === null || b.identityId === identityId)
    ) {
      candidates.push(b);
    }
  }
  if (candidates.length === 0) return deny(ctx, 'permission', 'PERMISSION_NOT_GRANTED');

  // Any one binding whose constraints the call meets, and whose pin (if any) is current, is enough.
  const violations = candidates.map((b) => ({ binding: b, broken: brokenConstraints(b, action.parameters, action.target) }));
  const fitting = violations.filter((v) => v.broken.length === 0).map((v) => v.binding);
  const granting = fitting.find((b) => !pinnedElsewhere(b, tool));
  if (granting) {
    ctx.binding = granting;
    return pass(ctx, 'permission', { binding_id: granting.id });
  }
  const stale = fitting.find((b) => pinnedElsewhere(b, tool));
  if (stale) {
    return deny(ctx, 'permission', 'TOOL_DEFINITION_CHANGED', {
      binding_id: stale.id,
      pinned_definition_hash: stale.pinnedDefinitionHash,
      definition_hash: tool.definitionHash ?? null,
    });
  }
  return deny(ctx, 'permission', 'PERMISSION_CONSTRAINT_EXCEEDED', { constraints: violations[0]!.broken });
};

/** A binding on this very tool, pinned to a definition the tool no longer has. */
function pinnedElsewhere(b: BindingView, tool: ToolView): boolean {
  const pinned = b.pinnedDefinitionHash ?? null;
  return b.targetKind === 'tool' && pinned !== null && pinned !== (tool.definitionHash ?? null);
}

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
