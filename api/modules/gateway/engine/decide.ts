import type { DecisionContext, Step } from './context.js';
import { agentState } from './steps/agent-state.js';
import { toolApproval } from './steps/approval.js';
import { delegation } from './steps/delegation.js';
import { inspection } from './steps/inspection.js';
import { permission } from './steps/permission.js';
import { denyClass, mcpTrust, publishedRules } from './steps/policies.js';
import { resolveTool } from './steps/resolve-tool.js';
import type { Decision, DecisionInput, Snapshot } from './types.js';

/** The pure steps in order; authentication, idempotency, execution and evidence sit around them. */
export const STEPS: Step[] = [agentState, resolveTool, permission, delegation, inspection, denyClass, mcpTrust, publishedRules, toolApproval];

/**
 * Decides one action. Precedence: any deny wins (every deny reason is reported); then any approval
 * requirement, unless a valid approval was presented; else allow. With no binding the default is deny.
 */
export function decide(input: DecisionInput, snapshot: Snapshot): Decision {
  const ctx: DecisionContext = { input, snapshot, denies: [], approvals: [], allows: [], trace: [], stop: false };
  for (const step of STEPS) {
    step(ctx);
    if (ctx.stop) break;
  }
  const unique = (xs: string[]) => [...new Set(xs)];
  if (ctx.denies.length > 0) {
    return { decision: 'deny', reasonCodes: unique(ctx.denies), approvalsRequired: 0, trace: ctx.trace };
  }
  if (ctx.approvals.length > 0 && !input.approvalPresent) {
    return {
      decision: 'require_approval',
      reasonCodes: unique(ctx.approvals.map((a) => a.reason)),
      approvalsRequired: Math.max(...ctx.approvals.map((a) => a.count)),
      trace: ctx.trace,
    };
  }
  const approved = ctx.approvals.length > 0 ? ['APPROVAL_GRANTED'] : [];
  return {
    decision: 'allow',
    reasonCodes: unique(['PERMISSION_GRANTED', ...approved, ...ctx.allows]),
    approvalsRequired: 0,
    trace: [...ctx.trace, { step: 'decision', outcome: 'allow', reason: 'PERMISSION_GRANTED' }],
  };
}
