/**
 * The one error registry: every code of the spec's Errors table with its HTTP status.
 * `payload_too_large` is Tollgate's own addition (the spec leaves body limits open; see docs/decisions.md).
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
  conflict: 409,
  version_conflict: 409,
  idempotency_conflict: 409,
  approval_not_pending: 409,
  approval_expired: 409,
  duplicate_approver: 409,
  payload_too_large: 413,
  validation_failed: 422,
  confirmation_required: 422,
  invalid_policy: 422,
  invalid_cursor: 422,
  production_requirements: 422,
  precondition_required: 428,
  rate_limited: 429,
  internal_error: 500,
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
  conflict: 'The request conflicts with the current state.',
  version_conflict: 'The record has changed since you read it.',
  idempotency_conflict: 'This Idempotency-Key was used with a different request.',
  approval_not_pending: 'The approval is no longer pending.',
  approval_expired: 'The approval has expired.',
  duplicate_approver: 'You have already approved this request.',
  payload_too_large: 'The request body is too large.',
  validation_failed: 'The request is not valid.',
  confirmation_required: 'Set confirm to true to carry out this operation.',
  invalid_policy: 'The policy is not valid.',
  invalid_cursor: 'The cursor is not valid.',
  production_requirements: 'Production agents need an owner, a purpose and a data classification.',
  precondition_required: 'Send If-Match with the version you read.',
  rate_limited: 'Too many requests; retry later.',
  internal_error: 'Something went wrong on our side. Quote the correlation ID when you report it.',
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
