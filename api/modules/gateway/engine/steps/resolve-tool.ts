import { deny, pass, type Step } from '../context.js';

/** The tool key must be in the inventory (UNKNOWN_TOOL) and not blocked (TOOL_BLOCKED). */
export const resolveTool: Step = (ctx) => {
  const tool = ctx.snapshot.tools[ctx.input.action.tool];
  if (!tool) return deny(ctx, 'resolve_tool', 'UNKNOWN_TOOL', { tool: ctx.input.action.tool }, true);
  ctx.tool = tool;
  if (tool.blocked) return deny(ctx, 'resolve_tool', 'TOOL_BLOCKED');
  pass(ctx, 'resolve_tool', { tool_id: tool.id, privilege_class: tool.privilegeClass, mcp_server_id: tool.mcpServerId });
};
