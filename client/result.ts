/** Action states of the spec. */
export type ActionState =
  | 'received'
  | 'approval_required'
  | 'approved'
  | 'executed'
  | 'failed'
  | 'denied'
  | 'rejected'
  | 'expired'
  | 'cancelled'
  | 'revoked';

export type Decision = 'allow' | 'deny' | 'require_approval';

/** ActionIn of the spec: the proposed tool call, sent as is (JSON). */
export interface ActionRequest {
  tool: string;
  /** Default `invoke` (the API's default). */
  operation?: string;
  /** A URI-like string `<scheme>://<path>`. */
  target: string;
  parameters?: Record<string, unknown>;
  environment?: 'production' | 'staging' | 'development' | null;
  on_behalf_of?: string | null;
  justification?: string | null;
  approval_token?: string | null;
}

/** The body of a `POST /actions` answer (the API's `submissionOut`). */
export interface SubmissionBody {
  action: { id: string; status: ActionState };
  decision: { decision: Decision; reason_codes: string[] };
  execution: { status: string; output_redacted: unknown } | null;
  approval: { id: string; status: string; approvals_required: number; expires_at: string } | null;
  replayed: boolean;
  idempotency_key: string;
}

/** The body of `GET /actions/gateway/{id}`: the agent's view of its action. */
export interface GatewayActionStatus {
  id: string;
  state: ActionState;
  decision: Decision;
  reason_codes: string[];
  approval: { id: string; status: string; approvals_required: number; expires_at: string; approval_token?: string } | null;
}

/**
 * The result of a submission, with exactly the fields of the spec's rule 6. Field names are the spec's
 * (and the API's) so that a result reads the same in code, logs and the API's documents.
 */
export interface ActionResult {
  action_id: string;
  state: ActionState;
  decision: Decision;
  reason_codes: string[];
  approval_id: string | null;
  approval_expires_at: string | null;
  /** The redacted output of the execution (`execution.output_redacted`), null when nothing ran. */
  output: unknown;
  execution_status: string | null;
  /** The key the submission was sent with: the caller's, or the generated `sdk-` + 32 hex. */
  idempotency_key: string;
  /** The API's answer as received. */
  raw: SubmissionBody;
  /** The gateway ran the tool (state `executed`). */
  executed: boolean;
  /** An approval is open or granted and the request waits for its resubmission with the token. */
  needs_approval: boolean;
}

/** Rule 6: the result of a submission's answer. */
export function toResult(raw: SubmissionBody, idempotencyKey: string): ActionResult {
  const state = raw.action.status;
  const decision = raw.decision.decision;
  return {
    action_id: raw.action.id,
    state,
    decision,
    reason_codes: raw.decision.reason_codes,
    approval_id: raw.approval?.id ?? null,
    approval_expires_at: raw.approval?.expires_at ?? null,
    output: raw.execution?.output_redacted ?? null,
    execution_status: raw.execution?.status ?? null,
    idempotency_key: idempotencyKey,
    raw,
    executed: state === 'executed',
    needs_approval: decision === 'require_approval' && (state === 'approval_required' || state === 'approved'),
  };
}

/** A submission answer the client can read; anything else is a protocol error. */
export function isSubmissionBody(body: unknown): body is SubmissionBody {
  const b = body as Partial<SubmissionBody> | null;
  return (
    typeof b === 'object' &&
    b !== null &&
    typeof b.action?.id === 'string' &&
    typeof b.action.status === 'string' &&
    typeof b.decision?.decision === 'string' &&
    Array.isArray(b.decision.reason_codes)
  );
}

export function isGatewayStatus(body: unknown): body is GatewayActionStatus {
  const b = body as Partial<GatewayActionStatus> | null;
  return typeof b === 'object' && b !== null && typeof b.id === 'string' && typeof b.state === 'string';
}

/** `GET /gateway/permissions`: the agent's containment state and the tools it may invoke (a Tollgate extension). */
export interface AgentPermissions {
  agent_id: string;
  /** Suspended, revoked or gateway access off: the agent may call nothing. */
  contained: boolean;
  /** Why it is contained (`AGENT_SUSPENDED`, `AGENT_REVOKED`, `GATEWAY_ACCESS_DISABLED`). */
  reason_codes: string[];
  operation: string;
  tools: Array<{ tool: string; privilege_class: string; approval_class: string; mcp_server_id: string | null; constrained: boolean }>;
  registry_version: string;
  evaluated_at: string;
}

export function isAgentPermissions(body: unknown): body is AgentPermissions {
  const b = body as Partial<AgentPermissions> | null;
  return (
    typeof b === 'object' &&
    b !== null &&
    typeof b.contained === 'boolean' &&
    Array.isArray(b.reason_codes) &&
    Array.isArray(b.tools) &&
    b.tools.every((t) => typeof t?.tool === 'string')
  );
}
