/**
 * The decision engine's inputs and outputs. The engine is pure: `decide(input, snapshot)` reads
 * nothing but its arguments, so POST /actions, the console and policy simulation share it, and
 * decision cases are data (test/fixtures/decisions).
 */
export type Effect = 'allow' | 'deny' | 'require_approval';

export interface ActionRequest {
  tool: string;
  operation: string;
  target: string;
  parameters: Record<string, unknown>;
  environment?: string | null;
  onBehalfOf?: string | null;
  justification?: string | null;
}

export interface AgentView {
  id: string;
  status: 'active' | 'suspended' | 'revoked';
  gatewayAccess: boolean;
  environment: string;
  criticality: string;
  dataClassification: string;
}

export interface ToolView {
  id: string;
  key: string;
  privilegeClass: 'read' | 'write' | 'destructive' | 'financial' | 'admin';
  approvalClass: 'none' | 'single' | 'dual';
  blocked: boolean;
  mcpServerId: string | null;
  /** The hash of the definition discovery last saw (inventory's toolDefinitionHash); absent or null: never discovered. */
  definitionHash?: string | null;
  /** The classification of the data resource the tool reads or writes; absent or null: none. */
  dataClassification?: string | null;
  /** Its API resource's base URL is on the internet (not a private, loopback or cluster-internal host). */
  internetFacing?: boolean;
}

export interface BindingView {
  id: string;
  targetKind: 'tool' | 'mcp_server' | 'api_resource' | 'data_resource';
  targetId: string;
  actions: string[];
  constraints: { max_amount?: number; currency?: string; allowed_targets?: string[] };
  expiresAt: string | null;
  identityId: string | null;
  /** On a tool: the definition hash it was granted (or re-approved) against; absent or null: not pinned. */
  pinnedDefinitionHash?: string | null;
}

export interface DelegationView {
  principalRef: string;
  scopes: string[];
  expiresAt: string | null;
}

export interface Condition {
  /** Absent for `cel`, which reads the whole input. */
  field?: string;
  op: string;
  value?: unknown;
}

export interface Rule {
  id: string;
  description?: string;
  effect: Effect;
  reason_code: string;
  conditions: Condition[];
  obligations?: { approvals_required?: number };
}

/**
 * What a condition needs of one field (the rule index reads these): the condition can hold only when the
 * field at `path` is one of `values` (without `values`: holds any value, not absent or null). `exact` when
 * that is also enough (`eq`, `in`), not when it is one conjunct of a CEL expression whose other parts still
 * have to hold.
 */
export interface ConditionKey {
  field: string;
  path: string[];
  values?: unknown[];
  exact: boolean;
}

/** A condition ready to run: `test` reads the decision document. */
export interface CompiledCondition extends Condition {
  test: (doc: Record<string, unknown>) => boolean;
  /** What the condition needs of fields, when it says (absent: the rule index files the rule by another condition or scans it). */
  keys?: ConditionKey[];
}

/** A rule whose conditions are compiled; `policy` names the policy it came from. */
export interface CompiledRule extends Rule {
  policy?: string;
  /** The conditions as written (the explain trace lists them so). */
  compiled: CompiledCondition[];
  /** The same, cheapest first: comparisons, then regular expressions, then CEL. All must hold, so order changes no result. */
  ordered: CompiledCondition[];
}

export interface DenyClassRule {
  id: string;
  privilegeClass: string;
  agentId: string | null;
}

/** The registry state a decision reads, held in memory per organisation. */
export interface Snapshot {
  tools: Record<string, ToolView>;
  mcpServers: Record<string, { trustState: 'approved' | 'unknown' | 'unsigned' | 'quarantined' }>;
  bindings: BindingView[];
  delegations: DelegationView[];
  denyClassRules: DenyClassRule[];
  /** Rules of published, active policies, in policy order, compiled once per version. */
  rules: CompiledRule[];
}

/**
 * What an agent did earlier in one session, as flow rules read it (`session.*` fields): only calls that
 * were allowed count, since nothing else ran.
 */
export interface SessionFacts {
  /** The highest data classification read (CLASSIFICATIONS order), or null. */
  maxClassification: string | null;
  /** Content came in from an untrusted source: a tool on an MCP server not `approved`, or an API on the internet. */
  untrustedContent: boolean;
  /** Allowed calls, by tool key (at most MAX_SESSION_TOOLS keys; `calls` counts every call). */
  tools: Record<string, number>;
  /** Allowed calls in all. */
  calls: number;
}

/** The session a decision belongs to: its key and its facts before this call. */
export interface SessionView {
  id: string;
  facts: SessionFacts;
}

export interface DecisionInput {
  agent: AgentView;
  /** The session of the call; null or absent: none (the console), and every `session.*` field reads empty. */
  session?: SessionView | null;
  identityId: string | null;
  action: ActionRequest;
  now: string;
  /** A valid approval for exactly this request was presented. */
  approvalPresent?: boolean;
  /** Trace every rule with each condition's result, not only the rules that matched (simulation). */
  explain?: boolean;
}

export interface TraceEntry {
  step: string;
  outcome: 'pass' | 'deny' | 'require_approval' | 'allow' | 'skip';
  reason?: string;
  detail?: Record<string, unknown>;
}

export interface Decision {
  decision: Effect;
  reasonCodes: string[];
  approvalsRequired: number;
  trace: TraceEntry[];
}
