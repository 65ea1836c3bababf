import type { DecisionContext } from './context.js';
import { classificationRank, untrustedTool } from './session.js';
import type { DecisionInput, Snapshot, ToolView } from './types.js';

/** The type of a condition field, as operand checks see it. */
export type FieldType = 'string' | 'number' | 'boolean' | 'any';

/** What one decision's fields are read from: the request and agent, the resolved tool, its MCP server. */
export interface FieldSource {
  input: DecisionInput;
  tool: ToolView | undefined;
  server: Snapshot['mcpServers'][string] | undefined;
  at: Date;
}

export interface FieldSpec {
  type: FieldType;
  /** How CEL declares the field: `dyn` where the value may be null (or, for numbers, be int or double). */
  cel: 'string' | 'dyn' | 'map';
  description: string;
  read: (s: FieldSource) => unknown;
}

/**
 * Every field a condition may name (docs/policies.md), with its type and how it is read: the one
 * declaration the compiler checks conditions against, the CEL environments declare and the decision
 * document is built from. `action.parameters.<name>` names any parameter of the request (type `any`).
 * A dotted name nests in the document (`tool.key` is `key` of `tool`); order is the listing order.
 */
export const FIELDS: Record<string, FieldSpec> = {
  'tool.key': { type: 'string', cel: 'string', description: 'The tool key of the request', read: (s) => s.input.action.tool },
  'tool.privilege_class': {
    type: 'string',
    cel: 'dyn',
    description: 'read, write, destructive, financial or admin',
    read: (s) => s.tool?.privilegeClass ?? null,
  },
  'tool.approval_class': { type: 'string', cel: 'dyn', description: 'none, single or dual', read: (s) => s.tool?.approvalClass ?? null },
  'tool.target_type': {
    type: 'string',
    cel: 'string',
    description: 'mcp_tool (the tool is on an MCP server) or tool',
    read: (s) => (s.tool?.mcpServerId ? 'mcp_tool' : 'tool'),
  },
  'tool.mcp_trust_state': {
    type: 'string',
    cel: 'dyn',
    description: "The MCP server's trust state; null for other tools",
    read: (s) => s.server?.trustState ?? null,
  },
  'tool.data_classification': {
    type: 'string',
    cel: 'dyn',
    description: "The classification of the tool's data resource (public ... restricted), or null",
    read: (s) => s.tool?.dataClassification ?? null,
  },
  'tool.internet_facing': {
    type: 'boolean',
    cel: 'dyn',
    description: "The tool's API resource has a base URL on the internet (not a private, loopback or cluster-internal host)",
    read: (s) => s.tool?.internetFacing === true,
  },
  'tool.untrusted_source': {
    type: 'boolean',
    cel: 'dyn',
    description: 'What the tool returns comes from a source not trusted: an MCP server not approved, or an API on the internet',
    read: (s) => untrustedTool(s.tool, s.server),
  },
  'action.operation': { type: 'string', cel: 'string', description: 'The operation (default invoke)', read: (s) => s.input.action.operation },
  'action.target': { type: 'string', cel: 'string', description: 'The target URI', read: (s) => s.input.action.target },
  'action.amount': {
    type: 'number',
    cel: 'dyn',
    description: 'parameters.amount when it is a number, else null',
    read: (s) => (typeof s.input.action.parameters.amount === 'number' ? s.input.action.parameters.amount : null),
  },
  'action.currency': {
    type: 'string',
    cel: 'dyn',
    description: 'parameters.currency when it is a string, else null',
    read: (s) => (typeof s.input.action.parameters.currency === 'string' ? s.input.action.parameters.currency : null),
  },
  'action.parameters': {
    type: 'any',
    cel: 'map',
    description: 'The parameters object; action.parameters.<name> reads one',
    read: (s) => s.input.action.parameters,
  },
  'action.justification': {
    type: 'string',
    cel: 'dyn',
    description: "The agent's justification, or null",
    read: (s) => s.input.action.justification ?? null,
  },
  'agent.id': { type: 'string', cel: 'string', description: "The agent's id", read: (s) => s.input.agent.id },
  'agent.environment': { type: 'string', cel: 'string', description: "The agent's environment", read: (s) => s.input.agent.environment },
  'agent.criticality': { type: 'string', cel: 'string', description: "The agent's criticality", read: (s) => s.input.agent.criticality },
  'agent.data_classification': {
    type: 'string',
    cel: 'dyn',
    description: "The agent's data classification",
    read: (s) => s.input.agent.dataClassification,
  },
  'principal.on_behalf_of': {
    type: 'string',
    cel: 'dyn',
    description: 'The principal the agent acts for, or null',
    read: (s) => s.input.action.onBehalfOf ?? null,
  },
  environment: {
    type: 'string',
    cel: 'string',
    description: "The action's environment, else the agent's",
    read: (s) => s.input.action.environment ?? s.input.agent.environment,
  },
  'time.hour': { type: 'number', cel: 'dyn', description: 'Hour of the decision, 0-23, UTC', read: (s) => s.at.getUTCHours() },
  'time.weekday': {
    type: 'number',
    cel: 'dyn',
    description: 'Day of the week of the decision, 0 (Sunday) to 6, UTC',
    read: (s) => s.at.getUTCDay(),
  },
  'session.id': {
    type: 'string',
    cel: 'dyn',
    description: 'The session of the call: id:<the id the caller passed> or token:<the access token id>; null from the console',
    read: (s) => s.input.session?.id ?? null,
  },
  'session.max_classification': {
    type: 'string',
    cel: 'dyn',
    description: 'The highest classification of data read earlier in the session (by an allowed call of a tool with a data resource), or null',
    read: (s) => s.input.session?.facts.maxClassification ?? null,
  },
  'session.max_classification_rank': {
    type: 'number',
    cel: 'dyn',
    description: 'The same as a number: 0 none, 1 public, 2 internal, 3 confidential, 4 personal, 5 regulated, 6 restricted',
    read: (s) => classificationRank(s.input.session?.facts.maxClassification),
  },
  'session.untrusted_content': {
    type: 'boolean',
    cel: 'dyn',
    description: 'An allowed call earlier in the session brought in content from an untrusted source (see tool.untrusted_source)',
    read: (s) => s.input.session?.facts.untrustedContent === true,
  },
  'session.calls': { type: 'number', cel: 'dyn', description: 'Allowed calls earlier in the session', read: (s) => s.input.session?.facts.calls ?? 0 },
  'session.tools': {
    type: 'any',
    cel: 'dyn',
    description: 'The tool keys called (allowed) earlier in the session, a list (use contains)',
    read: (s) => (s.input.session ? Object.keys(s.input.session.facts.tools) : []),
  },
  'session.tool_calls': {
    type: 'any',
    cel: 'map',
    description: "Allowed calls earlier in the session by tool key, a map (CEL: session.tool_calls['crm.lookup_customer'])",
    read: (s) => s.input.session?.facts.tools ?? {},
  },
  'session.same_tool_calls': {
    type: 'number',
    cel: 'dyn',
    description: 'Allowed calls of this same tool earlier in the session',
    read: (s) => {
      const tools = s.input.session?.facts.tools;
      return tools && Object.hasOwn(tools, s.input.action.tool) ? tools[s.input.action.tool]! : 0;
    },
  },
};

/** A field of the document's top level, or a group of fields under one name (`tool`, `action`...). */
export type DocumentPart =
  | { name: string; spec: FieldSpec; fields?: undefined }
  | { name: string; spec?: undefined; fields: Array<{ name: string; spec: FieldSpec }> };

/** The declared fields as the document nests them, in declaration order. */
export const DOCUMENT_LAYOUT: DocumentPart[] = (() => {
  const parts: DocumentPart[] = [];
  const groups = new Map<string, Array<{ name: string; spec: FieldSpec }>>();
  for (const [field, spec] of Object.entries(FIELDS)) {
    const dot = field.indexOf('.');
    if (dot < 0) {
      parts.push({ name: field, spec });
      continue;
    }
    const group = field.slice(0, dot);
    let fields = groups.get(group);
    if (!fields) {
      fields = [];
      groups.set(group, fields);
      parts.push({ name: group, fields });
    }
    fields.push({ name: field.slice(dot + 1), spec });
  }
  return parts;
})();

const PARAMETER_FIELD = /^action\.parameters\.[A-Za-z0-9_.-]{1,200}$/;

/** The type of a field a condition names, or undefined for a field the document does not have. */
export function fieldType(field: string): FieldType | undefined {
  if (Object.hasOwn(FIELDS, field)) return FIELDS[field]!.type;
  if (PARAMETER_FIELD.test(field)) return 'any';
  return undefined;
}

/** The document of one decision, assembled from the layout (no code generation: the engine stays plain data and functions). */
function buildDocument(source: FieldSource): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  for (const part of DOCUMENT_LAYOUT) {
    if (!part.fields) {
      doc[part.name] = part.spec.read(source);
      continue;
    }
    const group: Record<string, unknown> = {};
    for (const f of part.fields) group[f.name] = f.spec.read(source);
    doc[part.name] = group;
  }
  return doc;
}

/**
 * The document rule conditions read (docs/policies.md lists every field). Built once per
 * decision from the request, the agent and the resolved tool.
 */
export function decisionDocument(ctx: DecisionContext): Record<string, unknown> {
  const tool = ctx.tool;
  return buildDocument({
    input: ctx.input,
    tool,
    server: tool?.mcpServerId ? ctx.snapshot.mcpServers[tool.mcpServerId] : undefined,
    at: new Date(ctx.input.now),
  });
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
