/**
 * A necessary condition for an RE2 pattern, read from its text: the literal runs every match must
 * contain (`^s3://prod-[a-z]+/2026/` needs "s3://prod-" and "/2026/"; `(?i)ledger|payroll` needs
 * "ledger" or "payroll" in any case). A string lacking them cannot match, so the regular expression
 * runs only on the few that have them; when they are present RE2 still decides. The reader is
 * deliberately narrow: whatever it does not fully understand (an escape of a letter, `\Q`, a flag
 * group that changes case, braces that are not a repetition) gives no prefilter, never a wrong one.
 * test/unit/policy-index-regex.test.ts holds prefilter-then-RE2 to RE2 alone.
 */

/** One alternative's literal runs, all required; the pattern needs any one alternative's runs. */
export interface RequiredLiterals {
  /** Compare case-insensitively (the pattern starts with `(?i)`): runs are lower case, ASCII. */
  fold: boolean;
  alternatives: string[][];
}

const SPECIAL = new Set(['\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$']);
const REPEAT = /^\{(\d+)(,\d*)?\}/;
const WORD = /[A-Za-z0-9_]/;

/** The literal runs of `pattern`, or undefined when the pattern has an alternative needing none or is outside what is read. */
export function requiredLiterals(pattern: string): RequiredLiterals | undefined {
  let fold = false;
  let body = pattern;
  if (body.startsWith('(?i)')) {
    fold = true;
    body = body.slice(4);
  }
  const chars = [...body];
  const alternatives: string[][] = [];
  let runs: string[] = [];
  let run: string[] = [];
  const endRun = () => {
    if (run.length > 0) runs.push(run.join(''));
    run = [];
  };
  /** After an atom that is not a literal (class, group, dot, anchor): its repetition, if any, changes nothing required. */
  const skipRepeat = (i: number): number | undefined => {
    const c = chars[i];
    if (c === '*' || c === '+' || c === '?') return chars[i + 1] === '?' ? i + 2 : i + 1;
    if (c === '{') {
      const m = REPEAT.exec(chars.slice(i, i + 24).join(''));
      if (!m) return undefined;
      const next = i + [...m[0]].length;
      return chars[next] === '?' ? next + 1 : next;
    }
    return i;
  };

  let i = 0;
  while (i < chars.length) {
    const c = chars[i]!;
    if (c === '|') {
      endRun();
      alternatives.push(runs);
      runs = [];
      i++;
      continue;
    }
    let literal: string | undefined;
    let next = i + 1;
    if (c === '\\') {
      const e = chars[i + 1];
      // A letter or digit after a backslash is a class, an assertion, a code point or \Q: not read here.
      if (e === undefined || WORD.test(e) || e.length > 1 || e.charCodeAt(0) > 0x7e) return undefined;
      literal = e;
      next = i + 2;
    } else if (c === '[') {
      const end = classEnd(chars, i);
      if (end === undefined) return undefined;
      next = end + 1;
    } else if (c === '(') {
      const flagged = chars[i + 1] === '?' ? /^\(\?([A-Za-z-]*)([:)])/.exec(chars.slice(i, i + 12).join('')) : null;
      if (flagged?.[2] === ')') {
        // Flags for the rest, such as (?s): harmless unless they turn case folding on or off.
        if (flagged[1]!.includes('i')) return undefined;
        endRun();
        i += flagged[0].length;
        continue;
      }
      // Any other group, (?i:...) included, is one opaque atom.
      const end = groupEnd(chars, i);
      if (end === undefined) return undefined;
      next = end + 1;
    } else if (c === ')' || c === ']' || c === '}' || c === '{' || c === '*' || c === '+' || c === '?') {
      return undefined;
    } else if (!SPECIAL.has(c)) {
      literal = c;
    }

    if (literal === undefined || (fold && !/^[\x20-\x7e]$/.test(literal))) {
      // Not a literal (or, folding, one beyond printable ASCII, whose case variants are not worked out here): the run ends.
      endRun();
      const after = skipRepeat(next);
      if (after === undefined) return undefined;
      i = after;
      continue;
    }
    const q = chars[next];
    if (q === '*' || q === '?') {
      // Optional: the character is not required, and what follows is not adjacent to the run.
      endRun();
      i = skipRepeat(next)!;
      continue;
    }
    if (q === '{') {
      const m = REPEAT.exec(chars.slice(next, next + 24).join(''));
      if (!m) return undefined;
      if (Number(m[1]) > 0) run.push(fold ? literal.toLowerCase() : literal);
      endRun();
      i = skipRepeat(next)!;
      continue;
    }
    run.push(fold ? literal.toLowerCase() : literal);
    if (q === '+') {
      // Required at least once; the next literal may follow a repetition of it, so the run ends.
      endRun();
      i = skipRepeat(next)!;
      continue;
    }
    i = next;
  }
  endRun();
  alternatives.push(runs);
  if (alternatives.some((a) => a.length === 0)) return undefined;
  return { fold, alternatives };
}

/** The index of the `]` closing the class opened at `start` (RE2 syntax: a leading `]` is literal; `[:alpha:]` inside). */
function classEnd(chars: string[], start: number): number | undefined {
  let i = start + 1;
  if (chars[i] === '^') i++;
  if (chars[i] === ']') i++;
  while (i < chars.length) {
    const c = chars[i];
    if (c === '\\') {
      if (chars[i + 1] === 'Q') return undefined;
      i += 2;
      continue;
    }
    if (c === '[' && chars[i + 1] === ':') {
      const close = chars.indexOf(':', i + 2);
      if (close < 0 || chars[close + 1] !== ']') return undefined;
      i = close + 2;
      continue;
    }
    if (c === ']') return i;
    i++;
  }
  return undefined;
}

/** The index of the `)` closing the group opened at `start`, skipping escapes and classes. */
function groupEnd(chars: string[], start: number): number | undefined {
  let depth = 0;
  for (let i = start; i < chars.length; i++) {
    const c = chars[i];
    if (c === '\\') {
      if (chars[i + 1] === 'Q') return undefined;
      i++;
    } else if (c === '[') {
      const end = classEnd(chars, i);
      if (end === undefined) return undefined;
      i = end;
    } else if (c === '(') depth++;
    else if (c === ')' && --depth === 0) return i;
  }
  return undefined;
}

/**
 * The prefilter as a test: false means the pattern cannot match. Folding compares lower case; RE2's
 * case folding also pairs `s` with U+017F (long s), which lower-casing leaves alone, so it is mapped.
 */
export function prefilter(required: RequiredLiterals): (s: string) => boolean {
  const { fold, alternatives } = required;
  return (s) => {
    const text = fold ? lowerFolded(s) : s;
    outer: for (const runs of alternatives) {
      for (const run of runs) if (!text.includes(run)) continue outer;
      return true;
    }
    return false;
  };
}

function lowerFolded(s: string): string {
  const lower = s.toLowerCase();
  return lower.includes('\u017f') ? lower.replaceAll('\u017f', 's') : lower;
}
