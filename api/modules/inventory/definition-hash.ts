import { createHash } from 'node:crypto';
import { canonicalize } from '../../../lib/canonical-json.js';

/** What a person grants when they bind a permission on a tool: what the model is told the tool does and takes. */
export interface ToolDefinition {
  description: string;
  input_schema: Record<string, unknown>;
}

/**
 * The hash of a tool's definition: sha256 (hex) over the RFC 8785 canonical JSON of
 * `{description, input_schema}`, so key order and number spelling in a server's answer change nothing
 * while any change of wording or schema does. Discovery sets it on the tools it sees; a permission
 * binding on the tool is pinned to it, and the gateway refuses calls under a binding pinned to another
 * (rug-pull protection, docs/registry.md). Tools registered by hand keep none.
 */
export function toolDefinitionHash(d: ToolDefinition): string {
  const canonical = canonicalize({ description: d.description, input_schema: d.input_schema });
  return createHash('sha256').update(canonical ?? '').digest('hex');
}
