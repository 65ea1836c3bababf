import { describe, expect, it } from 'vitest';
import {
  ApiError,
  defaultMessage,
  ERROR_CODES,
  ERROR_STATUS,
  forbidden,
  isDatabaseUnavailable,
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

  // Tollgate's additions (docs/decisions.md, D5): HTTP's own answers, and 503 when the database is gone.
  const ADDED: Record<string, number> = {
    method_not_allowed: 405,
    request_timeout: 408,
    payload_too_large: 413,
    uri_too_long: 414,
    unsupported_media_type: 415,
    header_too_large: 431,
    service_unavailable: 503,
  };

  it("codes beyond the spec's table are only Tollgate's documented additions, each with its HTTP status", () => {
    const extra = ERROR_CODES.filter((c) => !SPEC_CODES.has(c));
    expect(extra.sort()).toEqual(Object.keys(ADDED).sort());
    for (const [code, status] of Object.entries(ADDED)) expect(ERROR_STATUS[code as ErrorCode], code).toBe(status);
  });

  it('no addition takes a status the spec gives its own codes', () => {
    const specStatuses = new Set(SPEC_ERRORS.map(([status]) => status));
    for (const [code, status] of Object.entries(ADDED)) expect(specStatuses.has(status), code).toBe(false);
  });

  it.each(Object.keys(ADDED))('%s has a message to show that names nothing internal', (code) => {
    const message = defaultMessage(code as ErrorCode);
    expect(message.trim().length).toBeGreaterThan(0);
    expect(message).not.toMatch(/postgres|ECONN|stack|fastify/i);
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

describe('a database that cannot be reached', () => {
  const sqlError = (code: string, message = 'x') => Object.assign(new Error(message), { code, severity: 'FATAL' });

  it.each([
    ['57P01 admin_shutdown', sqlError('57P01', 'terminating connection due to administrator command')],
    ['57P02 crash_shutdown', sqlError('57P02')],
    ['57P03 cannot_connect_now', sqlError('57P03', 'the database system is starting up')],
    ['08006 connection_failure', sqlError('08006')],
    ['08001 unable to connect', sqlError('08001')],
    ['53300 too_many_connections', sqlError('53300')],
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['ECONNRESET', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
    ['ENOTFOUND', Object.assign(new Error('getaddrinfo ENOTFOUND db'), { code: 'ENOTFOUND' })],
    ['every address refused', new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })], 'connect failed')],
    ['a connection that ended', new Error('Connection terminated unexpectedly')],
    ['a connect timeout', new Error('Connection terminated due to connection timeout')],
    ['a pool that waited too long', new Error('timeout exceeded when trying to connect')],
    ['a client no longer usable', new Error('Client has encountered a connection error and is not queryable')],
    ['a pool closed for shutdown', new Error('driver has already been destroyed')],
    ['a cause that is one of these', new Error('query failed', { cause: sqlError('57P01') })],
  ])('%s is unavailability (503)', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it.each([
    ['23505 unique_violation', sqlError('23505')],
    ['22021 character_not_in_repertoire', sqlError('22021')],
    ['22P02 invalid_text_representation', sqlError('22P02')],
    ['42P01 undefined_table', sqlError('42P01')],
    ['40001 serialization_failure', sqlError('40001')],
    ['a plain error', new Error('boom')],
    ['not an error', 'ECONNREFUSED'],
    ['nothing', null],
  ])('%s is not (it stays a 4xx or a 500)', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
  });

  it('does not loop on an error that is its own cause', () => {
    const err = new Error('x') as Error & { cause?: unknown };
    err.cause = err;
    expect(isDatabaseUnavailable(err)).toBe(false);
  });
});
