import {
  compileRules,
  decide,
  type ActionRequest,
  type CompiledRule,
  type Condition,
  type DecisionInput,
  type Effect,
  type Rule,
  type Snapshot,
} from '../api/modules/gateway/index.js';
import { atLeast, record } from './results.js';

/**
 * bench/policy: the pure decision engine (every step, no I/O) on a realistic snapshot: 50 published
 * policies, 200 rules, 30% of their conditions CEL, evaluated over a mix of requests. Rules are
 * compiled once, outside the timed loop, as the gateway does per published version. Figures are CPU
 * time of this single-threaded process (process.cpuUsage), so they read per core. The workload's parts
 * are exported so a profiling driver (`node --cpu-prof`) can run the same rules and requests.
 */
/** The targets (issue 20): evaluations per second on one core, and simulations with `explain`. */
const TARGET_PER_SECOND = 100_000;
const EXPLAIN_TARGET_PER_SECOND = 20_000;

const POLICIES = 50;
const RULES = 200;
const CEL_SHARE = 0.3;

/** Small deterministic generator so every run measures the same rules. */
function seeded(seed: number) {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const TOOLS = ['crm.lookup_customer', 'email.send_message', 'payments.create_payment', 'storage.delete_object'];

/** Field conditions as policy authors write them: each holds for a few requests of the mix, not most. */
const FIELD_CONDITIONS: Array<(n: number) => Condition> = [
  (n) => ({ field: 'tool.key', op: 'eq', value: TOOLS[n % TOOLS.length] }),
  () => ({ field: 'tool.privilege_class', op: 'in', value: ['financial', 'destructive'] }),
  (n) => ({ field: 'action.amount', op: 'gt', value: 1000 + 100 * (n % 50) }),
  (n) => ({ field: 'action.amount', op: 'lte', value: 100 + 5 * n }),
  () => ({ field: 'action.currency', op: 'in', value: ['USD', 'GBP'] }),
  (n) => ({ field: 'action.target', op: 'starts_with', value: `crm://customers/vip/${n % 7}` }),
  (n) => ({ field: 'action.target', op: 'matches', value: `^s3://prod-[a-z]+/${2020 + (n % 10)}/` }),
  () => ({ field: 'action.target', op: 'matches', value: '(?i)ledger|payroll' }),
  () => ({ field: 'action.parameters.labels', op: 'contains', value: 'confidential' }),
  () => ({ field: 'action.justification', op: 'exists', value: true }),
  () => ({ field: 'principal.on_behalf_of', op: 'exists', value: true }),
  (n) => ({ field: 'time.hour', op: 'lt', value: 6 + (n % 3) }),
  (n) => ({ field: 'time.weekday', op: 'eq', value: n % 7 }),
  () => ({ field: 'agent.environment', op: 'neq', value: 'production' }),
  (n) => ({ field: 'action.parameters.customer_id', op: 'eq', value: String(n) }),
  () => ({ field: 'action.parameters.subject', op: 'eq', value: 'Outage' }),
  () => ({ field: 'action.parameters.limit', op: 'gt', value: 10 }),
];

/** CEL conditions; some fail at run time on requests without the key they read (a null amount, no recipients). */
const CEL_CONDITIONS: Array<(n: number) => string> = [
  (n) => `action.amount > ${1000 + 100 * n} && action.currency == "EUR"`,
  (n) => `tool.key in ["payments.create_payment", "storage.delete_object"] && time.hour < ${6 + (n % 4)}`,
  () => 'has(action.parameters.bcc)',
  () => 'action.target.startsWith("s3://prod-") && !action.target.endsWith(".log")',
  (n) => `size(action.parameters.recipients) > ${3 + (n % 5)}`,
  () => 'principal.on_behalf_of == "user:ada@example.com" && tool.privilege_class == "read"',
  () => 'environment == "staging" || agent.criticality == "critical"',
  (n) => `tool.key == "crm.lookup_customer" && action.parameters.customer_id.contains("test-${n % 9}")`,
  (n) => `time.weekday == ${n % 7} && time.hour >= 9 && time.hour < 12`,
  (n) => `has(action.parameters.payee) && action.parameters.payee in ["acme", "globex", "initech-${n}"]`,
];

/** 50 policies of four rules, conditions 1-3 per rule, 30% of them CEL (celShare 0 for the comparison). */
export function policyRules(celShare = CEL_SHARE): { rules: CompiledRule[]; conditions: number; cel: number } {
  const random = seeded(42);
  // Deny rules are the narrowest (three conditions), allow rules the broadest (one).
  const effects: Effect[] = ['allow', 'require_approval', 'deny'];
  let k = 0;
  let cel = 0;
  const rules: CompiledRule[] = [];
  for (let p = 0; p < POLICIES; p++) {
    const written: Rule[] = [];
    for (let r = 0; r < RULES / POLICIES; r++) {
      const n = p * (RULES / POLICIES) + r;
      const conditions: Condition[] = [];
      for (let c = 0; c <= n % 3; c++, k++) {
        // Three conditions in ten are CEL, so the share holds over the whole set.
        if (k % 10 < celShare * 10) {
          conditions.push({ op: 'cel', value: CEL_CONDITIONS[Math.floor(random() * CEL_CONDITIONS.length)]!(n) });
          cel++;
        } else {
          conditions.push(FIELD_CONDITIONS[Math.floor(random() * FIELD_CONDITIONS.length)]!(n));
        }
      }
      const effect = effects[n % 3]!;
      written.push({
        id: `P${p}-R${r}`,
        effect,
        reason_code: `POLICY_${p}_RULE_${r}`,
        conditions,
        ...(effect === 'require_approval' ? { obligations: { approvals_required: 1 + (n % 2) } } : {}),
      });
    }
    rules.push(...compileRules(written, `policy-${p}`));
  }
  return { rules, conditions: k, cel };
}

const REQUESTS: ActionRequest[] = [
  { tool: 'crm.lookup_customer', operation: 'invoke', target: 'crm://customers/42', parameters: { customer_id: '42' } },
  { tool: 'crm.lookup_customer', operation: 'invoke', target: 'crm://customers/vip/3', parameters: { customer_id: 'test-3', fields: ['name', 'email'] }, onBehalfOf: 'user:ada@example.com' },
  { tool: 'crm.lookup_customer', operation: 'invoke', target: 'crm://customers/7', parameters: { customer_id: '7', limit: 20 } },
  {
    tool: 'email.send_message',
    operation: 'invoke',
    target: 'mailto:team@example.com',
    parameters: { to: 'team@example.com', subject: 'Weekly report', body: 'Numbers attached; nothing unusual this week.', labels: ['internal'] },
  },
  {
    tool: 'email.send_message',
    operation: 'invoke',
    target: 'mailto:customers@example.com',
    parameters: { to: 'customers@example.com', recipients: ['a@example.com', 'b@example.com', 'c@example.com', 'd@example.com', 'e@example.com'], subject: 'Outage' },
  },
  { tool: 'payments.create_payment', operation: 'invoke', target: 'payee://suppliers/acme', parameters: { amount: 420, currency: 'EUR', payee: 'acme' }, justification: 'Invoice 2026-118' },
  { tool: 'payments.create_payment', operation: 'invoke', target: 'payee://suppliers/globex', parameters: { amount: 5000, currency: 'EUR', payee: 'globex' } },
  { tool: 'storage.delete_object', operation: 'invoke', target: 's3://prod-ledger/2026/11.csv', parameters: { path: 's3://prod-ledger/2026/11.csv' }, environment: 'production' },
];

export function snapshot(rules: CompiledRule[]): Snapshot {
  const tool = (key: string, id: string, privilegeClass: 'read' | 'write' | 'destructive' | 'financial', approvalClass: 'none' | 'single') => ({
    id,
    key,
    privilegeClass,
    approvalClass,
    blocked: false,
    mcpServerId: null,
  });
  const tools = [
    tool('crm.lookup_customer', 't-crm', 'read', 'none'),
    tool('email.send_message', 't-mail', 'write', 'none'),
    tool('payments.create_payment', 't-pay', 'financial', 'single'),
    tool('storage.delete_object', 't-store', 'destructive', 'single'),
  ];
  return {
    tools: Object.fromEntries(tools.map((t) => [t.key, t])),
    mcpServers: {},
    bindings: tools.map((t) => ({
      id: `b-${t.id}`,
      targetKind: 'tool' as const,
      targetId: t.id,
      actions: ['invoke'],
      constraints: t.key === 'payments.create_payment' ? { max_amount: 10_000, currency: 'EUR' } : {},
      expiresAt: null,
      identityId: null,
    })),
    delegations: [{ principalRef: 'user:ada@example.com', scopes: ['crm:read'], expiresAt: null }],
    denyClassRules: [],
    rules,
  };
}

export function inputs(explain: boolean): DecisionInput[] {
  const agent = { id: 'agent-bench', status: 'active' as const, gatewayAccess: true, environment: 'production', criticality: 'high', dataClassification: 'confidential' };
  // Two times of day, so time conditions go both ways.
  return ['2026-11-23T09:30:00.000Z', '2026-11-28T05:00:00.000Z'].flatMap((now) =>
    REQUESTS.map((action) => ({ agent, identityId: null, action, now, explain })),
  );
}

/** Evaluations per CPU second after a warm-up, over about `seconds` of wall time. */
function measure(snap: Snapshot, requests: DecisionInput[], seconds: number) {
  const outcomes: Record<Effect, number> = { allow: 0, deny: 0, require_approval: 0 };
  const batch = () => {
    for (const input of requests) outcomes[decide(input, snap).decision]++;
  };
  for (const until = performance.now() + 500; performance.now() < until; ) batch();
  for (const k of Object.keys(outcomes) as Effect[]) outcomes[k] = 0;
  const cpu = process.cpuUsage();
  let n = 0;
  for (const until = performance.now() + seconds * 1000; performance.now() < until; n += requests.length) batch();
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  return { perSecond: n / cpuSeconds, microseconds: (cpuSeconds * 1e6) / n, outcomes, n };
}

export function benchPolicy(seconds = 2) {
  const full = policyRules();
  const plain = policyRules(0);
  const row = (workload: string, m: ReturnType<typeof measure>, target?: number) => {
    const share = (k: Effect) => Math.round((100 * m.outcomes[k]) / m.n);
    return {
      workload,
      evaluations_per_second_per_core: Math.round(m.perSecond),
      microseconds_per_evaluation: Number(m.microseconds.toFixed(1)),
      target_per_second: target ?? '',
      meets_target: target === undefined ? '' : m.perSecond >= target,
      'allow/approval/deny %': `${share('allow')}/${share('require_approval')}/${share('deny')}`,
    };
  };
  const label = (r: typeof full) => `${r.rules.length} rules, ${r.conditions} conditions, ${Math.round((100 * r.cel) / r.conditions)}% CEL`;
  const gateway = measure(snapshot(full.rules), inputs(false), seconds);
  const explain = measure(snapshot(full.rules), inputs(true), seconds);
  const noCel = measure(snapshot(plain.rules), inputs(false), seconds);
  record('policy', 'evaluations per second per core, 200 rules, 30% CEL', Math.round(gateway.perSecond), '/s', atLeast(TARGET_PER_SECOND));
  record('policy', 'explain (simulation) per second', Math.round(explain.perSecond), '/s', atLeast(EXPLAIN_TARGET_PER_SECOND));
  record('policy', 'evaluations per second per core, 200 rules, no CEL', Math.round(noCel.perSecond), '/s');
  return [
    row(`${label(full)} (gateway)`, gateway, TARGET_PER_SECOND),
    row(`${label(full)}, explain (simulation)`, explain, EXPLAIN_TARGET_PER_SECOND),
    row(`${label(plain)} (gateway, for comparison)`, noCel),
  ];
}
