import { toSnake, type AgentSpec, type MCPServerSpec, type PolicySpec, type TollgateObject, type ToolSpec } from './kinds.js';

/** A CRD spec as an API body: snake_case keys, except inside the free-form fields named (camelCase). */
export function snakeKeys(v: unknown, freeForm: readonly string[] = []): unknown {
  if (Array.isArray(v)) return v.map((x) => snakeKeys(x, freeForm));
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v as Record<string, unknown>).map(([k, x]) => [toSnake(k), freeForm.includes(k) ? x : snakeKeys(x, freeForm)]),
  );
}

/** The finalizer that runs the registry's side of a delete (Agent, Tool, MCPServer). */
export const FINALIZER = 'tollgate.dev/registry';

/** The Secret holding an Agent's workload identity (files client-id, client-secret), in the Agent's namespace. */
export const identitySecretName = (agentName: string) => `tollgate-identity-${agentName}`;
/** Annotation on that Secret: the registry id of the identity it holds. */
export const IDENTITY_ANNOTATION = 'tollgate.dev/identity-id';
/** Label on that Secret: the name of its Agent. */
export const AGENT_LABEL = 'tollgate.dev/agent';
const MANAGED_BY = ['app.kubernetes.io/managed-by', 'tollgate-controller'] as const;
/** The labels of an Agent's identity Secret. */
export const identitySecretLabels = (agentName: string) => ({ [MANAGED_BY[0]]: MANAGED_BY[1], [AGENT_LABEL]: agentName });
/** The label selector of every identity Secret (the controller watches them to repair a lost one at once). */
export const IDENTITY_SECRET_SELECTOR = `${MANAGED_BY[0]}=${MANAGED_BY[1]},${AGENT_LABEL}`;

/** Annotation on a namespace: the slug of the organisation whose controller reconciles it. */
export const ORGANISATION_ANNOTATION = 'tollgate.dev/organization';

/**
 * The API's AgentIn fields of an Agent (defaults as the CRD's schema sets them, so a spec without a
 * field and the API's default compare equal), slug from metadata.name.
 */
export function agentBody(obj: TollgateObject<AgentSpec>): Record<string, unknown> {
  const { tools: _tools, delegations: _delegations, owners, ...rest } = obj.spec;
  const s = rest;
  return {
    slug: obj.metadata!.name!,
    name: s.name,
    description: s.description ?? '',
    purpose: s.purpose ?? '',
    framework: s.framework ?? 'custom',
    environment: s.environment ?? 'development',
    business_unit: s.businessUnit ?? null,
    criticality: s.criticality ?? 'medium',
    ...(s.dataClassification ? { data_classification: s.dataClassification } : {}),
    internet_exposure: s.internetExposure ?? 'none',
    code_execution: s.codeExecution ?? 'none',
    persistent_memory: s.persistentMemory ?? 'none',
    human_approval_coverage: s.humanApprovalCoverage ?? 'none',
    tags: s.tags ?? [],
    owners: (owners ?? []).map((o) => ({ name: o.name, email: o.email, owner_type: o.ownerType ?? 'accountable' })),
  };
}

/** The fields of an Agent that PATCH /agents/{id} changes (every AgentIn field but slug and owners). */
export const AGENT_PATCHABLE = [
  'name',
  'description',
  'purpose',
  'framework',
  'environment',
  'business_unit',
  'criticality',
  'data_classification',
  'internet_exposure',
  'code_execution',
  'persistent_memory',
  'human_approval_coverage',
  'tags',
] as const;

export function toolBody(obj: TollgateObject<ToolSpec>, mcpServerId: string | null): Record<string, unknown> {
  const s = obj.spec;
  return {
    tool_key: s.toolKey,
    name: s.name,
    description: s.description ?? '',
    mcp_server_id: mcpServerId,
    operations: s.operations ?? [],
    privilege_class: s.privilegeClass ?? 'read',
    approval_class: s.approvalClass ?? 'none',
    idempotent: s.idempotent ?? true,
    input_schema: s.inputSchema ?? {},
  };
}

/** What PATCH /tools/{id} changes; the rest of a Tool is immutable (the CRD refuses changes). */
export const TOOL_PATCHABLE = ['privilege_class', 'approval_class'] as const;
export const TOOL_FIXED = ['name', 'description', 'mcp_server_id', 'operations', 'idempotent', 'input_schema'] as const;

export function mcpServerBody(obj: TollgateObject<MCPServerSpec>): Record<string, unknown> {
  const s = obj.spec;
  return {
    name: obj.metadata!.name!,
    endpoint: s.endpoint,
    transport: s.transport ?? 'streamable_http',
    auth_type: s.authType ?? 'oauth',
    publisher: s.publisher ?? null,
  };
}
export const MCP_FIXED = ['endpoint', 'transport', 'auth_type', 'publisher'] as const;

export function policyRules(obj: TollgateObject<PolicySpec>): unknown[] {
  return snakeKeys(obj.spec.rules, ['value']) as unknown[];
}

/** Structural equality of JSON values, object keys in any order. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object' || Array.isArray(b)) return false;
  const ka = Object.keys(a as object).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b as object).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/** The fields among `fields` whose values differ between the declared body and the registry's record. */
export function differing(declared: Record<string, unknown>, record: Record<string, unknown>, fields: readonly string[]): string[] {
  return fields.filter((f) => !sameJson(declared[f] ?? null, record[f] ?? null));
}
