import type { DecisionContext, Step } from './context.js';
import { agentState } from './steps/agent-state.js';
import { permission } from './steps/permission.js';
import { denyClass, mcpTrust } from './steps/policies.js';
import { resolveTool } from './steps/resolve-tool.js';
import type { AgentView, Snapshot, ToolView } from './types.js';

/**
 * The steps of `decide` that depend on the registry and the agent only, not on a call's arguments:
 * containment, blocked tool, binding, deny-class rules, MCP server trust (POL-006). Delegation,
 * inspection and published policy rules read the call itself and are decided per call.
 */
const TOOL_LEVEL_STEPS: Step[] = [agentState, resolveTool, permission, denyClass, mcpTrust];

/**
 * The probe's arguments are empty, so a binding whose constraints need arguments (an allowed target, an
 * amount) fails on the probe alone: that is a limit on calls, not on the tool, and the tool stays listed.
 */
const CALL_LEVEL = new Set(['PERMISSION_CONSTRAINT_EXCEEDED']);

export interface ToolPermission {
  tool: ToolView;
  /** A binding allows the tool only for some arguments (its constraints). */
  constrained: boolean;
}

export interface EffectivePermissions {
  /** The agent is suspended, revoked or its gateway access is off: it may call nothing. */
  contained: boolean;
  /** Why it is contained (the agent-state step's reason codes); empty otherwise. */
  reasonCodes: string[];
  /** The tools a call with `operation` may be allowed on, by tool key. */
  tools: ToolPermission[];
}

/**
 * What the agent may call, decided by the engine's own steps for each tool in the snapshot (a probe call
 * with no arguments), so the list and the decisions cannot disagree on bindings, blocks or trust.
 * Pure, like `decide`.
 */
export function effectivePermissions(
  agent: AgentView,
  identityId: string | null,
  snapshot: Snapshot,
  now: string,
  operation = 'invoke',
): EffectivePermissions {
  const run = (steps: Step[], tool: string) => {
    const ctx: DecisionContext = {
      input: { agent, identityId, action: { tool, operation, target: '', parameters: {} }, now },
      snapshot,
      denies: [],
      approvals: [],
      allows: [],
      trace: [],
      stop: false,
    };
    for (const step of steps) {
      step(ctx);
      if (ctx.stop) break;
    }
    return ctx;
  };
  const containment = run([agentState], '').denies;
  if (containment.length > 0) return { contained: true, reasonCodes: containment, tools: [] };
  const tools: ToolPermission[] = [];
  for (const key of Object.keys(snapshot.tools).sort()) {
    const { denies } = run(TOOL_LEVEL_STEPS, key);
    if (denies.every((d) => CALL_LEVEL.has(d))) tools.push({ tool: snapshot.tools[key]!, constrained: denies.length > 0 });
  }
  return { contained: false, reasonCodes: [], tools };
}
