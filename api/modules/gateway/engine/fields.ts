import type { DecisionContext } from './context.js';

/**
 * The document rule conditions read (docs/decisions-engine.md lists every field). Built once per
 * decision from the request, the agent and the resolved tool.
 */
export function decisionDocument(ctx: DecisionContext): Record<string, unknown> {
  const { action, agent, now } = ctx.input;
  const tool = ctx.tool;
  const server = tool?.mcpServerId ? ctx.snapshot.mcpServers[tool.mcpServerId] : undefined;
  const at = new Date(now);
  return {
    tool: {
      key: action.tool,
      privilege_class: tool?.privilegeClass ?? null,
      approval_class: tool?.approvalClass ?? null,
      target_type: tool?.mcpServerId ? 'mcp_tool' : 'tool',
      mcp_trust_state: server?.trustState ?? null,
    },
    action: {
      operation: action.operation,
      target: action.target,
      amount: typeof action.parameters.amount === 'number' ? action.parameters.amount : null,
      currency: typeof action.parameters.currency === 'string' ? action.parameters.currency : null,
      parameters: action.parameters,
      justification: action.justification ?? null,
    },
    agent: {
      id: agent.id,
      environment: agent.environment,
      criticality: agent.criticality,
      data_classification: agent.dataClassification,
    },
    principal: { on_behalf_of: action.onBehalfOf ?? null },
    environment: action.environment ?? agent.environment,
    time: { hour: at.getUTCHours(), weekday: at.getUTCDay() },
  };
}

/** Reads a dotted path (`action.parameters.amount`) from the document; undefined when absent. */
export function readField(doc: unknown, path: string): unknown {
  return readPath(doc, path.split('.'));
}

/**
 * Reads a path already split into its parts. Own properties only: `action.parameters.constructor`
 * or `__proto__` read nothing, whatever the request holds.
 */
export function readPath(doc: unknown, parts: readonly string[]): unknown {
  let v: unknown = doc;
  for (const part of parts) {
    if (v === null || typeof v !== 'object' || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}
