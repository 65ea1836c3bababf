import { describe, expect, it } from 'vitest';
import { ApiError, ERROR_STATUS } from '../../api/platform/errors.js';
import { checkIfMatch } from '../../api/platform/if-match.js';
import { Cursors } from '../../api/platform/pagination.js';

const codeOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return (err as ApiError).code;
  }
  return undefined;
};

describe('error registry', () => {
  // The spec's Errors table (behaviour.md), status by status.
  const SPEC: Record<number, string[]> = {
    400: ['bad_request'],
    401: ['unauthenticated', 'token_expired', 'invalid_token', 'invalid_audience', 'session_revoked', 'identity_revoked', 'invalid_client'],
    403: ['forbidden', 'csrf_failed', 'module_not_in_plan', 'four_eyes_required', 'self_approval_prohibited'],
    404: ['not_found'],
    409: ['conflict', 'version_conflict', 'idempotency_conflict', 'approval_not_pending', 'approval_expired', 'duplicate_approver'],
    422: ['validation_failed', 'confirmation_required', 'invalid_policy', 'invalid_cursor', 'production_requirements'],
    428: ['precondition_required'],
    429: ['rate_limited'],
    500: ['internal_error'],
  };

  it.each(Object.entries(SPEC).flatMap(([status, codes]) => codes.map((c) => [c, Number(status)] as const)))(
    '%s answers %i',
    (code, status) => {
      expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS]).toBe(status);
      expect(new ApiError(code as keyof typeof ERROR_STATUS).status).toBe(status);
    },
  );

  it("adds to the spec only HTTP's own answers and 503 (D5, D21)", () => {
    const spec = new Set(Object.values(SPEC).flat());
    expect(Object.fromEntries(Object.entries(ERROR_STATUS).filter(([c]) => !spec.has(c)))).toEqual({
      method_not_allowed: 405,
      request_timeout: 408,
      payload_too_large: 413,
      uri_too_long: 414,
      unsupported_media_type: 415,
      header_too_large: 431,
      service_unavailable: 503,
    });
  });
});

describe('If-Match', () => {
  it('answers 428 when required and missing, and passes when optional and missing', () => {
    expect(codeOf(() => checkIfMatch(undefined, 3, true))).toBe('precondition_required');
    expect(codeOf(() => checkIfMatch(undefined, 3, false))).toBeUndefined();
  });

  it.each([['3'], ['"3"'], ['W/"3"'], [' 3 ']])('accepts %j for version 3', (header) => {
    expect(codeOf(() => checkIfMatch(header, 3, true))).toBeUndefined();
  });

  it('answers 409 version_conflict with the current version when stale', () => {
    try {
      checkIfMatch('2', 3, true);
      expect.unreachable();
    } catch (err) {
      expect(err).toMatchObject({ code: 'version_conflict', status: 409, details: { current_version: 3 } });
    }
  });

  it.each([['*'], ['abc'], ['"3'], ['-1'], ['']])('answers 422 for %j', (header) => {
    expect(codeOf(() => checkIfMatch(header, 3, false))).toBe('validation_failed');
  });
});

describe('cursors', () => {
  const cursors = new Cursors('a-secret-of-sixteen-or-more');
  const position = { t: '2026-11-23T09:00:00.000Z', id: '3f2b8c1e-0d6a-4a4e-9f3a-1b2c3d4e5f60' };

  it('round-trip a position within their list', () => {
    expect(cursors.decode('users:org-a', cursors.encode('users:org-a', position))).toEqual(position);
    expect(cursors.decode('users:org-a', undefined)).toBeUndefined();
  });

  it('refuse a flipped byte, a truncation, an extra segment, another list and another key', () => {
    const good = cursors.encode('users:org-a', position);
    const [body, mac] = good.split('.') as [string, string];
    const flipped = `${body.slice(0, 5)}${body[5] === 'A' ? 'B' : 'A'}${body.slice(6)}.${mac}`;
    const bad = [flipped, good.slice(0, -2), `${good}.x`, body, '', '.'];
    for (const c of bad) expect(codeOf(() => cursors.decode('users:org-a', c)), c).toBe('invalid_cursor');
    expect(codeOf(() => cursors.decode('users:org-b', good))).toBe('invalid_cursor');
    expect(codeOf(() => new Cursors('another-secret-entirely').decode('users:org-a', good))).toBe('invalid_cursor');
  });

  it('set next_cursor only when a further row was fetched', () => {
    const rows = [1, 2, 3].map((n) => ({ n, t: `2026-11-23T09:00:0${n}.000Z`, id: `id-${n}` }));
    const full = cursors.page('s', rows, 2, (r) => ({ t: r.t, id: r.id }), (r) => r.n);
    expect(full.items).toEqual([1, 2]);
    expect(cursors.decode('s', full.next_cursor!)).toEqual({ t: rows[1]!.t, id: 'id-2' });
    const last = cursors.page('s', rows.slice(0, 2), 2, (r) => ({ t: r.t, id: r.id }), (r) => r.n);
    expect(last).toEqual({ items: [1, 2], next_cursor: null });
  });
});
