import { ApiFailure } from './client';

/**
 * What an error code means for the person at the console, in words. The API's own message follows
 * it (it names the record or the field); the correlation ID is shown beside both, for support.
 */
const IN_WORDS: Record<string, string> = {
  unauthenticated: 'You are signed out. Sign in again to go on.',
  session_revoked: 'This session was ended (signed out elsewhere, or by an administrator). Sign in again.',
  forbidden: 'Your roles do not grant this.',
  csrf_failed: 'The page’s security token is stale. Reload the page and try again.',
  module_not_in_plan: 'This part of Tollgate is not in your organisation’s plan.',
  four_eyes_required: 'Four eyes: this needs a second person. Someone other than the one who made the change must do this step.',
  self_approval_prohibited: 'Separation of duties: you cannot decide a request you made yourself, or one made on your behalf.',
  duplicate_approver: 'You have already voted on this request; the second vote must come from someone else.',
  approval_not_pending: 'This request was already decided, cancelled or expired.',
  approval_expired: 'This request expired before it was decided.',
  not_found: 'It does not exist, or it is not in this organisation.',
  conflict: 'That conflicts with what is already there.',
  version_conflict: 'Someone changed this since you opened it. Reload to see their change, then try again.',
  precondition_required: 'The API needs to know which version you are changing (If-Match). Reload and try again.',
  idempotency_conflict: 'A request with the same key but different content was already made.',
  validation_failed: 'Some fields are not valid.',
  confirmation_required: 'This needs an explicit confirmation.',
  invalid_policy: 'The rules are not valid.',
  production_requirements: 'Production agents need more details (such as an owner and a purpose) before they can be registered or changed.',
  invalid_cursor: 'The list moved on; start again from the first page.',
  rate_limited: 'Too many requests. Wait a moment and try again.',
  internal_error: 'Something went wrong on the server. Quote the correlation ID when you report it.',
  network_error: 'The API could not be reached. Check your connection.',
};

export function inWords(code: string): string | undefined {
  return IN_WORDS[code];
}

/** The field errors of a validation_failed answer, as `field: message` lines. */
export function fieldErrors(failure: ApiFailure): Array<{ field: string; message: string }> {
  if (failure.code !== 'validation_failed' || !Array.isArray(failure.details)) return [];
  return (failure.details as Array<{ field?: unknown; message?: unknown }>).map((d) => ({
    field: String(d.field ?? ''),
    message: String(d.message ?? ''),
  }));
}

export function asFailure(error: unknown): ApiFailure {
  if (error instanceof ApiFailure) return error;
  return new ApiFailure(0, 'internal_error', error instanceof Error ? error.message : String(error), null, undefined);
}
