import type { DecisionContext, Step } from '../context.js';
import { deny, pass } from '../context.js';
import { decisionDocument } from '../fields.js';
import { holds, matchingRules, nextDecision, ruleSet, type ConditionView, type RuleSet, type RuleView } from '../rule-index.js';

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

/**
 * Rules of published policies (or the drafts simulated); every condition must hold for the effect.
 * Only the rules the request can match are evaluated (rule-index.ts). With `explain` every rule is
 * traced with each condition's result, each distinct condition tested once.
 */
export const publishedRules: Step = (ctx: DecisionContext) => {
  const rules = ctx.snapshot.rules;
  if (rules.length === 0) return;
  const doc = decisionDocument(ctx);
  const set = ruleSet(rules);
  nextDecision(set);
  if (ctx.input.explain === true) return explainRules(ctx, set, doc);
  for (const r of matchingRules(set, doc)) {
    const rule = set.views[r]!;
    apply(ctx, rule, rule.policy ? { rule_id: rule.id, policy: rule.policy } : { rule_id: rule.id });
  }
};

function explainRules(ctx: DecisionContext, set: RuleSet, doc: Record<string, unknown>): void {
  const { views, written } = set;
  for (let r = 0; r < views.length; r++) {
    const rule = views[r]!;
    const slots = written[r]!;
    const conditions = new Array<Record<string, unknown>>(slots.length);
    let all = true;
    for (let i = 0; i < slots.length; i++) {
      const matched = holds(set, slots[i]!, doc);
      conditions[i] = conditionTrace(rule.conditions[i]!, matched);
      if (!matched) all = false;
    }
    const detail = rule.policy ? { rule_id: rule.id, policy: rule.policy, conditions } : { rule_id: rule.id, conditions };
    if (all) apply(ctx, rule, detail);
    else ctx.trace.push({ step: 'policy', outcome: 'skip', reason: rule.reason, detail });
  }
}

/** One condition in the explain trace: its field (none for CEL), operator, expression (CEL only) and result. */
function conditionTrace(c: ConditionView, matched: boolean): Record<string, unknown> {
  if (c.cel) return c.field ? { field: c.field, op: c.op, expression: c.value, matched } : { op: c.op, expression: c.value, matched };
  return c.field ? { field: c.field, op: c.op, matched } : { op: c.op, matched };
}

/** A matched rule's effect. */
function apply(ctx: DecisionContext, rule: RuleView, detail: Record<string, unknown>): void {
  if (rule.effect === 'deny') deny(ctx, 'policy', rule.reason, detail);
  else if (rule.effect === 'require_approval') {
    ctx.approvals.push({ reason: rule.reason, count: rule.approvals });
    ctx.trace.push({ step: 'policy', outcome: 'require_approval', reason: rule.reason, detail });
  } else {
    ctx.allows.push(rule.reason);
    ctx.trace.push({ step: 'policy', outcome: 'allow', reason: rule.reason, detail });
  }
}
