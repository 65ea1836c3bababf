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
  if (ctx.denies.length > 0) {
    return { decision: 'deny', reasonCodes: unique(ctx.denies), approvalsRequired: 0, trace: ctx.trace };
  }
  if (ctx.approvals.length > 0 && !input.approvalPresent) {
    let count = 0;
    for (const a of ctx.approvals) count = Math.max(count, a.count);
    return {
      decision: 'require_approval',
      reasonCodes: unique(ctx.approvals.map((a) => a.reason)),
      approvalsRequired: count,
      trace: ctx.trace,
    };
  }
  const granted = ['PERMISSION_GRANTED'];
  if (ctx.approvals.length > 0) granted.push('APPROVAL_GRANTED');
  // The trace is this call's own, so the closing entry is appended in place.
  ctx.trace.push({ step: 'decision', outcome: 'allow', reason: 'PERMISSION_GRANTED' });
  return { decision: 'allow', reasonCodes: unique(granted.concat(ctx.allows)), approvalsRequired: 0, trace: ctx.trace };
}

/** The codes once each, first occurrence first. */
function unique(codes: string[]): string[] {
  return codes.length < 2 ? codes : [...new Set(codes)];
}
