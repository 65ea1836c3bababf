import { z } from 'zod';
import { ApiError } from './errors.js';

const ifMatchValue = z
  .string()
  .regex(/^(?:W\/)?(?:"\d{1,9}"|\d{1,9})$/, 'expected a version number such as "3"')
  .describe(
    "The `version` of the record as you read it (a policy's also comes as its ETag), bare or quoted: 3, \"3\" or W/\"3\". " +
      'A version that is no longer current answers 409 version_conflict with the current one in details.current_version.',
  );

/**
 * The `headers` schema of an operation that takes If-Match: `required` where the service calls
 * checkIfMatch(..., true), `optional` where it honours the header when sent. Both validate only the
 * header's form (a version number, 422 naming header.if-match otherwise); the header stays optional
 * here even where it is required, so that a missing one reaches the check and answers 428
 * precondition_required as the spec says, not 422. The OpenAPI document marks `required` as a required
 * header with its 428 answer (platform/openapi.ts recognises this very object). Loose: the other
 * headers of the request (cookies, CSRF, authorisation) pass through untouched.
 */
export const ifMatchHeaders = {
  required: z.looseObject({ 'if-match': ifMatchValue.optional() }),
  optional: z.looseObject({ 'if-match': ifMatchValue.optional() }),
} as const;

/** Parses If-Match: a record version, bare or quoted as an entity tag ("3", W/"3"). */
export function parseIfMatch(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const raw = (Array.isArray(header) ? header[0] : header)?.trim() ?? '';
  const m = /^(?:W\/)?(?:"(\d{1,9})"|(\d{1,9}))$/.exec(raw);
  if (!m) {
    throw new ApiError('validation_failed', 'If-Match must carry a record version such as "3".', [
      { field: 'header.if-match', message: 'expected a version number' },
    ]);
  }
  return Number(m[1] ?? m[2]);
}

/**
 * The shared optimistic-concurrency check. `required`: a missing header answers 428
 * precondition_required; otherwise a missing header skips the check. A stale one answers 409.
 */
export function checkIfMatch(
  header: string | string[] | undefined,
  currentVersion: number,
  required: boolean,
): void {
  const expected = parseIfMatch(header);
  if (expected === undefined) {
    if (required) throw new ApiError('precondition_required');
    return;
  }
  if (expected !== currentVersion) {
    throw new ApiError('version_conflict', `The record is at version ${currentVersion}, not ${expected}.`, {
      current_version: currentVersion,
    });
  }
}
