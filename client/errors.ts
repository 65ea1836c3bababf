import type { ActionResult, GatewayActionStatus } from './result.js';

/**
 * The base of every error the client raises itself. Network errors (refused connections, resets,
 * undici's timeouts) are not wrapped: they reach the caller as undici or Node raised them (rule 7).
 * No error ever carries a client secret or a token, in its message or its fields.
 */
export class GatewayClientError extends Error {
  override name = 'GatewayClientError';
}

/** The central API answered with an error (the spec's envelope `{error: {code, message, correlation_id, details}}`). */
export class GatewayApiError extends GatewayClientError {
  override name = 'GatewayApiError';
  /** HTTP status. */
  readonly status: number;
  /** The spec's error code, e.g. `idempotency_conflict`; `http_<status>` when the answer had no envelope. */
  readonly code: string;
  /** The correlation ID of the failed request (the API's echo, else the one sent). */
  readonly correlationId: string | null;
  readonly details: unknown;

  constructor(init: { status: number; code: string; message: string; correlationId: string | null; details?: unknown }, options?: ErrorOptions) {
    super(`${init.status} ${init.code}: ${init.message}`, options);
    this.status = init.status;
    this.code = init.code;
    this.correlationId = init.correlationId;
    this.details = init.details ?? null;
  }
}

/**
 * The workload identity cannot authenticate: the token exchange was refused (`invalid_client`,
 * `identity_revoked`, `session_revoked` for a suspended agent), a request answered `identity_revoked`
 * (or another 401 that a fresh token cannot cure), or the one retry after `token_expired` or
 * `session_revoked` failed again (rule 2). `cause` holds the first failure when there was a retry.
 */
export class AuthenticationError extends GatewayApiError {
  override name = 'AuthenticationError';
}

/** Authorise-and-execute: the gateway decided `deny` (rule 5). The result is the one a submission returns. */
export class ActionDeniedError extends GatewayClientError {
  override name = 'ActionDeniedError';
  constructor(readonly result: ActionResult) {
    super(`The action was denied: ${result.reason_codes.join(', ') || 'no reason given'}.`);
  }
}

/** Authorise-and-execute: the approval was rejected, expired or cancelled (or the agent was revoked) (rule 5). */
export class ApprovalNotGrantedError extends GatewayClientError {
  override name = 'ApprovalNotGrantedError';
  constructor(
    /** The submission's result (the one that asked for approval, or the resubmission's). */
    readonly result: ActionResult,
    /** Why: `rejected`, `expired`, `cancelled` or `revoked`. */
    readonly outcome: string,
    /** The gateway status read last, when polling found the outcome. */
    readonly status: GatewayActionStatus | null = null,
  ) {
    super(`The approval was not granted: ${outcome}.`);
  }
}

/** Authorise-and-execute: no approval token appeared within the wait (rule 5). */
export class ApprovalTimeoutError extends GatewayClientError {
  override name = 'ApprovalTimeoutError';
  constructor(
    readonly result: ActionResult,
    /** How long the client waited, in seconds of its clock. */
    readonly waitedSeconds: number,
  ) {
    super(`No approval within ${waitedSeconds} seconds; the action ${result.action_id} is still waiting.`);
  }
}
