import { describe, expect, it } from 'vitest';
import { compileRules, InvalidPolicy, type PolicyProblem } from '../../api/modules/gateway/engine/compile.js';
import type { Condition, Rule } from '../../api/modules/gateway/engine/types.js';

/**
 * The rule compiler refuses what a decision could not run, naming the rule, the condition and what is
 * wrong; what it accepts runs without parsing anything per decision.
 */
const rule = (conditions: Condition[], id = 'R1'): Rule => ({ id, effect: 'deny', reason_code: 'TEST_RULE', conditions });

function problemsOf(rules: Rule[]): PolicyProblem[] {
  try {
    compileRules(rules);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidPolicy);
    return (err as InvalidPolicy).problems;
  }
  throw new Error('compileRules accepted the rules');
}

/** The one problem of a rule whose second condition is `bad` (the first is fine). */
function refusal(bad: Condition): PolicyProblem {
  const problems = problemsOf([{ id: 'ok', effect: 'allow', reason_code: 'FINE', conditions: [] }, rule([{ field: 'tool.key', op: 'exists', value: true }, bad])]);
  expect(problems).toHaveLength(1);
  expect(problems[0]).toMatchObject({ rule: 'R1', rule_index: 1, condition_index: 1 });
  return problems[0]!;
}

describe('compileRules refuses', () => {
  it.each<[string, Condition, RegExp]>([
    ['an unknown field', { field: 'tool.colour', op: 'eq', value: 'red' }, /unknown field "tool\.colour"/],
    ['a field outside the document', { field: 'agent.secret', op: 'exists', value: true }, /unknown field "agent\.secret"/],
    ['an unknown operator', { field: 'tool.key', op: 'like', value: 'crm%' }, /unknown operator "like"/],
    ['gt with a string', { field: 'action.amount', op: 'gt', value: '100' }, /operator gt needs a number/],
    ['in with a non-list', { field: 'action.currency', op: 'in', value: 'EUR' }, /operator in needs a list/],
    ['in with an empty list', { field: 'action.currency', op: 'in', value: [] }, /operator in needs a list of 1-500/],
    ['eq of a string field with a number', { field: 'tool.key', op: 'eq', value: 42 }, /tool\.key is a string field; the value is a number/],
    ['not_in of a number field with strings', { field: 'time.hour', op: 'not_in', value: ['9'] }, /time\.hour is a number field; every value must be a number/],
    ['gt on a string field', { field: 'action.target', op: 'gt', value: 1 }, /operator gt does not apply to action\.target, a string field/],
    ['exists with a non-boolean', { field: 'action.justification', op: 'exists', value: 'yes' }, /operator exists needs true or false/],
    ['a regular expression that does not parse', { field: 'action.target', op: 'matches', value: '(a' }, /not valid RE2 syntax.*missing closing \)/],
    ['a backreference', { field: 'action.target', op: 'matches', value: '(a)\\1' }, /not valid RE2 syntax.*invalid escape sequence/],
    ['a lookahead', { field: 'action.target', op: 'matches', value: 'pay(?=ment)' }, /not valid RE2 syntax.*unsupported Perl syntax/],
    ['a lookbehind', { field: 'action.target', op: 'matches', value: '(?<!s3)://' }, /not valid RE2 syntax/],
    ['matches without a pattern', { field: 'action.target', op: 'matches', value: '' }, /operator matches needs a regular expression/],
  ])('%s', (_, bad, message) => {
    const problem = refusal(bad);
    expect(problem.field).toBe(bad.field);
    expect(problem.message).toMatch(message);
  });

  it.each<[string, Condition, RegExp]>([
    ['CEL that does not parse', { op: 'cel', value: 'action.amount >' }, /the CEL expression does not parse/],
    ['CEL with an unknown variable', { op: 'cel', value: 'request.amount > 100' }, /does not type-check: Unknown variable: request/],
    ['CEL giving a number', { op: 'cel', value: '1 + 2' }, /the CEL expression gives int, not bool/],
    ['CEL giving a string', { op: 'cel', value: '"yes"' }, /the CEL expression gives string, not bool/],
    ['CEL mixing types', { op: 'cel', value: 'environment + 1 == "x"' }, /does not type-check: no such overload/],
    ['CEL without an expression', { op: 'cel', value: '  ' }, /cel needs the expression as a string value/],
    ['CEL longer than 2000 characters', { op: 'cel', value: `environment == "${'x'.repeat(2000)}"` }, /longer than 2000 characters/],
    // A misspelt key would never match: a deny rule failing open. The document's keys are declared.
    ['CEL with a misspelt key', { op: 'cel', value: 'tool.kee == "crm.lookup_customer"' }, /does not type-check/],
    // The CEL library's matches() backtracks exponentially on agent-chosen input.
    ['CEL matches()', { op: 'cel', value: 'action.target.matches("(a+)+$")' }, /use the matches operator/],
    ['CEL matches() as a function', { op: 'cel', value: 'matches(action.target, "a")' }, /does not type-check|use the matches operator/],
    ['a CEL comprehension inside another', { op: 'cel', value: 'action.parameters.xs.all(x, action.parameters.ys.exists(y, y == x))' }, /inside another comprehension/],
  ])('%s', (_, bad, message) => {
    const problem = refusal(bad);
    expect(problem.field).toBeUndefined();
    expect(problem.message).toMatch(message);
  });

  it('a cel condition with a field', () => {
    const problem = refusal({ field: 'action.amount', op: 'cel', value: 'action.amount > 100' });
    expect(problem.field).toBe('action.amount');
    expect(problem.message).toMatch(/a cel condition takes no field/);
  });

  it('a rule id used twice, naming the second', () => {
    const problems = problemsOf([rule([], 'R1'), rule([], 'R2'), rule([], 'R1')]);
    expect(problems).toEqual([{ rule: 'R1', rule_index: 2, message: 'rule id R1 is used twice' }]);
  });

  it('every problem of every rule at once, in order', () => {
    const problems = problemsOf([
      rule([{ field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' }, { field: 'tool.colour', op: 'eq', value: 'red' }], 'A'),
      rule([{ field: 'action.target', op: 'matches', value: '(a' }, { op: 'cel', value: '1 + 2' }], 'B'),
      rule([{ field: 'action.amount', op: 'gte', value: 10 }], 'A'),
    ]);
    expect(problems.map((p) => [p.rule, p.rule_index, p.condition_index])).toEqual([
      ['A', 0, 1],
      ['B', 1, 0],
      ['B', 1, 1],
      ['A', 2, undefined],
    ]);
    expect(() => compileRules([rule([{ field: 'nope', op: 'eq', value: 1 }], 'X')])).toThrow(/^X: unknown field "nope"/);
  });
});

describe('compiled conditions', () => {
  const doc = (target: string) => ({ action: { target, parameters: {} } });

  it('run matches in linear time: a catastrophic-backtracking pattern just does not match', () => {
    const [compiled] = compileRules([rule([{ field: 'action.target', op: 'matches', value: '(a+)+$' }])]);
    const test = compiled!.compiled[0]!.test;
    expect(test(doc('a'.repeat(5000) + '!'))).toBe(false);
    expect(test(doc('a'.repeat(5000)))).toBe(true);
  });

  it('keep the rule as written, with the policy it came from', () => {
    const written = rule([{ field: 'action.target', op: 'starts_with', value: 's3://' }]);
    const [compiled] = compileRules([written], 'storage-guard');
    expect(compiled).toMatchObject({ ...written, policy: 'storage-guard' });
    expect(compiled!.compiled.map((c) => c.test(doc('s3://bucket/key')))).toEqual([true]);
  });

  it('read own properties only: inherited names are absent, whatever the request', () => {
    const [compiled] = compileRules([
      rule([
        { field: 'action.parameters.constructor', op: 'exists', value: true },
        { field: 'action.parameters.__proto__', op: 'exists', value: true },
        { field: 'action.parameters.toString', op: 'exists', value: false },
      ]),
    ]);
    const results = compiled!.compiled.map((c) => c.test(doc('x')));
    expect(results).toEqual([false, false, true]);
  });

  it('accept one comprehension over request data', () => {
    const [compiled] = compileRules([rule([{ op: 'cel', value: 'action.parameters.recipients.all(r, r.endsWith("@example.com"))' }])]);
    const test = compiled!.compiled[0]!.test;
    const withRecipients = (recipients: string[]) => ({ ...doc('x'), action: { target: 'x', parameters: { recipients } } });
    expect(test(withRecipients(['a@example.com', 'b@example.com']))).toBe(true);
    expect(test(withRecipients(['a@example.com', 'b@elsewhere.org']))).toBe(false);
  });

  it('accept every field of the document and any parameter', () => {
    expect(() =>
      compileRules([
        rule([
          { field: 'tool.mcp_trust_state', op: 'eq', value: null },
          { field: 'action.parameters.customer_id', op: 'eq', value: 42 },
          { field: 'action.parameters.nested.key', op: 'exists', value: false },
          { field: 'environment', op: 'in', value: ['production', 'staging'] },
          { op: 'cel', value: 'has(action.parameters.x) || time.weekday in [0, 6]' },
        ]),
      ]),
    ).not.toThrow();
  });
});
