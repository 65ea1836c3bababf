import { describe, expect, it } from 'vitest';
import { Environment } from '@marcbachmann/cel-js';
import { translateCel } from '../../api/modules/gateway/engine/cel-fast.js';
import { celInterpreted, celTest } from '../../api/modules/gateway/engine/compile.js';
import { loadPolicyCases } from '../support/policy-cases.js';

/**
 * The translated CEL subset must give the CEL library's answer for every expression and document:
 * expressions from the policy cases and a hand-made set of edge cases, over documents with absent
 * keys, nulls, mixed types, lists and maps.
 */
const handMade = [
  'action.amount > 100',
  'action.amount >= 100.5 && action.currency == "EUR"',
  'action.amount < 0 || action.amount == 0',
  '-1 < action.amount',
  'action.currency in ["EUR", "USD"]',
  'action.currency in []',
  'time.hour >= 9 && time.hour < 17 && time.weekday in [1, 2, 3, 4, 5]',
  'has(action.parameters.cc)',
  '!has(action.parameters.cc) && action.target.startsWith("mailto:")',
  'has(action.parameters.nested.key)',
  'action.parameters.customer_id == "42"',
  'action.parameters.customer_id.contains("4")',
  'action.parameters.customer_id.endsWith("2")',
  'size(action.parameters) > 1',
  'size(action.parameters.recipients) > 2',
  'size(action.target) == 10',
  'principal.on_behalf_of == null',
  'principal.on_behalf_of != null && principal.on_behalf_of.startsWith("user:")',
  'action.justification == null || size(action.justification) < 3',
  'environment == "production" ? action.amount > 10 : action.amount > 1000',
  'action.parameters.flag == true',
  '!action.parameters.flag',
  '!(!action.parameters.flag)',
  '(action.parameters.count > 1) == (action.parameters.flag == true)',
  'action.parameters.count > 3',
  'action.parameters.count == 3',
  'action.parameters.list == [1, 2]',
  'action.parameters.labels.exists(l, l == "confidential")',
  '"a" in action.parameters',
  'action.amount + 1 > 2',
  'action.parameters.missing > 1 || true',
  'true || action.parameters.missing > 1',
  'false && action.parameters.missing > 1',
  'action.parameters.missing > 1 && false',
  'action.parameters.missing > 1 && true',
  'action.amount > "100"',
  'action.currency < "F"',
  'tool.key == "crm.lookup_customer" && tool.privilege_class != "financial"',
  'tool.mcp_trust_state in ["unknown", "quarantined"]',
  'agent.criticality == "high" && agent.data_classification in ["confidential", "restricted"]',
];

const base = {
  tool: { key: 'crm.lookup_customer', privilege_class: 'read', approval_class: 'none', target_type: 'tool', mcp_trust_state: null },
  action: { operation: 'invoke', target: 'crm://customers/42', amount: null, currency: null, parameters: {}, justification: null },
  agent: { id: 'a-1', environment: 'production', criticality: 'high', data_classification: 'confidential' },
  principal: { on_behalf_of: null },
  environment: 'production',
  time: { hour: 9, weekday: 1 },
};
const docs: Array<Record<string, unknown>> = [
  base,
  { ...base, action: { ...base.action, amount: 120, currency: 'EUR', parameters: { amount: 120, currency: 'EUR', customer_id: '42', cc: 'x@example.com' } } },
  { ...base, action: { ...base.action, amount: 100.5, currency: 'USD', target: 'mailto:a@example.com', parameters: { recipients: ['a', 'b', 'c'], flag: true, count: 3 } } },
  { ...base, action: { ...base.action, amount: 0, parameters: { nested: { key: 1 }, list: [1, 2], labels: ['confidential'], a: 1, flag: 'yes', count: '3' } } },
  { ...base, action: { ...base.action, amount: -5, justification: 'ok', parameters: { customer_id: 42, missing: null } } },
  { ...base, principal: { on_behalf_of: 'user:ada@example.com' }, environment: 'staging', time: { hour: 18, weekday: 6 } },
  { ...base, tool: { ...base.tool, mcp_trust_state: 'unknown', privilege_class: 'financial' }, agent: { ...base.agent, data_classification: 'public' } },
];

const fromCases = loadPolicyCases().flatMap((c) =>
  [...(c.published ?? []), ...(c.draft_rules ?? [])].flatMap((r) => r.conditions.filter((x) => x.op === 'cel').map((x) => x.value as string)),
);

describe('translated CEL', () => {
  const expressions = [...new Set([...handMade, ...fromCases])];

  it('covers most expressions of the policy cases', () => {
    const env = new Environment().registerVariable('action', 'map').registerVariable('tool', 'map').registerVariable('agent', 'map')
      .registerVariable('principal', 'map').registerVariable('environment', 'string').registerVariable('time', 'map');
    const translated = fromCases.filter((e) => translateCel(env.parse(e).ast));
    expect(fromCases.length).toBeGreaterThan(5);
    expect(translated.length / fromCases.length).toBeGreaterThan(0.7);
  });

  it.each(expressions)('gives the library\'s answer: %s', (expression) => {
    const fast = celTest(expression);
    const slow = celInterpreted(expression);
    for (const doc of docs) expect({ doc, answer: fast(doc) }).toEqual({ doc, answer: slow(doc) });
  });
});
