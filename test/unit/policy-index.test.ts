import { describe, expect, it } from 'vitest';
import { RE2JS } from 're2js';
import { compileRules, InvalidPolicy } from '../../api/modules/gateway/engine/compile.js';
import type { DecisionContext } from '../../api/modules/gateway/engine/context.js';
import { decide, STEPS } from '../../api/modules/gateway/engine/decide.js';
import { decisionDocument, readField } from '../../api/modules/gateway/engine/fields.js';
import { buildRuleSet } from '../../api/modules/gateway/engine/rule-index.js';
import { deny } from '../../api/modules/gateway/engine/context.js';
import { publishedRules } from '../../api/modules/gateway/engine/steps/policies.js';
import type { CompiledCondition, CompiledRule, Condition, Decision, DecisionInput, Effect, Rule, Snapshot, ToolView } from '../../api/modules/gateway/engine/types.js';
import { seeded } from '../support/seeded.js';

/**
 * The rule index is sound: on seeded random rule sets and requests, `decide` (rules filed by what they
 * test, shared conditions tested once, regular expressions prefiltered) returns exactly what the plain
 * evaluation returns, testing every condition of every rule with RE2 alone: the same decision, reason
 * codes, approvals, and trace (matched rules, and with `explain` every condition's result), compared as
 * serialised JSON so even key order holds. The reference below is the engine's evaluation before the
 * index, kept here as the specification.
 */

type Random = ReturnType<typeof seeded>;

const TOOL_KEYS = ['crm.lookup_customer', 'email.send_message', 'payments.create_payment', 'storage.delete_object', 'mcp.search', 'mcp.wire'];
const STRINGS = ['', 'a', 'EUR', 'USD', 'read', 'financial', 'destructive', 'write', 'production', 'staging', 'high', 'tool', 'mcp_tool', 'approved', 'unknown', 'invoke', 'crm://customers/vip/1', 'crm://', 's3://prod-ledger/2026/', 'mailto:', 'user:ada@example.com', 'confidential', 'Ledger', 'x', ...TOOL_KEYS];
const NUMBERS = [-1, 0, 1, 2.5, 5, 9, 10, 12, 100, 1000, 5000];
const SCALARS: unknown[] = [...STRINGS, ...NUMBERS, true, false, null];
const PARAMS = ['amount', 'currency', 'labels', 'x', 'customer_id', 'payee', 'nested', 'n'];
const FIELDS = [
  'tool.key',
  'tool.privilege_class',
  'tool.approval_class',
  'tool.target_type',
  'tool.mcp_trust_state',
  'action.operation',
  'action.target',
  'action.amount',
  'action.currency',
  'action.justification',
  'agent.id',
  'agent.environment',
  'agent.criticality',
  'agent.data_classification',
  'principal.on_behalf_of',
  'environment',
  'time.hour',
  'time.weekday',
  ...PARAMS.map((p) => `action.parameters.${p}`),
];
const OPS = ['eq', 'neq', 'in', 'not_in', 'gt', 'gte', 'lt', 'lte', 'contains', 'starts_with', 'matches', 'exists', 'cel'];
const PATTERNS = ['^crm://', '(?i)ledger|payroll', '^s3://prod-[a-z]+/2026/', 'a+b?c*', '\\d+', '[a-c]{2}', '(?i)S', '(?i)k', 'prod-(eu|us)', '^$', '.', 'vip/1$', 'mailto:.*@example\\.com', '(?:USD|EUR)', 'x{2,}', 'ſ', '\\.', '(?s)a.b', '^(read|write)$'];
const CEL_PATHS = ['tool.key', 'tool.privilege_class', 'tool.mcp_trust_state', 'action.target', 'action.currency', 'action.amount', 'principal.on_behalf_of', 'environment', 'agent.environment', 'time.hour', ...PARAMS.map((p) => `action.parameters.${p}`)];

const quote = (s: string) => JSON.stringify(s);

/** A CEL expression: some shaped like the conjuncts the index files (`a.b == "s"`, `a.b in [...]`), some not. */
function celExpression(r: Random, depth = 0): string {
  const path = r.pick(CEL_PATHS);
  const s = r.pick(STRINGS);
  const atoms = [
    () => `${path} == ${quote(s)}`,
    () => `${quote(s)} == ${path}`,
    () => `${path} in [${quote(s)}, ${quote(r.pick(STRINGS))}]`,
    () => `${path} in []`,
    () => `${path} != ${quote(s)}`,
    () => `${path} == ${r.pick(NUMBERS)}`,
    () => `${path} > ${r.pick(NUMBERS)}`,
    () => `${path} == null`,
    () => `has(action.parameters.${r.pick(PARAMS)})`,
    () => `size(${path}) > ${r.int(4)}`,
    () => `action.target.startsWith(${quote(r.pick(['crm://', 's3://', 'mailto:']))})`,
    () => `${path} in ["a", 1]`,
    () => `${path} in [${r.pick(NUMBERS)}, null, true]`,
    () => `${path} == true`,
    () => `${path} < ${quote(s)}`,
    () => `${r.pick(NUMBERS)} <= ${path}`,
    () => `size(${path}) == 0`,
    () => `${path}.contains(${quote(s)})`,
    () => `${path}.endsWith(".csv")`,
  ];
  if (depth >= 2 || r.chance(0.4)) return r.pick(atoms)();
  const op = r.pick(['&&', '&&', '||']);
  const left = celExpression(r, depth + 1);
  const right = celExpression(r, depth + 1);
  return r.chance(0.2) ? `!(${left} ${op} ${right})` : `${left} ${op} ${right}`;
}

function condition(r: Random): Condition {
  const op = r.pick(OPS);
  if (op === 'cel') return { op, value: celExpression(r) };
  const field = r.pick(FIELDS);
  const value =
    op === 'in' || op === 'not_in'
      ? Array.from({ length: 1 + r.int(3) }, () => r.pick(SCALARS))
      : op === 'gt' || op === 'gte' || op === 'lt' || op === 'lte'
        ? r.pick(NUMBERS)
        : op === 'starts_with'
          ? r.pick(STRINGS)
          : op === 'matches'
            ? r.pick(PATTERNS)
            : op === 'exists'
              ? r.pick([true, false, undefined])
              : r.pick(SCALARS);
  return value === undefined ? { field, op } : { field, op, value };
}

/** A condition the compiler accepts (random ones often pair an operator with a field it refuses). */
const accepted = new Map<string, boolean>();
function validCondition(r: Random): Condition {
  for (;;) {
    const c = condition(r);
    const key = JSON.stringify(c);
    let ok = accepted.get(key);
    if (ok === undefined) {
      try {
        compileRules([{ id: 'probe', effect: 'allow', reason_code: 'PROBE', conditions: [c] }]);
        ok = true;
      } catch (err) {
        if (!(err instanceof InvalidPolicy)) throw err;
        ok = false;
      }
      accepted.set(key, ok);
    }
    if (ok) return c;
  }
}

/** Rules drawing on a shared pool of conditions, so the same condition appears in several rules, as in real sets. */
function ruleSetOf(r: Random, count: number): CompiledRule[] {
  const pool = Array.from({ length: 4 + r.int(20) }, () => validCondition(r));
  // Few deny rules, or nearly every request would be denied and allow rules never reported.
  const effects: Effect[] = ['allow', 'allow', 'allow', 'require_approval', 'require_approval', 'deny'];
  const policies = 1 + r.int(4);
  const compiled: CompiledRule[] = [];
  for (let p = 0; p < policies; p++) {
    const rules: Rule[] = [];
    for (let i = 0; i < Math.ceil(count / policies); i++) {
      const effect = r.pick(effects);
      rules.push({
        id: `P${p}-R${i}`,
        effect,
        reason_code: `CODE_${r.int(6)}`,
        conditions: Array.from({ length: r.chance(0.05) ? 0 : 1 + r.int(3) }, () => (r.chance(0.6) ? r.pick(pool) : validCondition(r))),
        ...(effect === 'require_approval' && r.chance(0.5) ? { obligations: { approvals_required: 1 + r.int(3) } } : {}),
      });
    }
    compiled.push(...compileRules(rules, r.chance(0.8) ? `policy-${p}` : undefined));
  }
  return compiled;
}

function tool(key: string, id: string, privilegeClass: ToolView['privilegeClass'], approvalClass: ToolView['approvalClass'], mcpServerId: string | null): ToolView {
  return { id, key, privilegeClass, approvalClass, blocked: false, mcpServerId };
}

function snapshotOf(rules: CompiledRule[]): Snapshot {
  const tools = [
    tool('crm.lookup_customer', 't-crm', 'read', 'none', null),
    tool('email.send_message', 't-mail', 'write', 'none', null),
    tool('payments.create_payment', 't-pay', 'financial', 'single', null),
    tool('storage.delete_object', 't-store', 'destructive', 'dual', null),
    tool('mcp.search', 't-search', 'read', 'none', 'srv-ok'),
    tool('mcp.wire', 't-wire', 'financial', 'none', 'srv-unknown'),
  ];
  return {
    tools: Object.fromEntries(tools.map((t) => [t.key, t])),
    mcpServers: { 'srv-ok': { trustState: 'approved' }, 'srv-unknown': { trustState: 'unknown' } },
    bindings: tools.map((t) => ({ id: `b-${t.id}`, targetKind: 'tool', targetId: t.id, actions: ['invoke'], constraints: {}, expiresAt: null, identityId: null })),
    delegations: [{ principalRef: 'user:ada@example.com', scopes: ['crm:read'], expiresAt: null }],
    denyClassRules: [],
    rules,
  };
}

function parameterValue(r: Random): unknown {
  return r.pick([() => r.pick(SCALARS), () => [r.pick(STRINGS), r.pick(STRINGS)], () => ({ key: r.pick(SCALARS) }), () => r.pick(NUMBERS)])();
}

function request(r: Random, explain: boolean): DecisionInput {
  const parameters: Record<string, unknown> = {};
  for (const p of PARAMS) if (r.chance(0.4)) parameters[p] = parameterValue(r);
  return {
    agent: {
      id: 'agent-1',
      status: 'active',
      gatewayAccess: true,
      environment: r.pick(['production', 'staging']),
      criticality: r.pick(['high', 'low']),
      dataClassification: r.pick(['confidential', 'public']),
    },
    identityId: null,
    action: {
      tool: r.chance(0.1) ? 'mcp.wire' : r.pick(TOOL_KEYS.slice(0, 5)),
      operation: r.chance(0.1) ? 'read' : 'invoke',
      target: r.pick(['crm://customers/vip/1', 'crm://customers/42', 's3://prod-ledger/2026/11.csv', 's3://prod-eu/LEDGER', 'mailto:ops@example.com', 'payroll ſ K', '', 'xx-abc']),
      parameters,
      ...(r.chance(0.5) ? { environment: r.pick(['production', 'staging', null]) } : {}),
      ...(r.chance(0.3) ? { onBehalfOf: r.pick(['user:ada@example.com', 'user:bob@example.com']) } : {}),
      ...(r.chance(0.3) ? { justification: r.pick(['Invoice 1', 'ledger fix']) } : {}),
    },
    now: r.pick(['2026-11-23T09:30:00.000Z', '2026-11-28T05:00:00.000Z', '2026-11-26T23:59:59.000Z']),
    approvalPresent: r.chance(0.2),
    explain,
  };
}

// The reference: every rule, every condition, regular expressions by RE2 alone.
const regexes = new Map<string, RE2JS>();
function plainTest(c: CompiledCondition): (doc: Record<string, unknown>) => boolean {
  if (c.op !== 'matches') return c.test;
  const pattern = c.value as string;
  let re = regexes.get(pattern);
  if (!re) regexes.set(pattern, (re = RE2JS.compile(pattern)));
  const field = c.field!;
  return (doc) => {
    const actual = readField(doc, field);
    return typeof actual === 'string' && re.test(actual);
  };
}

function referenceRules(ctx: DecisionContext): void {
  if (ctx.snapshot.rules.length === 0) return;
  const doc = decisionDocument(ctx);
  const explain = ctx.input.explain === true;
  for (const rule of ctx.snapshot.rules) {
    if (!explain && !rule.compiled.every((c) => plainTest(c)(doc))) continue;
    const detail: Record<string, unknown> = { rule_id: rule.id, ...(rule.policy ? { policy: rule.policy } : {}) };
    if (explain) {
      const results = rule.compiled.map((c) => plainTest(c)(doc));
      detail.conditions = rule.compiled.map((c, i) => ({
        ...(c.field ? { field: c.field } : {}),
        op: c.op,
        ...(c.op === 'cel' ? { expression: c.value } : {}),
        matched: results[i],
      }));
      if (!results.every(Boolean)) {
        ctx.trace.push({ step: 'policy', outcome: 'skip', reason: rule.reason_code, detail });
        continue;
      }
    }
    if (rule.effect === 'deny') deny(ctx, 'policy', rule.reason_code, detail);
    else if (rule.effect === 'require_approval') {
      ctx.approvals.push({ reason: rule.reason_code, count: Math.max(1, rule.obligations?.approvals_required ?? 1) });
      ctx.trace.push({ step: 'policy', outcome: 'require_approval', reason: rule.reason_code, detail });
    } else {
      ctx.allows.push(rule.reason_code);
      ctx.trace.push({ step: 'policy', outcome: 'allow', reason: rule.reason_code, detail });
    }
  }
}

function referenceDecide(input: DecisionInput, snapshot: Snapshot): Decision {
  const ctx: DecisionContext = { input, snapshot, denies: [], approvals: [], allows: [], trace: [], stop: false };
  for (const step of STEPS) {
    (step === publishedRules ? referenceRules : step)(ctx);
    if (ctx.stop) break;
  }
  const unique = (xs: string[]) => [...new Set(xs)];
  if (ctx.denies.length > 0) return { decision: 'deny', reasonCodes: unique(ctx.denies), approvalsRequired: 0, trace: ctx.trace };
  if (ctx.approvals.length > 0 && !input.approvalPresent) {
    return {
      decision: 'require_approval',
      reasonCodes: unique(ctx.approvals.map((a) => a.reason)),
      approvalsRequired: Math.max(...ctx.approvals.map((a) => a.count)),
      trace: ctx.trace,
    };
  }
  const approved = ctx.approvals.length > 0 ? ['APPROVAL_GRANTED'] : [];
  return {
    decision: 'allow',
    reasonCodes: unique(['PERMISSION_GRANTED', ...approved, ...ctx.allows]),
    approvalsRequired: 0,
    trace: [...ctx.trace, { step: 'decision', outcome: 'allow', reason: 'PERMISSION_GRANTED' }],
  };
}

describe('rule index (differential)', () => {
  const SETS = 120;
  const REQUESTS = 40;

  it('decides exactly as evaluating every rule does, with and without explain', () => {
    const r = seeded(20_261_126);
    const outcomes = new Map<string, number>();
    let matchedRules = 0;
    for (let s = 0; s < SETS; s++) {
      const snapshot = snapshotOf(ruleSetOf(r, 1 + r.int(60)));
      for (let q = 0; q < REQUESTS; q++) {
        const input = request(r, r.chance(0.5));
        const expected = referenceDecide(input, snapshot);
        const actual = decide(input, snapshot);
        if (JSON.stringify(actual) !== JSON.stringify(expected)) {
          // Show the case in full: the rules, the request and both answers.
          expect({ rules: snapshot.rules.map(({ id, conditions }) => ({ id, conditions })), input, actual }).toEqual({
            rules: snapshot.rules.map(({ id, conditions }) => ({ id, conditions })),
            input,
            actual: expected,
          });
        }
        outcomes.set(actual.decision, (outcomes.get(actual.decision) ?? 0) + 1);
        matchedRules += actual.trace.filter((t) => t.step === 'policy' && t.outcome !== 'skip').length;
      }
    }
    // The comparison means something only if the sets match often and every outcome occurs.
    expect(outcomes.get('allow')).toBeGreaterThan(200);
    expect(outcomes.get('deny')).toBeGreaterThan(200);
    expect(outcomes.get('require_approval')).toBeGreaterThan(200);
    expect(matchedRules).toBeGreaterThan(2000);
  });

  it('reports many matches from many fields in rule order', () => {
    // Conditions the requests mostly meet, on different fields, so matches come from several filings at once.
    const r = seeded(3);
    const likely: Condition[] = [
      { field: 'action.operation', op: 'eq', value: 'invoke' },
      { field: 'agent.id', op: 'in', value: ['agent-1', 'x'] },
      { field: 'time.hour', op: 'gte', value: 0 },
      { field: 'action.target', op: 'starts_with', value: '' },
      { field: 'tool.key', op: 'exists' },
      { op: 'cel', value: 'size(action.target) >= 0' },
      { op: 'cel', value: 'environment != "nowhere"' },
    ];
    const rules = compileRules(
      Array.from({ length: 150 }, (_, i) => ({
        id: `R${i}`,
        effect: r.pick<Effect>(['allow', 'require_approval']),
        reason_code: `CODE_${i % 40}`,
        conditions: [r.pick(likely), ...(r.chance(0.3) ? [r.pick(likely)] : [])],
      })),
      'many',
    );
    const snapshot = snapshotOf(rules);
    let most = 0;
    for (let q = 0; q < 50; q++) {
      const input = request(r, r.chance(0.3));
      const actual = decide(input, snapshot);
      expect(JSON.stringify(actual)).toBe(JSON.stringify(referenceDecide(input, snapshot)));
      most = Math.max(most, actual.trace.filter((t) => t.step === 'policy' && t.outcome !== 'skip').length);
    }
    expect(most).toBeGreaterThan(100);
  });

  it('files most rules under a field, so a request evaluates only the rules that can match', () => {
    const r = seeded(7);
    const rules = ruleSetOf(r, 200);
    const set = buildRuleSet(rules);
    // Only rules with nothing to file under are scanned: no eq, in, exists, range or prefix condition.
    const fileable = new Set(['eq', 'in', 'exists', 'gt', 'gte', 'lt', 'lte', 'starts_with']);
    const scanned = [...set.scan].map((i) => rules[i]!);
    expect(scanned.filter((rule) => rule.compiled.some((c) => fileable.has(c.op) && c.value !== false))).toEqual([]);
    expect(set.scan.length).toBeLessThan(rules.length * 0.75);
    expect(set.keys.length).toBeGreaterThan(3);
    // Conditions shared between rules are one entry.
    expect(set.tests.length).toBeLessThan(rules.reduce((n, rule) => n + rule.compiled.length, 0));
  });

  it('answers the same when a rule set is evaluated again and after another rule set (per-decision memo)', () => {
    const r = seeded(99);
    const a = snapshotOf(ruleSetOf(r, 40));
    const b = snapshotOf(ruleSetOf(r, 40));
    const inputs = Array.from({ length: 30 }, () => request(r, r.chance(0.5)));
    const first = inputs.map((i) => JSON.stringify(decide(i, a)));
    for (const i of inputs) decide(i, b);
    expect(inputs.map((i) => JSON.stringify(decide(i, a)))).toEqual(first);
    expect(inputs.map((i) => JSON.stringify(referenceDecide(i, a)))).toEqual(first);
  });
});
