import { CLASSIFICATION } from '../../shared/index.js';
import type { CompiledRule, SessionFacts, Snapshot, ToolView } from './types.js';

/** The most tool keys a session's facts count one by one; calls past them still count in `calls`. */
export const MAX_SESSION_TOOLS = 200;

/** A session nothing has run in yet. */
export const noFacts = (): SessionFacts => ({ maxClassification: null, untrustedContent: false, tools: {}, calls: 0 });

/** A classification's place in CLASSIFICATION, 1 (public) to 6 (restricted); 0 for none or one not listed. */
export function classificationRank(classification: string | null | undefined): number {
  return classification ? CLASSIFICATION.indexOf(classification as (typeof CLASSIFICATION)[number]) + 1 : 0;
}

/** Content from the tool is untrusted: it is on an MCP server not `approved`, or it calls an API on the internet. */
export function untrustedTool(tool: ToolView | undefined, server: Snapshot['mcpServers'][string] | undefined): boolean {
  if (!tool) return false;
  if (tool.mcpServerId && server?.trustState !== 'approved') return true;
  return tool.internetFacing === true;
}

/** The facts after one more allowed call of `toolKey` (`tool` as the registry has it); `facts` is left unchanged. */
export function afterCall(facts: SessionFacts, toolKey: string, tool: ToolView | undefined, server: Snapshot['mcpServers'][string] | undefined): SessionFacts {
  const tools = { ...facts.tools };
  if (Object.hasOwn(tools, toolKey)) tools[toolKey]! += 1;
  else if (Object.keys(tools).length < MAX_SESSION_TOOLS) tools[toolKey] = 1;
  const read = tool?.dataClassification ?? null;
  return {
    maxClassification: classificationRank(read) > classificationRank(facts.maxClassification) ? read : facts.maxClassification,
    untrustedContent: facts.untrustedContent || untrustedTool(tool, server),
    tools,
    calls: facts.calls + 1,
  };
}

/** The facts as stored (agent_sessions.facts, snake_case), read back; anything malformed reads as nothing. */
export function factsFromJson(json: unknown): SessionFacts {
  const o = (json ?? {}) as Record<string, unknown>;
  const tools: Record<string, number> = {};
  if (o.tools && typeof o.tools === 'object') {
    for (const [k, v] of Object.entries(o.tools)) if (typeof v === 'number' && Number.isFinite(v)) tools[k] = v;
  }
  return {
    maxClassification: typeof o.max_classification === 'string' ? o.max_classification : null,
    untrustedContent: o.untrusted_content === true,
    tools,
    calls: typeof o.calls === 'number' ? o.calls : 0,
  };
}

/** The facts as stored: the shape migration 0021's merge_session_facts merges. */
export function factsToJson(f: SessionFacts): Record<string, unknown> {
  return { max_classification: f.maxClassification, untrusted_content: f.untrustedContent, tools: f.tools, calls: f.calls };
}

const SESSION_IN_CEL = /\bsession\b/;

/** Whether any rule reads a `session.*` field (a condition's field, or a CEL expression naming `session`). */
export function readsSession(rules: readonly CompiledRule[]): boolean {
  return rules.some((r) =>
    r.conditions.some((c) => (c.field !== undefined && c.field.startsWith('session.')) || (c.op === 'cel' && typeof c.value === 'string' && SESSION_IN_CEL.test(c.value))),
  );
}
