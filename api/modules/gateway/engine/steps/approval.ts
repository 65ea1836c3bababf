import type { Step } from '../context.js';

/** A tool's approval class asks for one or two approvers before it runs (TOOL_APPROVAL_REQUIRED). */
export const toolApproval: Step = (ctx) => {
  const cls = ctx.tool?.approvalClass;
  if (!cls || cls === 'none') return;
  ctx.approvals.push({ reason: 'TOOL_APPROVAL_REQUIRED', count: cls === 'dual' ? 2 : 1 });
  ctx.trace.push({ step: 'tool_approval', outcome: 'require_approval', reason: 'TOOL_APPROVAL_REQUIRED', detail: { approval_class: cls } });
};
