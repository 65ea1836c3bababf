/**
 * The one error registry: every code of the spec's Errors table with its HTTP status.
 * Tollgate's own additions, for what the spec's table has no code for (docs/decisions.md, D5 and D21): the
 * answers of HTTP itself (405, 408, 413, 414, 415, 431) and 503 when the database cannot be reached.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthenticated: 401,
  token_expired: 401,
  invalid_token: 401,
  invalid_audience: 401,
  session_revoked: 401,
  identity_revoked: 401,
  invalid_client: 401,
  forbidden: 403,
  csrf_failed: 403,
  module_not_in_plan: 403,
  four_eyes_required: 403,
  self_approval_prohibited: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  version_conflict: 409,
  idempotency_conflict: 409,
  approval_not_pending: 409,
  approval_expired: 409,
  duplicate_approver: 409,
  payload_too_large: 413,
  uri_too_long: 414,
  unsupported_media_type: 415,
  validation_failed: 422,
  confirmation_required: 422,
  invalid_policy: 422,
  invalid_cursor: 422,
  production_requirements: 422,
  precondition_required: 428,
  rate_limited: 429,
  header_too_large: 431,
  internal_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

const DEFAULT_MESSAGES: Record<ErrorCode, string> = {
  bad_request: 'The request could not be read.',
  unauthenticated: 'Sign in first.',
  token_expired: 'The access token has expired.',
  invalid_token: 'The access token is not valid.',
  invalid_audience: 'The access token is not meant for this service.',
  session_revoked: 'The session was revoked.',
  identity_revoked: 'The workload identity was revoked.',
  invalid_client: 'Unknown client or wrong secret.',
  forbidden: 'You do not have the permission this operation needs.',
  csrf_failed: 'The X-CSRF-Token header is missing or does not match the CSRF cookie.',
  module_not_in_plan: "This feature is not part of the organisation's plan.",
  four_eyes_required: 'A second person must do this.',
  self_approval_prohibited: 'You cannot approve your own request.',
  not_found: 'Not found.',
  method_not_allowed: 'This operation does not take this method; the Allow header lists the ones it takes.',
  request_timeout: 'The request did not arrive in time.',
  conflict: 'The request conflicts with the current state.',
  version_conflict: 'The record has changed since you read it.',
  idempotency_conflict: 'This Idempotency-Key was used with a different request.',
  approval_not_pending: 'The approval is no longer pending.',
  approval_expired: 'The approval has expired.',
  duplicate_approver: 'You have already approved this request.',
  payload_too_large: 'The request body is too large.',
  uri_too_long: 'A path segment is longer than this service accepts.',
  unsupported_media_type: 'Send the body as application/json.',
  validation_failed: 'The request is not valid.',
  confirmation_required: 'Set confirm to true to carry out this operation.',
  invalid_policy: 'The policy is not valid.',
  invalid_cursor: 'The cursor is not valid.',
  production_requirements: 'Production agents need an owner, a purpose and a data classification.',
  precondition_required: 'Send If-Match with the version you read.',
  rate_limited: 'Too many requests; retry later.',
  header_too_large: 'The request headers are larger than this service accepts.',
  internal_error: 'Something went wrong on our side. Quote the correlation ID when you report it.',
  service_unavailable: 'The service is unavailable right now; retry later.',
};

export interface ValidationDetail {
  field: string;
  message: string;
  code?: string;
}

/** An expected failure: carries a code of the registry, a message safe to show and optional details. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details: unknown = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message ?? DEFAULT_MESSAGES[code]);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what = 'Not found.') => new ApiError('not_found', what);
export const forbidden = (permission: string) =>
  new ApiError('forbidden', `This operation needs the permission ${permission}.`, {
    required_permission: permission,
  });
export const validationFailed = (details: ValidationDetail[], message?: string) =>
  new ApiError('validation_failed', message ?? DEFAULT_MESSAGES.validation_failed, details);

export function defaultMessage(code: ErrorCode): string {
  return DEFAULT_MESSAGES[code];
}

/** Seconds a 503 `service_unavailable` asks the client to wait (Retry-After) before it tries again. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

// SQLSTATEs of a database that is gone or going: class 08 (connection exception), 57P01 admin_shutdown,
// 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, shutting down, in recovery), 53300
// too_many_connections.
const UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[123]|53300)$/;
// The network below the driver: refused, reset, timed out, unresolvable, unreachable.
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN']);
// node-postgres and kysely say so in words only: a connection that ended, a pool that gave up waiting for
// one, a client that is no longer usable, a pool or driver already closed (the process is shutting down).
const UNAVAILABLE_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|connection error and is not queryable|Client was closed and is not queryable|Cannot use a pool after calling end|driver has already been destroyed/i;

/**
 * Whether an error means the database cannot be reached (rather than that a statement was wrong): such a
 * request answers 503 with Retry-After, not 500. Looks through `cause` and an AggregateError's `errors`
 * (a connection to a name with several addresses fails with one error per address).
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (!err || typeof err !== 'object' || depth > 4) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (UNAVAILABLE_SQLSTATE.test(e.code) || UNAVAILABLE_ERRNO.has(e.code))) return true;
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}
