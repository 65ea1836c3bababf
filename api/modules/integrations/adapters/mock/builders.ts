import type { DiscoveredAgent, DiscoveredTool } from '../contract.js';

/**
 * Small builders the mock data files share, so each file states only what is particular to its records.
 * Everything here is a pure function of its arguments: the mocks are deterministic.
 */

/** The fields every mock agent states; the rest default to "the source does not say". */
export type MockAgentFields = Pick<DiscoveredAgent, 'external_ref' | 'name' | 'description' | 'purpose' | 'environment'> & Partial<DiscoveredAgent>;

/** A discovered agent from the fields a mock states. */
export function mockAgent(fields: MockAgentFields): DiscoveredAgent {
  return {
    framework: 'custom',
    model: null,
    owner_name: null,
    owner_email: null,
    data_classification: null,
    internet_exposure: null,
    code_execution: null,
    persistent_memory: null,
    human_approval_coverage: null,
    business_unit: null,
    identities: [],
    tool_grants: [],
    resource_grants: [],
    delegations: [],
    ...fields,
  };
}

/** An owner as the mocks' sources state one. */
export function owner(name: string): Pick<DiscoveredAgent, 'owner_name' | 'owner_email'> {
  return { owner_name: name, owner_email: `${name.toLowerCase().replace(/[^a-z]+/g, '.')}@example.com` };
}

/** What an MCP server publishes of one tool (its `tools/list` entry), as the mock states it. */
export interface MockToolFields {
  name: string;
  title: string | null;
  description: string;
  properties: Record<string, Record<string, unknown>>;
  required?: string[];
  /** The server's `annotations.readOnlyHint`; null when it declares nothing. */
  readOnlyHint: boolean | null;
  idempotentHint?: boolean | null;
  resource?: string | null;
}

/**
 * A tool as MCP discovery reports it: key `<tool_prefix>.<name>`, the server's title, description and
 * input schema, its declared readOnlyHint, and no privilege class (the service classifies on its own).
 */
export function mcpTool(prefix: string, t: MockToolFields): DiscoveredTool {
  return {
    tool_key: `${prefix}.${t.name}`,
    name: t.name,
    title: t.title,
    description: t.description,
    privilege_class: null,
    input_schema: { type: 'object', properties: t.properties, ...(t.required ? { required: t.required } : {}) },
    read_only_hint: t.readOnlyHint,
    operations: ['invoke'],
    resource: t.resource ?? null,
    idempotent: t.idempotentHint ?? null,
  };
}
