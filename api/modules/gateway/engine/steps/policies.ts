import type { DecisionContext, Step } from '../context.js';
import { deny, pass } from '../context.js';
import { decisionDocument, readField } from '../fields.js';
import { OPERATORS } from '../operators.js';
import type { Rule } from '../types.js';

const PRIVILEGED = new Set(['write', 'destructive', 'financial', 'admin']);

/** Deny-class rules: a privilege class denied for every agent or for this one. */
export const denyClass: Step = (ctx) => {
  const tool = ctx.tool;
  if (!tool) return;
  const hit = ctx.snapshot.denyClassRules.find(
    (r) => r.privilegeClass === tool.privilegeClass && (r.agentId === null || r.agentId === ctx.input.agent.id),
  );
  if (hit) return deny(ctx, 'deny_class', 'PRIVILEGE_CLASS_DENIED', { rule_id: hit.id });
  pass(ctx, 'deny_class');
};

/** Baseline rule POL-006: a privileged tool on an MCP server that is not approved is denied; read stays. */
export const mcpTrust: Step = (ctx) => {
  const tool = ctx.tool;
  if (!tool?.mcpServerId) return;
  const trust = ctx.snapshot.mcpServers[tool.mcpServerId]?.trustState ?? 'unknown';
  if (trust !== 'approved' && PRIVILEGED.has(tool.privilegeClass)) {
    return deny(ctx, 'POL-006', 'UNTRUSTED_MCP_PRIVILEGED_TOOL', { mcp_trust_state: trust });
  }
  pass(ctx, 'POL-006', { mcp_trust_state: trust });
};

export function ruleMatches(rule: Rule, doc: Record<string, unknown>): boolean {
  return rule.conditions.every((c) => OPERATORS[c.op]?.(readField(doc, c.field), c.value) ?? false);
}

/** Rules of published policies; every condition of a rule must hold for its effect to apply. */
export const publishedRules: Step = (ctx: DecisionContext) => {
  if (ctx.snapshot.rules.length === 0) return;
  const doc = decisionDocument(ctx);
  for (const rule of ctx.snapshot.rules) {
    if (!ruleMatches(rule, doc)) continue;
    const detail = { rule_id: rule.id, ...(rule.policy ? { policy: rule.policy } : {}) };
    if (rule.effect === 'deny') deny(ctx, 'policy', rule.reason_code, detail);
    else if (rule.effect === 'require_approval') {
      ctx.approvals.push({ reason: rule.reason_code, count: Math.max(1, rule.obligations?.approvals_required ?? 1) });
      ctx.trace.push({ step: 'policy', outcome: 'require_approval', reason: rule.reason_code, detail });
    } else {
      ctx.allows.push(rule.reason_code);
      ctx.trace.push({ step: 'policy', outcome: 'allow', reason: rule.reason_code, detail });
    }
  }
};
