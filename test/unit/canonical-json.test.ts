import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../lib/canonical-json.js';

// The reference: the `canonicalize` package, RFC 8785 by one of its authors, which the product used
// before; every hash stored until then was made with it, so the two must agree byte for byte.
const reference = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string | undefined;

/** Strings with what JSON escapes or leaves alone: controls, quotes, backslashes, U+2028, astral and lone surrogates. */
const awkwardString = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom('"', '\\', '\u0000', '\u001f', '\u007f', '\u2028', '\u2029', '\ud800', '\udfff', '\ud83d', '\ude00', 'é', 'e\u0301', '€', 'a', '1') }),
);
/** Numbers whose shortest form JCS fixes: exponents, -0, the edges of doubles, integers past 2^53. */
const awkwardNumber = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(-0, 1e21, 1e-7, 5e-324, Number.MAX_VALUE, Number.MIN_SAFE_INTEGER, 2 ** 53 + 2, 0.1 + 0.2),
);
const { value: jsonish } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    awkwardNumber,
    awkwardString,
    fc.array(tie('value'), { maxLength: 6 }),
    fc.dictionary(fc.oneof(awkwardString, fc.constantFrom('10', '2', '-1', '__proto__x', 'B', 'a', 'ä')), tie('value'), { maxKeys: 6 }),
  ),
}));

describe('canonical JSON (RFC 8785)', () => {
  it('is byte for byte what the reference writes, for generated JSON values', () => {
    fc.assert(
      fc.property(jsonish, (value) => {
        expect(canonicalize(value)).toBe(reference(value));
      }),
      { numRuns: 3000 },
    );
  });

  it('sorts members by UTF-16 code units at every depth, and writes no whitespace', () => {
    const value = { z: 1, a: { c: [1, { y: 2, b: 3 }] }, '10': 1, '2': 2, é: 1, 'e\u0301': 2, '\ud83d\ude00': 0, '\uffff': 0 };
    expect(canonicalize(value)).toBe('{"10":1,"2":2,"a":{"c":[1,{"b":3,"y":2}]},"e\u0301":2,"z":1,"é":1,"\ud83d\ude00":0,"\uffff":0}');
  });

  it('writes numbers and strings as JCS does', () => {
    expect(canonicalize([-0, 1e21, 1e-7, 100, 0.000001, 2 ** 53 + 2, 'a\u2028b', '\u0000"\\', '\ud800'])).toBe(
      '[0,1e+21,1e-7,100,0.000001,9007199254740994,"a\u2028b","\\u0000\\"\\\\","\\ud800"]',
    );
  });

  it('leaves out undefined members, writes undefined array items as null, and honours toJSON', () => {
    expect(canonicalize({ b: undefined, a: [undefined, new Date(0)], c: { toJSON: () => ({ y: 1, x: 2 }) } })).toBe(
      '{"a":[null,"1970-01-01T00:00:00.000Z"],"c":{"x":2,"y":1}}',
    );
    expect(canonicalize(undefined)).toBeUndefined();
  });

  it('refuses what JSON cannot hold instead of writing it some other way', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const bad of [NaN, Infinity, { a: -Infinity }, [() => 1], { s: Symbol('s') }, 10n, cyclic]) expect(() => canonicalize(bad)).toThrow();
  });
});
