import { Environment } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { FALLBACK, translateCel } from './cel-fast.js';
import { readPath } from './fields.js';
import { OPERATORS } from './operators.js';
import type { Condition, Rule } from './types.js';

/** The type of a condition field, as operand checks see it. */
export type FieldType = 'string' | 'number' | 'boolean' | 'any';

/**
 * Every field a condition may name (docs/policies.md), with its type. `action.parameters.<name>` names
 * any parameter of the request (type `any`).
 */
export const FIELDS: Record<string, { type: FieldType; description: string }> = {
  'tool.key': { type: 'string', description: 'The tool key of the request' },
  'tool.privilege_class': { type: 'string', description: 'read, write, destructive, financial or admin' },
  'tool.approval_class': { type: 'string', description: 'none, single or dual' },
  'tool.target_type': { type: 'string', description: 'mcp_tool (the tool is on an MCP server) or tool' },
  'tool.mcp_trust_state': { type: 'string', description: "The MCP server's trust state; null for other tools" },
  'action.operation': { type: 'string', description: 'The operation (default invoke)' },
  'action.target': { type: 'string', description: 'The target URI' },
  'action.amount': { type: 'number', description: 'parameters.amount when it is a number, else null' },
  'action.currency': { type: 'string', description: 'parameters.currency when it is a string, else null' },
  'action.parameters': { type: 'any', description: 'The parameters object; action.parameters.<name> reads one' },
  'action.justification': { type: 'string', description: "The agent's justification, or null" },
  'agent.id': { type: 'string', description: "The agent's id" },
  'agent.environment': { type: 'string', description: "The agent's environment" },
  'agent.criticality': { type: 'string', description: "The agent's criticality" },
  'agent.data_classification': { type: 'string', description: "The agent's data classification" },
  'principal.on_behalf_of': { type: 'string', description: 'The principal the agent acts for, or null' },
  environment: { type: 'string', description: "The action's environment, else the agent's" },
  'time.hour': { type: 'number', description: 'Hour of the decision, 0-23, UTC' },
  'time.weekday': { type: 'number', description: 'Day of the week of the decision, 0 (Sunday) to 6, UTC' },
};

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

/** A condition ready to run: `test` reads the decision document. */
export interface CompiledCondition extends Condition {
  test: (doc: Record<string, unknown>) => boolean;
}

/** A rule whose conditions are compiled; `policy` names the policy it came from. */
export interface CompiledRule extends Rule {
  policy?: string;
  /** The conditions as written (the explain trace lists them so). */
  compiled: CompiledCondition[];
  /** The same, cheapest first: comparisons, then regular expressions, then CEL. All must hold, so order changes no result. */
  ordered: CompiledCondition[];
}

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

/**
 * One CEL environment: the decision document with its keys declared, so a misspelt key is refused when
 * the policy is written instead of never matching; bounded in size and depth. Values that may be null
 * are `dyn`; `action.parameters` is the request's own map.
 */
const celCheckEnv = new Environment({ limits: { maxAstNodes: 1000, maxDepth: 32, maxListElements: 100, maxMapEntries: 100, maxCallArguments: 16 } })
  .registerVariable({
    name: 'tool',
    schema: { key: 'string', privilege_class: 'dyn', approval_class: 'dyn', target_type: 'string', mcp_trust_state: 'dyn' },
  })
  .registerVariable({
    name: 'action',
    schema: { operation: 'string', target: 'string', amount: 'dyn', currency: 'dyn', parameters: 'map', justification: 'dyn' },
  })
  .registerVariable({ name: 'agent', schema: { id: 'string', environment: 'string', criticality: 'string', data_classification: 'dyn' } })
  .registerVariable({ name: 'principal', schema: { on_behalf_of: 'dyn' } })
  .registerVariable('environment', 'string')
  .registerVariable({ name: 'time', schema: { hour: 'dyn', weekday: 'dyn' } });

/** The environment programs run in: the same variables as plain maps, so no value is converted per call. */
const celRunEnv = new Environment({ limits: { maxAstNodes: 1000, maxDepth: 32, maxListElements: 100, maxMapEntries: 100, maxCallArguments: 16 } })
  .registerVariable('tool', 'map')
  .registerVariable('action', 'map')
  .registerVariable('agent', 'map')
  .registerVariable('principal', 'map')
  .registerVariable('environment', 'string')
  .registerVariable('time', 'map');

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

function fieldType(field: string): FieldType | undefined {
  if (FIELDS[field]) return FIELDS[field].type;
  if (/^action\.parameters\.[A-Za-z0-9_.-]{1,200}$/.test(field)) return 'any';
  return undefined;
}

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
    return { ...c, test: celTest(c.value) };
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
      return { ...c, test: (doc) => matchesRegex(re, readPath(doc, path)) };
    }
  }
  const op = OPERATORS[c.op]!;
  const path = c.field.split('.');
  const value = c.value;
  return { ...c, test: (doc) => op(readPath(doc, path), value) };
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
