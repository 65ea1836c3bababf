import { describe, expect, it } from 'vitest';
import { ApiError } from '../../api/platform/errors.js';
import { checkIfMatch, parseIfMatch } from '../../api/platform/if-match.js';

/**
 * The shared If-Match helper (spec Errors and Versioning): a missing header answers
 * 428 precondition_required where it is required, a stale version 409 version_conflict with the
 * current version, and a header that names no version 422.
 */

/** The ApiError fn throws, or undefined when it passes. */
function thrown(fn: () => unknown): ApiError | undefined {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    return err as ApiError;
  }
  return undefined;
}

describe('checkIfMatch', () => {
  it('missing and required: 428 precondition_required', () => {
    const err = thrown(() => checkIfMatch(undefined, 3, true));
    expect(err).toMatchObject({ code: 'precondition_required', status: 428 });
  });

  it('missing and optional: passes', () => {
    expect(thrown(() => checkIfMatch(undefined, 3, false))).toBeUndefined();
  });

  it.each([['3'], ['"3"'], ['W/"3"'], [' "3" '], [['3']]])('accepts %j for version 3, required or not', (header) => {
    expect(thrown(() => checkIfMatch(header, 3, true))).toBeUndefined();
    expect(thrown(() => checkIfMatch(header, 3, false))).toBeUndefined();
  });

  it.each([
    ['an older version', '2'],
    ['an older quoted version', '"2"'],
    ['an older weak tag', 'W/"1"'],
    ['a version from the future', '4'],
  ])('%s: 409 version_conflict with details.current_version', (_what, header) => {
    for (const required of [true, false]) {
      const err = thrown(() => checkIfMatch(header, 3, required));
      expect(err).toMatchObject({ code: 'version_conflict', status: 409, details: { current_version: 3 } });
    }
  });

  it.each([['abc'], ['"3'], ['3"'], ['w/"3"'], ['-1'], ['3.0'], ['1e3'], ['0x3'], ['"3", "4"'], ['""'], ['']])(
    'answers 422 validation_failed naming the header for %j, even where the header is optional',
    (header) => {
      for (const required of [true, false]) {
        const err = thrown(() => checkIfMatch(header, 3, required));
        expect(err).toMatchObject({ code: 'validation_failed', status: 422 });
        expect(Array.isArray(err!.details)).toBe(true);
        expect((err!.details as Array<{ field: string }>).map((d) => d.field)).toEqual(['header.if-match']);
      }
    },
  );
});

describe('parseIfMatch', () => {
  it('reads the version out of each accepted form', () => {
    expect(parseIfMatch('12')).toBe(12);
    expect(parseIfMatch('"12"')).toBe(12);
    expect(parseIfMatch('W/"12"')).toBe(12);
    expect(parseIfMatch(undefined)).toBeUndefined();
  });
});
