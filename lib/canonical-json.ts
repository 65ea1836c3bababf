import { configure } from 'safe-stable-stringify';

/**
 * RFC 8785 canonical JSON (JCS), what evidence hashes, approval tokens, policy and tool-definition hashes
 * and evidence bundles are computed over: object members sorted by their names' UTF-16 code units, no
 * whitespace, strings and numbers as ECMAScript's JSON.stringify writes them (JCS's own rules), members
 * whose value is undefined left out and undefined array items written as null, `toJSON` honoured (a Date
 * is its ISO string).
 *
 * safe-stable-stringify in its deterministic, strict mode writes exactly that for every JSON value, in
 * about half the time of the `canonicalize` package it replaced (one evidence record of ~3 KB: 17 µs
 * against 33 µs), which mattered on the decision path: each record is hashed over it. Their outputs are
 * compared byte for byte on generated JSON values (test/unit/canonical-json.test.ts), so hashes made
 * before the change verify after it. What JSON cannot hold (NaN, infinities, functions, symbols, BigInt,
 * a cycle) throws instead of being written some other way. Here in lib/, not in the API's shared module,
 * because a module's index would load it wherever the schemas go (the sidecar included); only its importers
 * load it.
 */
const stringify = configure({ deterministic: true, strict: true, bigint: false, circularValue: TypeError });

/** The canonical JSON of `value`; undefined only for undefined. Throws on what JSON cannot hold. */
export function canonicalize(value: unknown): string | undefined {
  return stringify(value);
}
