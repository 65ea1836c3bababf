import type { DecisionContext, Step } from '../context.js';
import { deny, pass } from '../context.js';
import { decisionDocument } from '../fields.js';

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

/** Rules of published policies (or the drafts simulated); every condition must hold for the effect. */
export const publishedRules: Step = (ctx: DecisionContext) => {
  if (ctx.snapshot.rules.length === 0) return;
  const doc = decisionDocument(ctx);
  const explain = ctx.input.explain === true;
  for (const rule of ctx.snapshot.rules) {
    if (!explain && !rule.ordered.every((c) => c.test(doc))) continue;
    const detail: Record<string, unknown> = { rule_id: rule.id, ...(rule.policy ? { policy: rule.policy } : {}) };
    if (explain) {
      const results = rule.compiled.map((c) => c.test(doc));
      detail.conditions = rule.compiled.map((c, i) => ({
        ...(c.field ? { field: c.field } : {}),
        op: c.op,
        ...(c.op === 'cel' ? { expression: c.value } : {}),
        matched: results[i],
      }));
      if (!results.every(Boolean)) {
        ctx.trace.push({ step: 'policy', outcome: 'skip', reason: rule.reason_code, detail });
        continue;
      }
    }
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
