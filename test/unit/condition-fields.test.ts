import { describe, expect, it } from 'vitest';
import { compileRules, InvalidPolicy } from '../../api/modules/gateway/engine/compile.js';
import type { DecisionContext } from '../../api/modules/gateway/engine/context.js';
import { decisionDocument, FIELDS, readField } from '../../api/modules/gateway/engine/fields.js';
import type { Condition, DecisionInput, Snapshot, ToolView } from '../../api/modules/gateway/engine/types.js';

/**
 * Condition fields are declared once (engine/fields.ts): the compiler accepts exactly the fields the
 * decision document holds, and each field reads its value from the request, the agent, the resolved
 * tool and the decision time.
 */
const tool: ToolView = {
  id: 'tool-pay',
  key: 'payments.create_payment',
  privilegeClass: 'financial',
  approvalClass: 'single',
  blocked: false,
  mcpServerId: 'srv-1',
  dataClassification: 'regulated',
  internetFacing: false,
};
const snapshot: Snapshot = {
  tools: { [tool.key]: tool },
  mcpServers: { 'srv-1': { trustState: 'quarantined' } },
  bindings: [],
  delegations: [],
  denyClassRules: [],
  rules: [],
};
const input: DecisionInput = {
  agent: {
    id: 'agent-1',
    status: 'active',
    gatewayAccess: true,
    environment: 'production',
    criticality: 'high',
    dataClassification: 'confidential',
  },
  identityId: null,
  action: {
    tool: 'payments.create_payment',
    operation: 'transfer',
    target: 'payee://suppliers/acme',
    parameters: { amount: 420, currency: 'EUR', payee: 'acme' },
    environment: 'staging',
    onBehalfOf: 'user:ada@example.com',
    justification: 'Invoice 2026-118',
  },
  // A Friday, 21:15 UTC.
  now: '2026-11-27T21:15:00.000Z',
  session: {
    id: 'id:run-7',
    facts: { maxClassification: 'personal', untrustedContent: true, tools: { 'payments.create_payment': 2, 'crm.lookup_customer': 1 }, calls: 3 },
  },
};
const ctx: DecisionContext = { input, snapshot, tool, denies: [], approvals: [], allows: [], trace: [], stop: false };
const doc = decisionDocument(ctx);

/** What each field must read from the sample above, written out by hand. */
const EXPECTED: Record<string, unknown> = {
  'tool.key': 'payments.create_payment',
  'tool.privilege_class': 'financial',
  'tool.approval_class': 'single',
  'tool.target_type': 'mcp_tool',
  'tool.mcp_trust_state': 'quarantined',
  'tool.data_classification': 'regulated',
  'tool.internet_facing': false,
  // On a quarantined MCP server.
  'tool.untrusted_source': true,
  'action.operation': 'transfer',
  'action.target': 'payee://suppliers/acme',
  'action.amount': 420,
  'action.currency': 'EUR',
  'action.parameters': { amount: 420, currency: 'EUR', payee: 'acme' },
  'action.justification': 'Invoice 2026-118',
  'agent.id': 'agent-1',
  'agent.environment': 'production',
  'agent.criticality': 'high',
  'agent.data_classification': 'confidential',
  'principal.on_behalf_of': 'user:ada@example.com',
  environment: 'staging',
  'time.hour': 21,
  'time.weekday': 5,
  'session.id': 'id:run-7',
  'session.max_classification': 'personal',
  'session.max_classification_rank': 4,
  'session.untrusted_content': true,
  'session.calls': 3,
  'session.tools': ['payments.create_payment', 'crm.lookup_customer'],
  'session.tool_calls': { 'payments.create_payment': 2, 'crm.lookup_customer': 1 },
  'session.same_tool_calls': 2,
};

/** The session fields of a call without a session (the console): nothing read, nothing called. */
const NO_SESSION: Record<string, unknown> = {
  'session.id': null,
  'session.max_classification': null,
  'session.max_classification_rank': 0,
  'session.untrusted_content': false,
  'session.calls': 0,
  'session.tools': [],
  'session.tool_calls': {},
  'session.same_tool_calls': 0,
};

/** The document's leaf paths; `action.parameters` and `session.tool_calls` are one field each (their keys are data). */
function leaves(value: unknown, prefix = ''): string[] {
  if (prefix === 'action.parameters' || prefix === 'session.tool_calls' || value === null || typeof value !== 'object' || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k));
}

const compiles = (conditions: Condition[]) => compileRules([{ id: 'R1', effect: 'deny', reason_code: 'TEST_RULE', conditions }])[0]!;

function refused(condition: Condition): boolean {
  try {
    compiles([condition]);
    return false;
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidPolicy);
    return true;
  }
}

describe('condition fields', () => {
  it('are the leaves of the decision document, no more and no fewer', () => {
    expect(Object.keys(FIELDS).sort()).toEqual(leaves(doc).sort());
  });

  it('are all checked here, in their declared order', () => {
    expect(Object.keys(EXPECTED)).toEqual(Object.keys(FIELDS));
  });

  it.each(Object.keys(FIELDS))('%s compiles, in a comparison and in CEL, and reads its value from the input', (field) => {
    expect(readField(doc, field)).toEqual(EXPECTED[field]);
    const expected = EXPECTED[field];
    const scalar = expected === null || typeof expected !== 'object';
    const rule = compiles([
      { field, op: 'exists', value: true },
      ...(scalar ? [{ field, op: 'eq', value: expected }] : []),
      { op: 'cel', value: `${field} == ${field}` },
      ...(typeof expected === 'string' ? [{ op: 'cel', value: `${field} == ${JSON.stringify(expected)}` }] : []),
    ]);
    for (const c of rule.compiled) expect(c.test(doc), `${c.op} ${String(c.value)}`).toBe(true);
  });

  it('read an empty session when the call has none', () => {
    const bare = decisionDocument({ ...ctx, input: { ...input, session: null } });
    for (const [field, expected] of Object.entries(NO_SESSION)) expect(readField(bare, field), field).toEqual(expected);
    expect(Object.keys(NO_SESSION)).toEqual(Object.keys(FIELDS).filter((f) => f.startsWith('session.')));
  });

  it('count a session call of the tool in hand only under its own key', () => {
    const other = decisionDocument({ ...ctx, input: { ...input, action: { ...input.action, tool: 'email.send_message' } } });
    expect(readField(other, 'session.same_tool_calls')).toBe(0);
    const rule = compiles([{ op: 'cel', value: "session.tool_calls['crm.lookup_customer'] >= 1.0 && 'crm.lookup_customer' in session.tools" }]);
    expect(rule.compiled[0]!.test(doc)).toBe(true);
  });

  it('include any parameter of the request by name', () => {
    const rule = compiles([
      { field: 'action.parameters.payee', op: 'eq', value: 'acme' },
      { field: 'action.parameters.missing', op: 'exists', value: false },
    ]);
    expect(rule.compiled.map((c) => c.test(doc))).toEqual([true, true]);
  });

  it.each(['tool', 'agent', 'time', 'principal', 'agent.status', 'tool.id', 'tool.blocked', 'time.minute', 'environment.name', 'action.parameters.', 'constructor', '__proto__'])(
    'refuses %s, which the document does not hold',
    (field) => {
      expect(Object.hasOwn(FIELDS, field)).toBe(false);
      expect(refused({ field, op: 'exists', value: true })).toBe(true);
    },
  );

  it('refuses in CEL a key the document does not hold', () => {
    expect(refused({ op: 'cel', value: 'agent.status == "active"' })).toBe(true);
    expect(refused({ op: 'cel', value: 'tool.blocked == false' })).toBe(true);
  });
});
