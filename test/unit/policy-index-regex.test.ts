import { describe, expect, it } from 'vitest';
import { RE2JS } from 're2js';
import { compileRules } from '../../api/modules/gateway/engine/compile.js';
import { prefilter, requiredLiterals } from '../../api/modules/gateway/engine/regex-prefilter.js';
import { seeded } from '../support/seeded.js';

/**
 * The `matches` prefilter is sound: a string it turns away never matches the pattern. Seeded random
 * patterns (literals, classes, groups, alternation, repetition, escapes, case folding) and strings
 * (including case variants RE2 folds: K/k/U+212A, S/s/U+017F) are tested against RE2 alone.
 */
type Random = ReturnType<typeof seeded>;

const LITERALS = ['a', 'b', 'k', 's', 'K', 'S', 'x', '1', '-', '/', ':', ' ', '\\.', '\\-', '\\(', '\\*', 'é', 'ſ', '\u212a', '😀'];
const ATOMS = ['.', '[a-c]', '[^a]', '[[:digit:]]', '\\d', '\\w', '\\b', '^', '$', '[]a]', '[\\]k]', '\\x41', '\\pL', '\\Qa.b\\E'];
const QUANTIFIERS = ['', '', '', '*', '+', '?', '{2}', '{0,1}', '{1,}', '*?', '+?', '??', '{2,3}?'];

function pattern(r: Random, depth = 0): string {
  const parts: string[] = [];
  for (let i = 0, n = 1 + r.int(5); i < n; i++) {
    const kind = r.int(10);
    let atom: string;
    if (kind < 6) atom = r.pick(LITERALS);
    else if (kind < 8 || depth >= 2) atom = r.pick(ATOMS);
    else atom = `(${r.pick(['', '?:', '?P<g>', '?i:', '?s:'])}${pattern(r, depth + 1)})`;
    const q = r.pick(QUANTIFIERS);
    parts.push(q && (atom === '^' || atom === '$' || atom === '\\b') ? atom : atom + q);
  }
  let p = parts.join('');
  if (r.chance(0.3)) p += `|${pattern(r, depth + 1)}`;
  if (depth === 0 && r.chance(0.3)) p = `(?i)${p}`;
  if (depth === 0 && r.chance(0.05)) p = `${p}(?s)x`;
  return p;
}

const ALPHABET = ['a', 'b', 'c', 'k', 'K', '\u212a', 's', 'S', '\u017f', 'x', 'X', '1', '2', '-', '/', ':', ' ', '.', '(', '*', 'é', 'É', 'A', ']', '😀', '\n'];
function text(r: Random): string {
  let s = '';
  for (let i = 0, n = r.int(12); i < n; i++) s += r.pick(ALPHABET);
  return s;
}

/** Of `n` random patterns, those RE2 compiles, with their compiled form. */
function* validPatterns(r: Random, n: number): Generator<[string, RE2JS]> {
  for (let i = 0; i < n; i++) {
    const p = pattern(r);
    let re: RE2JS;
    try {
      re = RE2JS.compile(p);
    } catch {
      continue;
    }
    yield [p, re];
  }
}

describe('regular expression prefilter', () => {
  it('reads the literals a pattern needs', () => {
    expect(requiredLiterals('^s3://prod-[a-z]+/2026/')).toEqual({ fold: false, alternatives: [['s3://prod-', '/2026/']] });
    expect(requiredLiterals('(?i)ledger|Payroll')).toEqual({ fold: true, alternatives: [['ledger'], ['payroll']] });
    expect(requiredLiterals('ab*c')).toEqual({ fold: false, alternatives: [['a', 'c']] });
    expect(requiredLiterals('ab+c\\.d{2}e?')).toEqual({ fold: false, alternatives: [['ab', 'c.d']] });
    // An alternative needing nothing, or syntax not read here, gives no prefilter.
    expect(requiredLiterals('abc|.*')).toBeUndefined();
    expect(requiredLiterals('\\d+abc\\w')).toBeUndefined();
    expect(requiredLiterals('(?i:abc)d')).toEqual({ fold: false, alternatives: [['d']] });
    expect(requiredLiterals('a(?i)bc')).toBeUndefined();
  });

  it('never turns away a string RE2 matches (random patterns and strings)', () => {
    const r = seeded(5);
    let compiled = 0;
    let filtered = 0;
    let rejected = 0;
    for (const [p, re] of validPatterns(r, 3000)) {
      compiled++;
      const required = requiredLiterals(p);
      if (!required) continue;
      filtered++;
      const possible = prefilter(required);
      for (let j = 0; j < 30; j++) {
        const s = r.chance(0.5) ? text(r) : `${text(r)}${required.alternatives[0]!.join(text(r))}${text(r)}`;
        const matches = re.test(s);
        if (matches && !possible(s)) expect({ pattern: p, string: s, required }).toEqual('a prefilter that admits every match');
        if (!possible(s)) rejected++;
      }
    }
    // The test is only worth something if many patterns get a prefilter and it turns strings away.
    expect(compiled).toBeGreaterThan(1500);
    expect(filtered).toBeGreaterThan(500);
    expect(rejected).toBeGreaterThan(3000);
  });

  it('leaves the matches operator answering as RE2 does', () => {
    const r = seeded(11);
    for (const [p, re] of validPatterns(r, 500)) {
      const [rule] = compileRules([{ id: 'r', effect: 'deny', reason_code: 'X', conditions: [{ field: 'action.target', op: 'matches', value: p }] }]);
      const test = rule!.compiled[0]!.test;
      for (let j = 0; j < 10; j++) {
        const target = text(r);
        expect({ p, target, matched: test({ action: { target } }) }).toEqual({ p, target, matched: re.test(target) });
      }
    }
  });
});
