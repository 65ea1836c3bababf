import { describe, expect, it } from 'vitest';
import {
  ApiError,
  defaultMessage,
  ERROR_CODES,
  ERROR_STATUS,
  forbidden,
  notFound,
  validationFailed,
  type ErrorCode,
} from '../../api/platform/errors.js';

/**
 * The one error registry: every code of the spec's Errors table
 * (shared/spec/behaviour.md, "Errors") maps to the HTTP status given there.
 */

// The spec's Errors table, row by row, as written there.
const SPEC_ERRORS: Array<[status: number, codes: string[]]> = [
  [400, ['bad_request']],
  [401, ['unauthenticated', 'token_expired', 'invalid_token', 'invalid_audience', 'session_revoked', 'identity_revoked', 'invalid_client']],
  [403, ['forbidden', 'csrf_failed', 'module_not_in_plan', 'four_eyes_required', 'self_approval_prohibited']],
  [404, ['not_found']],
  [409, ['conflict', 'version_conflict', 'idempotency_conflict', 'approval_not_pending', 'approval_expired', 'duplicate_approver']],
  [422, ['validation_failed', 'confirmation_required', 'invalid_policy', 'invalid_cursor', 'production_requirements']],
  [428, ['precondition_required']],
  [429, ['rate_limited']],
  [500, ['internal_error']],
];
const SPEC_CASES = SPEC_ERRORS.flatMap(([status, codes]) => codes.map((code) => [code, status] as const));
const SPEC_CODES = new Set(SPEC_CASES.map(([code]) => code));

describe('error registry', () => {
  it('the transcribed table has the 28 codes of the spec', () => {
    expect(SPEC_CASES).toHaveLength(28);
    expect(SPEC_CODES.size).toBe(28);
  });

  it.each(SPEC_CASES)('%s is registered with HTTP %i', (code, status) => {
    expect(ERROR_CODES).toContain(code);
    expect(ERROR_STATUS[code as ErrorCode]).toBe(status);
  });

  it.each(SPEC_CASES)('new ApiError(%s) answers %i with a message to show', (code, status) => {
    const err = new ApiError(code as ErrorCode);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe(code);
    expect(err.status).toBe(status);
    expect(err.message).toBe(defaultMessage(code as ErrorCode));
    expect(err.message.trim().length).toBeGreaterThan(0);
    expect(err.details).toBeNull();
  });

  it("codes beyond the spec's table are only Tollgate's documented addition, payload_too_large (413)", () => {
    const extra = ERROR_CODES.filter((c) => !SPEC_CODES.has(c));
    expect(extra).toEqual(['payload_too_large']);
    expect(ERROR_STATUS.payload_too_large).toBe(413);
  });

  it('the 500 message says nothing internal and asks for the correlation ID', () => {
    expect(defaultMessage('internal_error')).toMatch(/correlation ID/);
  });

  it('rate_limited may carry Retry-After as a response header', () => {
    const err = new ApiError('rate_limited', undefined, { retry_after_seconds: 12 }, { 'retry-after': '12' });
    expect(err.status).toBe(429);
    expect(err.headers).toEqual({ 'retry-after': '12' });
  });
});

describe('error helpers', () => {
  it('forbidden names the required permission in details', () => {
    const err = forbidden('user:manage');
    expect(err).toMatchObject({ code: 'forbidden', status: 403, details: { required_permission: 'user:manage' } });
  });

  it('validation_failed details is an array naming each bad field', () => {
    const err = validationFailed([
      { field: 'email', message: 'expected an email address' },
      { field: 'query.limit', message: 'too big' },
    ]);
    expect(err).toMatchObject({ code: 'validation_failed', status: 422 });
    expect((err.details as Array<{ field: string }>).map((d) => d.field)).toEqual(['email', 'query.limit']);
  });

  it('notFound answers 404 not_found', () => {
    expect(notFound()).toMatchObject({ code: 'not_found', status: 404 });
  });
});
