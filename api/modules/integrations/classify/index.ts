/**
 * Classification of discovered tools (behaviour.md, "MCP discovery protocol"): the privilege class
 * Tollgate gives a tool from its own reading of the definition, and the marks of tool poisoning in it.
 * Both are pure functions of the definition; reconciliation turns their answers into findings.
 */
export { classifyTool, identifierWords, isModifying, readOnlyMismatch } from './classifier.js';
export type { Classification, PrivilegeClass, ToolDefinition } from './classifier.js';
export { detectPoisoning } from './poisoning.js';
export type { PoisoningDetection, PoisoningKind } from './poisoning.js';
