import { Environment } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { FALLBACK, scalarLiteral, selection, translateCel } from './cel-fast.js';
import { DOCUMENT_LAYOUT, fieldType, readPath, type FieldType } from './fields.js';
import { OPERATORS } from './operators.js';
import { prefilter, requiredLiterals } from './regex-prefilter.js';
import type { CompiledCondition, CompiledRule, Condition, ConditionKey, Rule } from './types.js';

export type OperandType = 'scalar' | 'number' | 'string' | 'list' | 'boolean' | 'regex' | 'cel';

/** The operators with their operand types (GET /policies/operators). */
export const OPERATOR_SPECS: Record<string, { operand: OperandType; description: string; fieldTypes: FieldType[] }> = {
  eq: { operand: 'scalar', description: 'The field equals the value (string, number, boolean or null)', fieldTypes: ['string', 'number', 'boolean', 'any'] },
  neq: { operand: 'scalar', description: 'The field differs from the value', fieldTypes: ['string', 'number', 'boolean', 'any'] },
  in: { operand: 'list', description: 'The field is one of the values (a list of 1-500 scalars)', fieldTypes: ['string', 'number', 'boolean', 'any'] },
  not_in: { operand: 'list', description: 'The field is none of the values', fieldTypes: ['string', 'number', 'boolean', 'any'] },
  gt: { operand: 'number', description: 'The field is a number greater than the value', fieldTypes: ['number', 'any'] },
  gte: { operand: 'number', description: 'The field is a number greater than or equal to the value', fieldTypes: ['number', 'any'] },
  lt: { operand: 'number', description: 'The field is a number less than the value', fieldTypes: ['number', 'any'] },
  lte: { operand: 'number', description: 'The field is a number less than or equal to the value', fieldTypes: ['number', 'any'] },
  contains: { operand: 'scalar', description: 'The field (a string or a list) contains the value', fieldTypes: ['string', 'any'] },
  starts_with: { operand: 'string', description: 'The field is a string beginning with the value', fieldTypes: ['string', 'any'] },
  matches: {
    operand: 'regex',
    description: 'The field is a string matching the regular expression (RE2 syntax, linear time: no backreferences or lookaround; unanchored unless ^ and $ are used)',
    fieldTypes: ['string', 'any'],
  },
  exists: { operand: 'boolean', description: 'The field is present and not null (value true, the default) or absent or null (false)', fieldTypes: ['string', 'number', 'boolean', 'any'] },
  cel: {
    operand: 'cel',
    description:
      'A CEL expression over the whole decision input (variables tool, action, agent, principal, environment, time); true matches. No field. An expression that fails at run time (a missing key) does not match.',
    fieldTypes: [],
  },
};

export interface PolicyProblem {
  rule: string;
  rule_index: number;
  condition_index?: number;
  field?: string;
  message: string;
}

/** Rules that cannot be compiled, each problem naming its rule and condition. */
export class InvalidPolicy extends Error {
  constructor(readonly problems: PolicyProblem[]) {
    super(problems.map((p) => `${p.rule}: ${p.message}`).join('; '));
  }
}

const MAX_CEL_LENGTH = 2000;
/** Relative cost of an operator, to test cheap conditions first. */
const COST: Record<string, number> = Object.fromEntries(Object.keys(OPERATOR_SPECS).map((op) => [op, op === 'cel' ? 2 : op === 'matches' ? 1 : 0]));
const MAX_REGEX_LENGTH = 1000;

const CEL_LIMITS = { maxAstNodes: 1000, maxDepth: 32, maxListElements: 100, maxMapEntries: 100, maxCallArguments: 16 };

/**
 * One CEL environment: the decision document with its keys declared, so a misspelt key is refused when
 * the policy is written instead of never matching; bounded in size and depth. Values that may be null
 * are `dyn`; `action.parameters` is the request's own map.
 */
const celCheckEnv = DOCUMENT_LAYOUT.reduce(
  (env, part) =>
    part.fields
      ? env.registerVariable({ name: part.name, schema: Object.fromEntries(part.fields.map((f) => [f.name, f.spec.cel])) })
      : env.registerVariable(part.name, part.spec.cel),
  new Environment({ limits: CEL_LIMITS }),
);

/** The environment programs run in: the same variables as plain maps, so no value is converted per call. */
const celRunEnv = DOCUMENT_LAYOUT.reduce(
  (env, part) => env.registerVariable(part.name, part.fields ? 'map' : part.spec.cel),
  new Environment({ limits: CEL_LIMITS }),
);

const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

interface CelNode {
  op: string;
  args: unknown;
}
const isNode = (x: unknown): x is CelNode => typeof x === 'object' && x !== null && 'op' in x && 'args' in x;

/**
 * What the CEL library would run unsafely, refused when the policy is written: its `matches` uses the
 * JavaScript regular expression engine (exponential backtracking on agent-chosen input; the `matches`
 * operator runs RE2 instead), and a comprehension inside another is quadratic in request-sized lists.
 */
function unsafeCel(node: unknown, depth = 0): string | undefined {
  if (Array.isArray(node)) {
    for (const x of node) {
      const found = unsafeCel(x, depth);
      if (found) return found;
    }
    return undefined;
  }
  if (!isNode(node)) return undefined;
  let inner = depth;
  if ((node.op === 'call' || node.op === 'rcall') && Array.isArray(node.args)) {
    const name = node.args[0];
    if (name === 'matches') return 'matches() is not available in CEL here: use the matches operator (RE2, linear time)';
    if (typeof name === 'string' && COMPREHENSIONS.has(name)) {
      if (depth >= 1) return `${name}() inside another comprehension is not allowed (its cost grows with the square of the input)`;
      inner = depth + 1;
    }
  }
  return unsafeCel(node.args, inner);
}

/**
 * The test of a checked CEL expression: the common subset runs as translated closures, the rest (and
 * any run-time case the translation leaves open) through the CEL library.
 */
export function celTest(expression: string): (doc: Record<string, unknown>) => boolean {
  const program = celRunEnv.parse(expression);
  const fast = translateCel(program.ast);
  if (!fast) return (doc) => runCel(program, doc);
  return (doc) => {
    const v = fast(doc);
    return v === FALLBACK ? runCel(program, doc) : v === true;
  };
}

/** The CEL library's own answer (the differential test compares the translation with it). */
export function celInterpreted(expression: string): (doc: Record<string, unknown>) => boolean {
  const program = celRunEnv.parse(expression);
  return (doc) => runCel(program, doc);
}

/** Runs a compiled CEL program; an error (a missing key) is no match. Errors skip their stack trace. */
function runCel(program: (ctx: Record<string, unknown>) => unknown, doc: Record<string, unknown>): boolean {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return program(doc) === true;
  } catch {
    return false;
  } finally {
    Error.stackTraceLimit = limit;
  }
}

const isScalar = (v: unknown) => v === null || ['string', 'number', 'boolean'].includes(typeof v);
const typeOf = (v: unknown): FieldType | 'null' | 'other' =>
  v === null ? 'null' : typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? (typeof v as FieldType) : 'other';

/** Compiles one condition, or says what is wrong with it. */
function compileCondition(c: Condition): CompiledCondition | string {
  const spec = OPERATOR_SPECS[c.op];
  if (!spec) return `unknown operator "${c.op}" (GET /policies/operators lists them)`;

  if (c.op === 'cel') {
    if (c.field !== undefined && c.field !== '') return 'a cel condition takes no field: the expression reads the whole input';
    if (typeof c.value !== 'string' || c.value.trim() === '') return 'cel needs the expression as a string value';
    if (c.value.length > MAX_CEL_LENGTH) return `the CEL expression is longer than ${MAX_CEL_LENGTH} characters`;
    let program: ReturnType<typeof celCheckEnv.parse>;
    try {
      program = celCheckEnv.parse(c.value);
    } catch (err) {
      return `the CEL expression does not parse: ${firstLine(err)}`;
    }
    const checked = program.check();
    if (!checked.valid) return `the CEL expression does not type-check: ${firstLine(checked.error)}`;
    if (checked.type !== 'bool' && checked.type !== 'dyn') return `the CEL expression gives ${checked.type}, not bool`;
    const unsafe = unsafeCel(program.ast);
    if (unsafe) return unsafe;
    const keys = celKeys(program.ast);
    return { ...c, test: celTest(c.value), ...(keys.length > 0 ? { keys } : {}) };
  }

  if (typeof c.field !== 'string') return 'the condition needs a field';
  const ft = fieldType(c.field);
  if (!ft) return `unknown field "${c.field}" (GET /policies/operators lists the fields)`;
  if (!spec.fieldTypes.includes(ft)) return `operator ${c.op} does not apply to ${c.field}, a ${ft} field`;
  const wrong = (what: string) => `operator ${c.op} needs ${what} as its value`;
  const fits = (v: unknown) => ft === 'any' || v === null || typeOf(v) === ft;

  switch (spec.operand) {
    case 'scalar':
      if (!isScalar(c.value)) return wrong('a string, number, boolean or null');
      if (!fits(c.value)) return `${c.field} is a ${ft} field; the value is a ${typeOf(c.value)}`;
      break;
    case 'list':
      if (!Array.isArray(c.value) || c.value.length === 0 || c.value.length > 500 || !c.value.every(isScalar)) {
        return wrong('a list of 1-500 strings, numbers or booleans');
      }
      if (!c.value.every(fits)) return `${c.field} is a ${ft} field; every value must be a ${ft}`;
      break;
    case 'number':
      if (typeof c.value !== 'number' || !Number.isFinite(c.value)) return wrong('a number');
      break;
    case 'string':
      if (typeof c.value !== 'string') return wrong('a string');
      break;
    case 'boolean':
      if (c.value !== undefined && typeof c.value !== 'boolean') return wrong('true or false');
      break;
    case 'regex': {
      if (typeof c.value !== 'string' || c.value.length === 0) return wrong('a regular expression string');
      if (c.value.length > MAX_REGEX_LENGTH) return `the regular expression is longer than ${MAX_REGEX_LENGTH} characters`;
      let re: RE2JS;
      try {
        re = RE2JS.compile(c.value);
      } catch (err) {
        return `the regular expression is not valid RE2 syntax: ${firstLine(err)}`;
      }
      const path = c.field.split('.');
      const required = requiredLiterals(c.value);
      if (!required) return { ...c, test: (doc) => matchesRegex(re, readPath(doc, path)) };
      // Most strings lack the pattern's literals: those are answered without running the expression.
      const possible = prefilter(required);
      return {
        ...c,
        test: (doc) => {
          const actual = readPath(doc, path);
          return typeof actual === 'string' && possible(actual) && re.test(actual);
        },
      };
    }
  }
  const op = OPERATORS[c.op]!;
  const path = c.field.split('.');
  const value = c.value;
  const keys = fieldKeys(c.op, c.field, path, value);
  return { ...c, test: (doc) => op(readPath(doc, path), value), ...(keys ? { keys } : {}) };
}

/**
 * `eq` and `in` hold exactly when the field is one of their values (=== and Array.includes, which a Map
 * lookup reproduces for every value but NaN), so the rule index can stand in for them.
 */
function fieldKeys(op: string, field: string, path: string[], value: unknown): ConditionKey[] | undefined {
  const values = op === 'eq' ? [value] : op === 'in' && Array.isArray(value) ? [...new Set(value)] : undefined;
  if (!values || values.some((v) => typeof v === 'number' && Number.isNaN(v))) return undefined;
  return [{ field, path, values, exact: true }];
}

/** A literal as the document would hold it (an int as a number: CEL compares an int with a double by value); never NaN, which no Map key stands for. */
const keyLiteral = (n: unknown) => {
  const literal = scalarLiteral(n);
  return literal && !Number.isNaN(literal[0]) ? literal : undefined;
};

/**
 * What a CEL expression needs of the document, read from its top-level conjuncts (a CEL `&&` is true only
 * when every conjunct is true): `a.b == 1`, `"x" == a.b` or `a.b in ["x", "y"]` are true only when the
 * value at that path is one of those literals (a missing key is an error, another type is false or an
 * error, never true); `a.b > 1`, `size(a.b) < 3` or `a.b.startsWith("x")` only when the path holds a
 * value (absent and null are errors). These are necessary conditions, so `exact` is false and the
 * expression still runs for the requests that meet them.
 */
function celKeys(ast: unknown): ConditionKey[] {
  if (!isNode(ast) || !Array.isArray(ast.args)) return [];
  if (ast.op === '&&') return ast.args.flatMap(celKeys);
  const key = (path: string[] | undefined, values?: unknown[]): ConditionKey[] =>
    path ? [{ field: path.join('.'), path, ...(values ? { values: [...new Set(values)] } : {}), exact: false }] : [];
  if (ast.op === 'rcall') {
    const [name, receiver] = ast.args as [unknown, unknown];
    return name === 'startsWith' || name === 'endsWith' || name === 'contains' ? key(selection(receiver)) : [];
  }
  if (ast.args.length !== 2) return [];
  const [left, right] = ast.args as [unknown, unknown];
  if (ast.op === '==') {
    const l = keyLiteral(right);
    if (l) return key(selection(left), l);
    const r = keyLiteral(left);
    return r ? key(selection(right), r) : [];
  }
  if (ast.op === 'in') {
    if (!isNode(right) || right.op !== 'list' || !Array.isArray(right.args)) return [];
    const items = right.args.map(keyLiteral);
    return items.every((x) => x !== undefined) ? key(selection(left), items.flat()) : [];
  }
  if (ast.op === '<' || ast.op === '<=' || ast.op === '>' || ast.op === '>=') {
    const measured = (n: unknown) =>
      selection(n) ?? (isNode(n) && n.op === 'call' && Array.isArray(n.args) && n.args[0] === 'size' && Array.isArray(n.args[1]) && n.args[1].length === 1 ? selection(n.args[1][0]) : undefined);
    if (keyLiteral(right)) return key(measured(left));
    if (keyLiteral(left)) return key(measured(right));
  }
  return [];
}

function matchesRegex(re: RE2JS, actual: unknown): boolean {
  return typeof actual === 'string' && re.test(actual);
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err ?? 'unknown error');
  return text.split('\n')[0]!.slice(0, 300);
}

/**
 * Compiles rules once (per published version, per draft simulated): regular expressions to a
 * linear-time engine, CEL parsed and type-checked. Throws InvalidPolicy naming every bad rule and
 * condition; a decision never parses anything.
 */
export function compileRules(rules: Rule[], policy?: string): CompiledRule[] {
  const problems: PolicyProblem[] = [];
  const ids = new Set<string>();
  const compiled = rules.map((rule, ruleIndex) => {
    const name = rule.id || `#${ruleIndex}`;
    if (ids.has(rule.id)) problems.push({ rule: name, rule_index: ruleIndex, message: `rule id ${rule.id} is used twice` });
    if (rule.obligations && rule.effect !== 'require_approval') {
      problems.push({ rule: name, rule_index: ruleIndex, message: 'obligations apply to require_approval rules only' });
    }
    ids.add(rule.id);
    const conditions = rule.conditions.map((c, conditionIndex) => {
      const result = compileCondition(c);
      if (typeof result === 'string') {
        problems.push({ rule: name, rule_index: ruleIndex, condition_index: conditionIndex, ...(c.field ? { field: c.field } : {}), message: result });
        return undefined;
      }
      return result;
    });
    const compiled = conditions.filter((c): c is CompiledCondition => c !== undefined);
    return { ...rule, ...(policy ? { policy } : {}), compiled, ordered: [...compiled].sort((a, b) => COST[a.op]! - COST[b.op]!) };
  });
  if (problems.length > 0) throw new InvalidPolicy(problems);
  return compiled;
}
