import { describe, expect, it } from 'vitest';
import { jsonNestsDeeperThan, MAX_JSON_DEPTH, unstorableValues } from '../../api/platform/input.js';

/** The input boundary's two checks, as pure functions (the API tests send them through the app). */

const nest = (n: number, open = '[', close = ']') => open.repeat(n) + close.repeat(n);

describe('JSON depth, judged before parsing', () => {
  it(`allows ${MAX_JSON_DEPTH} levels and refuses one more`, () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(jsonNestsDeeperThan(nest(64))).toBe(false);
    expect(jsonNestsDeeperThan(nest(65))).toBe(true);
    expect(jsonNestsDeeperThan(`{"a":${nest(63)}}`)).toBe(false);
    expect(jsonNestsDeeperThan(`{"a":${nest(64)}}`)).toBe(true);
  });

  it('counts objects and arrays alike, and siblings do not add up', () => {
    expect(jsonNestsDeeperThan('{"a":'.repeat(65) + '1' + '}'.repeat(65))).toBe(true);
    expect(jsonNestsDeeperThan(`[${Array.from({ length: 1000 }, () => nest(60)).join(',')}]`)).toBe(false);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(jsonNestsDeeperThan(JSON.stringify({ s: '['.repeat(1000) }))).toBe(false);
    expect(jsonNestsDeeperThan(JSON.stringify({ s: '\\"' + '{'.repeat(1000) }))).toBe(false);
    expect(jsonNestsDeeperThan(JSON.stringify({ s: 'a\\' }) + nest(10))).toBe(false);
    // A string that ends in an escaped backslash ends there; what follows is structure again.
    expect(jsonNestsDeeperThan(`["a\\\\",${nest(64)}]`)).toBe(true);
  });

  it('scans a megabyte of nesting in linear time', () => {
    const text = nest(500_000);
    const started = performance.now();
    expect(jsonNestsDeeperThan(text)).toBe(true);
    expect(jsonNestsDeeperThan(JSON.stringify({ s: 'x'.repeat(1_000_000) }))).toBe(false);
    expect(performance.now() - started).toBeLessThan(200);
  });
});

describe('text that cannot be stored', () => {
  const fields = (value: unknown, prefix = '') => unstorableValues(value, prefix).map((d) => d.field);

  it('finds a NUL or a lone surrogate in any value, naming its path', () => {
    expect(fields({ name: 'a\u0000b' })).toEqual(['name']);
    expect(fields({ parameters: { note: 'x\ud800' } })).toEqual(['parameters.note']);
    expect(fields({ tags: ['ok', '\udc00'] })).toEqual(['tags.1']);
    expect(fields({ a: { b: [{ c: '\u0000' }] } })).toEqual(['a.b.0.c']);
    expect(fields('\u0000')).toEqual(['body']);
    expect(fields({ q: '\u0000' }, 'query')).toEqual(['query.q']);
    expect(fields({ agent_id: 'a\u0000' }, 'path')).toEqual(['path.agent_id']);
  });

  it('lets well-formed text through: pairs, other control characters, U+FFFF, combining marks', () => {
    expect(fields({ a: '\ud835\udd4f', b: '\u0001\u001f\t\n', c: '\uffff\ufffe', d: 'e\u0301', e: '\\u0000', f: '%00' })).toEqual([]);
    expect(fields({ n: 1, b: true, z: null, arr: [1, 2] })).toEqual([]);
  });

  it('tells a NUL from a surrogate', () => {
    expect(unstorableValues({ a: '\u0000' }, '')[0]).toMatchObject({ message: expect.stringMatching(/NUL/), code: 'invalid_characters' });
    expect(unstorableValues({ a: '\ud800' }, '')[0]).toMatchObject({ message: expect.stringMatching(/surrogate/) });
    expect(unstorableValues({ a: 'x\udbffy' }, '')[0]).toMatchObject({ message: expect.stringMatching(/surrogate/) });
  });

  it('checks keys too, and names a bad key with the character written out', () => {
    expect(fields({ parameters: { 'a\u0000b': 1 } })).toEqual(['parameters.a\\u0000b']);
    expect(fields({ '\ud800': 'x' })).toEqual(['\\ud800']);
    expect(fields({ ['k\u0000'.repeat(100)]: 1 })[0]!.length).toBeLessThan(120);
  });

  it('finds numbers too large for a double, which JSON.parse makes Infinity', () => {
    const parsed = JSON.parse('{"a":1e999,"b":[-1e999],"c":1e308,"d":-0,"e":123456789012345678901234567890}');
    expect(unstorableValues(parsed, '')).toEqual([
      { field: 'a', message: expect.stringMatching(/range/), code: 'out_of_range' },
      { field: 'b.0', message: expect.stringMatching(/range/), code: 'out_of_range' },
    ]);
  });

  it('lists at most 20 problems, however many there are', () => {
    expect(fields(Array.from({ length: 1000 }, () => '\u0000'))).toHaveLength(20);
  });
});
