import { ApiError } from './errors.js';

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
