import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileRules, OPERATOR_SPECS } from '../../api/modules/gateway/engine/compile.js';
import { decide } from '../../api/modules/gateway/engine/decide.js';
import type { Decision, DecisionInput, Rule, Snapshot } from '../../api/modules/gateway/engine/types.js';
import { rule as ruleSchema } from '../../api/modules/policies/policies.schemas.js';
import { loadPolicyCases, loadPolicyRegistry, type PolicyCase } from '../support/policy-cases.js';

/**
 * Policy cases as data (test/fixtures/policies) on the pure engine: one registry, the rules of the
 * case (drafts instead of the published ones when given), the decision expected. The API test runs
 * the same files through POST /policies/simulate.
 */
const registry = loadPolicyRegistry();
const cases = loadPolicyCases();

const rulesOf = (c: PolicyCase): Rule[] => c.draft_rules ?? c.published ?? [];

function snapshotFor(c: PolicyCase): Snapshot {
  return {
    tools: registry.tools,
    mcpServers: {},
    bindings: registry.bindings.map((b) => {
      const tool = registry.tools[b.tool]!;
      return { id: `b-${tool.id}`, targetKind: 'tool', targetId: tool.id, actions: ['invoke'], constraints: b.constraints, expiresAt: null, identityId: null };
    }),
    delegations: registry.delegations,
    denyClassRules: (c.deny_class ?? []).map((cls) => ({ id: `deny-${cls}`, privilegeClass: cls, agentId: null })),
    rules: compileRules(rulesOf(c)),
  };
}

function inputFor(c: PolicyCase): DecisionInput {
  const r = c.request;
  return {
    agent: registry.agent,
    identityId: null,
    action: {
      tool: r.tool,
      operation: r.operation,
      target: r.target,
      parameters: r.parameters,
      environment: r.environment,
      onBehalfOf: r.on_behalf_of,
      justification: r.justification,
    },
    now: registry.now,
    approvalPresent: c.approval_present,
    explain: true,
  };
}

const decided = cases.map((c) => ({ ...c, result: decide(inputFor(c), snapshotFor(c)) }));

type ConditionTrace = { field?: string; op: string; matched: boolean };
const policyTrace = (d: Decision) =>
  d.trace.filter((t) => t.step === 'policy').map((t) => ({ outcome: t.outcome, ...(t.detail as { rule_id: string; conditions: ConditionTrace[] }) }));

describe('policy cases', () => {
  it.each(decided)('$file', ({ result, expect: expected }) => {
    expect({ decision: result.decision, reason_codes: result.reasonCodes, approvals_required: result.approvalsRequired }).toEqual(expected);
  });

  it('are valid rules for the API too', () => {
    const rules = z.array(ruleSchema);
    for (const c of cases) {
      expect(c.description, c.file).toMatch(/\S/);
      for (const set of [c.published, c.draft_rules]) if (set) expect(() => rules.parse(set), c.file).not.toThrow();
    }
  });

  it('cover every operator, matching and not, effects, drafts, deny classes and approvals', () => {
    expect(cases.length).toBeGreaterThanOrEqual(45);
    const rules = cases.flatMap((c) => [...(c.published ?? []), ...(c.draft_rules ?? [])]);
    const conditions = rules.flatMap((r) => r.conditions);
    expect(conditions.filter((c) => c.op === 'cel').length).toBeGreaterThanOrEqual(8);
    expect(new Set(rules.map((r) => r.effect))).toEqual(new Set(['allow', 'deny', 'require_approval']));
    expect(new Set(cases.map((c) => c.expect.decision))).toEqual(new Set(['allow', 'deny', 'require_approval']));
    expect(conditions.some((c) => c.op === 'exists' && c.value === true)).toBe(true);
    expect(conditions.some((c) => c.op === 'exists' && c.value === false)).toBe(true);
    expect(rules.some((r) => r.conditions.length === 0)).toBe(true);
    expect(cases.some((c) => c.draft_rules !== undefined)).toBe(true);
    expect(cases.some((c) => c.draft_rules?.length === 0 && c.published)).toBe(true);
    expect(cases.some((c) => c.published)).toBe(true);
    expect(cases.some((c) => c.deny_class?.length)).toBe(true);
    expect(cases.some((c) => c.approval_present)).toBe(true);

    // What the conditions gave, from the explain trace: each operator both held and failed somewhere.
    const outcomes = new Map<string, Set<boolean>>();
    for (const d of decided) {
      for (const entry of policyTrace(d.result)) {
        for (const c of entry.conditions) outcomes.set(c.op, (outcomes.get(c.op) ?? new Set()).add(c.matched));
      }
    }
    for (const op of Object.keys(OPERATOR_SPECS)) expect([...(outcomes.get(op) ?? [])].sort(), op).toEqual([false, true]);
  });

  it('with explain, traces every rule with the result of each condition', () => {
    for (const d of decided) {
      const rules = rulesOf(d);
      // An unknown tool stops before the rules are read.
      if (rules.length === 0 || d.result.reasonCodes.includes('UNKNOWN_TOOL')) continue;
      const traced = policyTrace(d.result);
      expect(traced.map((t) => t.rule_id), d.file).toEqual(rules.map((r) => r.id));
      traced.forEach((t, i) => {
        const conditions = rules[i]!.conditions;
        expect(t.conditions.map((c) => ({ field: c.field, op: c.op })), d.file).toEqual(conditions.map((c) => ({ field: c.field, op: c.op })));
        const held = t.conditions.every((c) => c.matched);
        expect(t.outcome, `${d.file} ${t.rule_id}`).toBe(held ? rules[i]!.effect : 'skip');
      });
    }

    const example = decided.find((d) => d.file === 'one-failing-condition-no-match.json')!;
    expect(policyTrace(example.result)).toEqual([
      {
        outcome: 'skip',
        rule_id: 'R1',
        conditions: [
          { field: 'tool.key', op: 'eq', matched: true },
          { field: 'action.amount', op: 'gt', matched: true },
          { field: 'action.currency', op: 'eq', matched: false },
        ],
      },
    ]);
  });

  it('without explain, traces only the rules that applied', () => {
    const c = decided.find((d) => d.file === 'contains-target-string-matches.json')!;
    const rules: Rule[] = [
      ...rulesOf(c),
      { id: 'R2', effect: 'deny', reason_code: 'NOT_THIS_ONE', conditions: [{ field: 'tool.key', op: 'eq', value: 'email.send_message' }] },
    ];
    const snapshot = { ...snapshotFor(c), rules: compileRules(rules) };
    const explained = policyTrace(decide(inputFor(c), snapshot));
    const plain = policyTrace(decide({ ...inputFor(c), explain: false }, snapshot));
    expect(explained.map((t) => [t.rule_id, t.outcome])).toEqual([['R1', 'require_approval'], ['R2', 'skip']]);
    expect(plain).toEqual([{ outcome: 'require_approval', rule_id: 'R1' }]);
  });
});
