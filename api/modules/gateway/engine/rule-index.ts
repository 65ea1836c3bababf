import { readPath } from './fields.js';
import type { CompiledCondition, CompiledRule } from './types.js';

/**
 * The published rules, arranged for evaluation (as OPA indexes rules by what they test; docs/policies.md,
 * "How rules are evaluated fast"):
 *
 * - Conditions written alike in several rules (the same field, operator and value, or the same CEL
 *   expression) are one entry, tested at most once per decision.
 * - Each rule with a condition that says which values a field must hold (`tool.key eq ...`,
 *   `tool.privilege_class in [...]`, `exists`, `gt`/`lt`..., `starts_with`, a CEL conjunct
 *   `tool.key == "..."`) is filed under it; a decision reads each filed field once and evaluates only the
 *   rules filed under what it holds, plus the rules filed nowhere (scanned). Where the filing is the
 *   condition itself, the condition is not tested again.
 *
 * Outcomes are reported in rule order, as the plain loop over every rule reports them;
 * test/unit/policy-index.test.ts holds the two to the same decisions and traces.
 */
export interface RuleSet {
  readonly rules: readonly CompiledRule[];
  /** What each rule reports, in one shape for all rules (rules and conditions come in many). */
  readonly views: RuleView[];
  /** The distinct conditions' tests, by slot. */
  readonly tests: Array<(doc: Record<string, unknown>) => boolean>;
  /** Per rule, the slots of its conditions as written (the explain trace lists them so). */
  readonly written: Int32Array[];
  /** Per rule, the slots still to test when it is a candidate, cheapest first (an exact key's condition left out). */
  readonly checks: Int32Array[];
  /** Filed fields: each read once per decision, and the rules filed under what it holds. */
  readonly keys: FieldIndex[];
  /** Rules filed under no value, ascending. */
  readonly scan: Int32Array;
  /** Per-decision memo of condition results: `seen[slot] === epoch` when `result[slot]` is this decision's. */
  readonly seen: Uint32Array;
  readonly result: Uint8Array;
  epoch: number;
}

export interface RuleView {
  id: string;
  policy: string | undefined;
  effect: CompiledRule['effect'];
  reason: string;
  approvals: number;
  conditions: ConditionView[];
}

export interface ConditionView {
  field: string | undefined;
  op: string;
  cel: boolean;
  value: unknown;
}

const view = (r: CompiledRule): RuleView => ({
  id: r.id,
  policy: r.policy,
  effect: r.effect,
  reason: r.reason_code,
  approvals: Math.max(1, r.obligations?.approvals_required ?? 1),
  conditions: r.compiled.map((c) => ({ field: c.field, op: c.op, cel: c.op === 'cel', value: c.value })),
});

/**
 * A condition's identity: two conditions with the same one give the same answer on every document.
 * JSON cannot tell NaN or Infinity from null, so a value holding one (never from a JSON policy) shares nothing.
 */
let unshared = 0;
const identity = (c: CompiledCondition) => {
  if (c.op === 'cel') return `cel\u0000${String(c.value)}`;
  let exact = true;
  const value = JSON.stringify(c.value, (_, v: unknown) => {
    if (typeof v === 'number' && !Number.isFinite(v)) exact = false;
    return v;
  });
  return exact ? `${c.op}\u0000${c.field}\u0000${typeof c.value}\u0000${value}` : `unshared\u0000${unshared++}`;
};

/**
 * The rule set of `rules`, built on first use and kept while the array lives: a snapshot's rules are
 * compiled once per published version and never changed in place, so the array is the key.
 */
const built = new WeakMap<readonly CompiledRule[], RuleSet>();

export function ruleSet(rules: readonly CompiledRule[]): RuleSet {
  let set = built.get(rules);
  if (!set) {
    set = buildRuleSet(rules);
    built.set(rules, set);
  }
  return set;
}

/** A way to find the rules a condition can hold for from the field's value alone. */
type Filing =
  | { kind: 'values'; values: unknown[] }
  | { kind: 'present' }
  | { kind: 'range'; op: RangeOp; bound: number }
  | { kind: 'prefix'; prefix: string };
type RangeOp = 'gt' | 'gte' | 'lt' | 'lte';

interface FilingOf {
  field: string;
  path: string[];
  filing: Filing;
  /** The filing holds exactly when the condition does (so the condition need not run again). */
  exact: boolean;
  condition: CompiledCondition;
  /** Roughly the share of requests whose value is filed under it: the lowest is chosen. */
  share: number;
}

/** The rules filed under one field, read once per decision. */
interface FieldIndex {
  path: string[];
  values: Map<unknown, Int32Array> | undefined;
  present: Int32Array | undefined;
  /** Per range operator: bounds ascending, with the rule of each. */
  ranges: Array<{ op: RangeOp; bounds: Float64Array; rules: Int32Array }>;
  /** Prefix lengths (ascending) and the rules by prefix. */
  prefixes: { lengths: number[]; rules: Map<string, Int32Array> } | undefined;
}

/**
 * The filings a condition allows: the keys compile found (`eq`, `in`, CEL conjuncts), and for the
 * operators whose test is one comparison with the value (exists, gt/gte/lt/lte, starts_with) the same
 * comparison done once for all the rules filed under the field.
 */
function filings(c: CompiledCondition, distinct: Map<string, Set<unknown>>): FilingOf[] {
  const out: FilingOf[] = (c.keys ?? []).map((k) =>
    k.values
      ? { field: k.field, path: k.path, filing: { kind: 'values', values: k.values }, exact: k.exact, condition: c, share: 1 / (1 + (distinct.get(k.field)?.size ?? 0)) }
      : { field: k.field, path: k.path, filing: { kind: 'present' }, exact: k.exact, condition: c, share: 0.5 },
  );
  if (typeof c.field !== 'string') return out;
  const base = { field: c.field, path: c.field.split('.'), exact: true, condition: c };
  if (c.op === 'exists' && c.value !== false) out.push({ ...base, filing: { kind: 'present' }, share: 0.5 });
  if ((c.op === 'gt' || c.op === 'gte' || c.op === 'lt' || c.op === 'lte') && typeof c.value === 'number' && !Number.isNaN(c.value)) {
    out.push({ ...base, filing: { kind: 'range', op: c.op, bound: c.value }, share: 0.5 });
  }
  if (c.op === 'starts_with' && typeof c.value === 'string') out.push({ ...base, filing: { kind: 'prefix', prefix: c.value }, share: 0.3 });
  return out;
}

export function buildRuleSet(rules: readonly CompiledRule[]): RuleSet {
  const slotOf = new Map<string, number>();
  const tests: RuleSet['tests'] = [];
  const slot = (c: CompiledCondition) => {
    const id = identity(c);
    let s = slotOf.get(id);
    if (s === undefined) {
      s = tests.length;
      slotOf.set(id, s);
      tests.push(c.test);
    }
    return s;
  };
  const written = rules.map((r) => Int32Array.from(r.compiled, slot));

  // The more values a field is filed under, the fewer rules share each one.
  const distinct = new Map<string, Set<unknown>>();
  for (const r of rules) {
    for (const c of r.compiled) {
      for (const k of c.keys ?? []) {
        let values = distinct.get(k.field);
        if (!values) distinct.set(k.field, (values = new Set()));
        for (const v of k.values ?? []) values.add(v);
      }
    }
  }

  // Each rule is filed once, under the filing that admits it least often (an exact one on a tie).
  const fields = new Map<string, { path: string[]; filed: Array<{ rule: number; filing: Filing }> }>();
  const scan: number[] = [];
  const checks = rules.map((r, i) => {
    let best: FilingOf | undefined;
    for (const c of r.compiled) {
      for (const f of filings(c, distinct)) {
        if (!best || f.share < best.share || (f.share === best.share && f.exact && !best.exact)) best = f;
      }
    }
    if (!best) {
      scan.push(i);
      return Int32Array.from(r.ordered, slot);
    }
    let field = fields.get(best.field);
    if (!field) fields.set(best.field, (field = { path: best.path, filed: [] }));
    field.filed.push({ rule: i, filing: best.filing });
    const skip = best.exact ? best.condition : undefined;
    return Int32Array.from(
      r.ordered.filter((c) => c !== skip),
      slot,
    );
  });
  return {
    rules,
    views: rules.map(view),
    tests,
    written,
    checks,
    keys: [...fields.values()].map((f) => fieldIndex(f.path, f.filed)),
    scan: Int32Array.from(scan),
    seen: new Uint32Array(tests.length),
    result: new Uint8Array(tests.length),
    epoch: 0,
  };
}

function fieldIndex(path: string[], filed: Array<{ rule: number; filing: Filing }>): FieldIndex {
  const values = new Map<unknown, number[]>();
  const present: number[] = [];
  const ranges = new Map<RangeOp, Array<{ bound: number; rule: number }>>();
  const prefixes = new Map<string, number[]>();
  const add = <K, V>(map: Map<K, V[]>, key: K, value: V) => {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  };
  for (const { rule, filing } of filed) {
    if (filing.kind === 'values') for (const v of filing.values) add(values, v, rule);
    else if (filing.kind === 'present') present.push(rule);
    else if (filing.kind === 'range') add(ranges, filing.op, { bound: filing.bound, rule });
    else add(prefixes, filing.prefix, rule);
  }
  return {
    path,
    values: values.size > 0 ? new Map([...values].map(([v, list]) => [v, Int32Array.from(list)])) : undefined,
    present: present.length > 0 ? Int32Array.from(present) : undefined,
    ranges: [...ranges].map(([op, list]) => {
      list.sort((a, b) => a.bound - b.bound);
      return { op, bounds: Float64Array.from(list, (x) => x.bound), rules: Int32Array.from(list, (x) => x.rule) };
    }),
    prefixes:
      prefixes.size > 0
        ? { lengths: [...new Set([...prefixes.keys()].map((p) => p.length))].sort((a, b) => a - b), rules: new Map([...prefixes].map(([p, list]) => [p, Int32Array.from(list)])) }
        : undefined,
  };
}

/** Starts a decision: results memoised for the previous one no longer count. */
export function nextDecision(set: RuleSet): void {
  set.epoch = (set.epoch + 1) >>> 0;
  if (set.epoch === 0) {
    set.seen.fill(0);
    set.epoch = 1;
  }
}

/** The condition in `slot` on `doc`, tested at most once per decision. */
export function holds(set: RuleSet, slot: number, doc: Record<string, unknown>): boolean {
  if (set.seen[slot] === set.epoch) return set.result[slot] === 1;
  const v = set.tests[slot]!(doc);
  set.seen[slot] = set.epoch;
  set.result[slot] = v ? 1 : 0;
  return v;
}

function allHold(set: RuleSet, slots: Int32Array, doc: Record<string, unknown>): boolean {
  for (let i = 0; i < slots.length; i++) if (!holds(set, slots[i]!, doc)) return false;
  return true;
}

function tryRule(set: RuleSet, r: number, doc: Record<string, unknown>, matched: number[]): void {
  if (allHold(set, set.checks[r]!, doc)) matched.push(r);
}

function tryRules(set: RuleSet, rules: Int32Array, from: number, to: number, doc: Record<string, unknown>, matched: number[]): void {
  for (let i = from; i < to; i++) tryRule(set, rules[i]!, doc, matched);
}

/** The indexes of the rules whose conditions all hold on `doc`, ascending. Call `nextDecision` first. */
export function matchingRules(set: RuleSet, doc: Record<string, unknown>): number[] {
  const matched: number[] = [];
  tryRules(set, set.scan, 0, set.scan.length, doc, matched);
  for (const index of set.keys) {
    const v = readPath(doc, index.path);
    if (index.values) {
      const filed = index.values.get(v);
      if (filed) tryRules(set, filed, 0, filed.length, doc, matched);
    }
    if (index.present && v !== undefined && v !== null) tryRules(set, index.present, 0, index.present.length, doc, matched);
    if (typeof v === 'number') {
      for (const { op, bounds, rules } of index.ranges) {
        // Bounds ascending: `gt`/`gte` hold for a leading run of them, `lt`/`lte` for a trailing one.
        let n = 0;
        if (op === 'gt') while (n < bounds.length && v > bounds[n]!) n++;
        else if (op === 'gte') while (n < bounds.length && v >= bounds[n]!) n++;
        else {
          n = bounds.length;
          if (op === 'lt') while (n > 0 && v < bounds[n - 1]!) n--;
          else while (n > 0 && v <= bounds[n - 1]!) n--;
        }
        if (op === 'gt' || op === 'gte') tryRules(set, rules, 0, n, doc, matched);
        else tryRules(set, rules, n, rules.length, doc, matched);
      }
    }
    if (typeof v === 'string' && index.prefixes) {
      for (const length of index.prefixes.lengths) {
        if (length > v.length) break;
        const filed = index.prefixes.rules.get(v.slice(0, length));
        if (filed) tryRules(set, filed, 0, filed.length, doc, matched);
      }
    }
  }
  // Rules are reached field by field, so the matches are put back in rule order: usually they are few,
  // and an insertion sort of a few numbers costs less than a call of the comparator per step.
  if (matched.length > 32) return matched.sort((a, b) => a - b);
  for (let i = 1; i < matched.length; i++) {
    const r = matched[i]!;
    let j = i - 1;
    for (; j >= 0 && matched[j]! > r; j--) matched[j + 1] = matched[j]!;
    matched[j + 1] = r;
  }
  return matched;
}
