import { describe, expect, it } from 'vitest';
import { DEFAULT_FACTORS } from '../../api/db/migrations/0010_risk.js';
import { applyWhatIf, bandOf, score, type Factor, type RiskInputs } from '../../api/modules/risk/index.js';
import { EVALUATORS } from '../../api/modules/risk/score.js';

/**
 * The pure Agent Risk Score (api/modules/risk/score.ts) and what-if (what-if.ts) on the default ruleset of
 * migration 0010: each factor's contribution at each of its levels, the MCP trust points of the spec, the bands,
 * the bounds, a disabled factor, and every WhatIf field.
 */

const NOW = new Date('2026-11-23T09:00:00.000Z');
const none = { count: 0, examples: [] };
const some = (...examples: string[]) => ({ count: examples.length, examples });

/** An agent that scores 0 on every factor. */
function quiet(): RiskInputs {
  return {
    environment: 'development',
    internet_exposure: 'none',
    code_execution: 'none',
    persistent_memory: 'none',
    human_approval_coverage: 'strong',
    gateway_enforced: true,
    status: 'active',
    gateway_access: true,
    last_attested_at: '2026-11-01T00:00:00.000Z',
    data_classification: 'public',
    data_reached: [],
    tools: { write: none, high_impact: none, privileged: none, read: some('kb.search'), excluded: none },
    mcp_servers: [],
    delegations: { count: 0, principals: [], groups_or_services: 0, wildcard_scopes: 0 },
    identity: { workload_identities: 1, bindings: 1, unscoped_bindings: 0, shared_credentials: none },
    findings: { critical: 0, high: 0, medium: 0, low: 0, examples: [] },
    detections: { window_days: 7, denied: 0, secret_detected: 0, poisoned_tools: none },
  };
}

const RULESET: Factor[] = DEFAULT_FACTORS.map((f) => ({ key: f.key, description: f.description, weight: f.weight, enabled: true, parameters: f.parameters ?? {} }));

const contributions = (inputs: RiskInputs, ruleset = RULESET) => Object.fromEntries(score(inputs, ruleset, NOW).factors.map((f) => [f.key, f.contribution]));
/** The contribution of one factor, every other staying at zero. */
function only(key: string, change: (i: RiskInputs) => void): number {
  const inputs = quiet();
  change(inputs);
  const c = contributions(inputs);
  const others = Object.entries(c).filter(([k, v]) => k !== key && v !== 0);
  expect(others, `only ${key} contributes`).toEqual([]);
  return c[key]!;
}

describe('the risk score', () => {
  it('has an evaluator for every factor of the default ruleset, and no evaluator without a factor', () => {
    expect(Object.keys(EVALUATORS).sort()).toEqual(DEFAULT_FACTORS.map((f) => f.key).sort());
  });

  it('scores 0 (low) for an agent with nothing to count, listing every factor in the ruleset’s order with why', () => {
    const r = score(quiet(), RULESET, NOW);
    expect(r).toMatchObject({ score: 0, band: 'low', raw: 0 });
    expect(r.factors.map((f) => f.key)).toEqual(DEFAULT_FACTORS.map((f) => f.key));
    for (const f of r.factors) expect(f.why.length, f.key).toBeGreaterThan(10);
  });

  const cases: Array<[key: string, change: (i: RiskInputs) => void, points: number, why: RegExp]> = [
    ['internet_exposure', (i) => (i.internet_exposure = 'public'), 12, /public/],
    ['internet_exposure', (i) => (i.internet_exposure = 'controlled'), 6, /controlled \(counts half\)/],
    ['code_execution', (i) => (i.code_execution = 'privileged'), 12, /privileged/],
    ['code_execution', (i) => (i.code_execution = 'sandboxed'), 6, /sandboxed/],
    ['persistent_memory', (i) => (i.persistent_memory = 'unbounded'), 6, /unbounded/],
    ['persistent_memory', (i) => (i.persistent_memory = 'bounded'), 3, /bounded/],
    ['human_approval_coverage', (i) => (i.human_approval_coverage = 'none'), 10, /none/],
    ['human_approval_coverage', (i) => (i.human_approval_coverage = 'partial'), 5, /partial/],
    ['production_environment', (i) => (i.environment = 'production'), 8, /production/],
    ['production_environment', (i) => (i.environment = 'staging'), 2, /staging/],
    ['data_classification', (i) => (i.data_classification = 'internal'), 2, /internal \(its own/],
    ['data_classification', (i) => (i.data_reached = [{ name: 'payroll-db', classification: 'restricted' }]), 10, /restricted \(data it reaches: payroll-db\)/],
    ['data_classification', (i) => (i.data_reached = [{ name: 'crm', classification: 'personal' }]), 6, /personal/],
    ['write_tools', (i) => (i.tools.write = some('crm.update')), 5, /crm\.update/],
    ['high_impact_tools', (i) => (i.tools.high_impact = some('payments.refund', 'db.drop')), 10, /2 destructive or financial tools: payments\.refund, db\.drop/],
    ['privileged_tools', (i) => (i.tools.privileged = some('iam.grant')), 10, /iam\.grant/],
    ['delegation_breadth', (i) => (i.delegations = { count: 1, principals: ['ada@example.com'], groups_or_services: 0, wildcard_scopes: 0 }), 4, /narrow/],
    ['delegation_breadth', (i) => (i.delegations = { count: 3, principals: ['a', 'b', 'c'], groups_or_services: 0, wildcard_scopes: 0 }), 8, /broad/],
    ['delegation_breadth', (i) => (i.delegations = { count: 1, principals: ['finance'], groups_or_services: 1, wildcard_scopes: 0 }), 8, /group or service/],
    ['gateway_enforcement', (i) => (i.gateway_enforced = false), 10, /gateway_enforced is false/],
    ['owner_attestation', (i) => (i.last_attested_at = null), 6, /never attested/],
    ['owner_attestation', (i) => (i.last_attested_at = '2026-08-01T00:00:00.000Z'), 6, /114 days ago, more than 90/],
    ['open_findings', (i) => (i.findings = { critical: 0, high: 1, medium: 1, low: 0, examples: ['high x: y', 'medium z: w'] }), 7, /2 open findings \(1 high, 1 medium\)/],
    ['open_findings', (i) => (i.findings = { critical: 2, high: 0, medium: 0, low: 0, examples: [] }), 15, /capped at 15/],
    ['detections', (i) => (i.detections = { window_days: 7, denied: 3, secret_detected: 1, poisoned_tools: none }), 9, /3 denied decisions in the last 7 days \(1 for secret material\)/],
    ['detections', (i) => (i.detections = { window_days: 7, denied: 0, secret_detected: 0, poisoned_tools: some('mail.send') }), 8, /mail\.send/],
    ['identity_scoping', (i) => (i.identity = { workload_identities: 0, bindings: 2, unscoped_bindings: 2, shared_credentials: some('shared-key') }), 9, /no workload identity.*shared-key/],
    ['identity_scoping', (i) => (i.identity = { workload_identities: 1, bindings: 2, unscoped_bindings: 1, shared_credentials: none }), 3, /1 of 2 bindings not tied/],
    ['containment', (i) => (i.status = 'suspended'), -30, /Agent is suspended: it cannot act/],
  ];
  it.each(cases)('%s contributes as its level says', (key, change, points, why) => {
    expect(only(key, change)).toBe(points);
    const inputs = quiet();
    change(inputs);
    expect(score(inputs, RULESET, NOW).factors.find((f) => f.key === key)!.why).toMatch(why);
  });

  it('containment takes 30 off, bounded at 0: suspended, revoked or without gateway access', () => {
    for (const change of [(i: RiskInputs) => (i.status = 'suspended'), (i: RiskInputs) => (i.status = 'revoked'), (i: RiskInputs) => (i.gateway_access = false)]) {
      const inputs = quiet();
      inputs.internet_exposure = 'public';
      inputs.code_execution = 'privileged';
      inputs.gateway_enforced = false;
      inputs.human_approval_coverage = 'none';
      change(inputs);
      const r = score(inputs, RULESET, NOW);
      expect(r.factors.find((f) => f.key === 'containment')!.contribution).toBe(-30);
      expect(r.raw).toBe(44 - 30);
      expect(r.score).toBe(14);
    }
    const contained = quiet();
    contained.status = 'revoked';
    expect(score(contained, RULESET, NOW)).toMatchObject({ raw: -30, score: 0, band: 'low' });
  });

  it('MCP trust adds exactly what the spec says per server: unknown 6, unsigned 12, quarantined 12, approved nothing', () => {
    const mcp = (...states: Array<'approved' | 'unknown' | 'unsigned' | 'quarantined'>) =>
      only('mcp_trust', (i) => (i.mcp_servers = states.map((s, n) => ({ name: `srv-${n}`, trust_state: s }))));
    expect(mcp('approved')).toBe(0);
    expect(mcp('unknown')).toBe(6);
    expect(mcp('unsigned')).toBe(12);
    expect(mcp('quarantined')).toBe(12);
    expect(mcp('unknown', 'unsigned', 'approved')).toBe(18);
    // At most the factor's weight (three untrusted servers' worth).
    expect(mcp('unsigned', 'unsigned', 'quarantined', 'unknown')).toBe(36);
    const inputs = quiet();
    inputs.mcp_servers = [{ name: 'files', trust_state: 'unsigned' }, { name: 'wiki', trust_state: 'approved' }];
    expect(score(inputs, RULESET, NOW).factors.find((f) => f.key === 'mcp_trust')!.why).toBe('MCP servers not approved: files unsigned +12.');
  });

  it('bands: low 0-24, medium 25-49, high 50-74, critical 75-100; the total is bounded to 0-100', () => {
    const expected: Array<[number, string]> = [[0, 'low'], [24, 'low'], [25, 'medium'], [49, 'medium'], [50, 'high'], [74, 'high'], [75, 'critical'], [100, 'critical']];
    for (const [s, band] of expected) expect(bandOf(s), String(s)).toBe(band);
    const worst = quiet();
    Object.assign(worst, { environment: 'production', internet_exposure: 'public', code_execution: 'privileged', persistent_memory: 'unbounded', human_approval_coverage: 'none', gateway_enforced: false, last_attested_at: null });
    worst.tools.privileged = some('iam.grant');
    worst.tools.high_impact = some('payments.refund');
    worst.mcp_servers = [{ name: 'x', trust_state: 'quarantined' }];
    const r = score(worst, RULESET, NOW);
    expect(r.raw).toBe(12 + 12 + 6 + 10 + 8 + 10 + 10 + 10 + 6 + 12);
    expect(r).toMatchObject({ score: 96, band: 'critical' });
    worst.data_reached = [{ name: 'vault', classification: 'restricted' }];
    expect(score(worst, RULESET, NOW)).toMatchObject({ raw: 106, score: 100, band: 'critical' });
  });

  it('a disabled factor contributes nothing and says what it would have', () => {
    const inputs = quiet();
    inputs.internet_exposure = 'public';
    const ruleset = RULESET.map((f) => (f.key === 'internet_exposure' ? { ...f, enabled: false } : f));
    const f = score(inputs, ruleset, NOW).factors.find((x) => x.key === 'internet_exposure')!;
    expect(f).toMatchObject({ enabled: false, contribution: 0, computed: 12 });
    expect(f.why).toMatch(/^Disabled for this organisation \(would contribute 12\)/);
  });

  it('a factor of the ruleset this version cannot evaluate contributes nothing', () => {
    const r = score(quiet(), [...RULESET, { key: 'future_factor', description: 'x', weight: 50, enabled: true, parameters: {} }], NOW);
    expect(r.factors.at(-1)).toMatchObject({ key: 'future_factor', contribution: 0 });
  });
});

describe('what-if', () => {
  it('applies every WhatIf field to a copy, leaving the inputs as they were', () => {
    const before = quiet();
    before.mcp_servers = [{ name: 'files', trust_state: 'unsigned' }];
    before.findings = { critical: 1, high: 0, medium: 0, low: 0, examples: ['critical x: y'] };
    before.detections = { window_days: 7, denied: 4, secret_detected: 0, poisoned_tools: none };
    before.identity = { workload_identities: 0, bindings: 3, unscoped_bindings: 3, shared_credentials: some('k') };
    before.data_reached = [{ name: 'vault', classification: 'restricted' }];
    const frozen = structuredClone(before);
    const { inputs, applied } = applyWhatIf(
      before,
      {
        internet_exposure: 'public',
        code_execution: 'sandboxed',
        approval_coverage: 'partial',
        persistent_memory: 'bounded',
        production: true,
        has_high_impact_tools: true,
        has_privileged_tools: true,
        has_write_tools: true,
        gateway_enforced: false,
        attestation_current: false,
        delegation_breadth: 'broad',
        max_data_classification: 'confidential',
        resolve_findings: true,
        clear_detections: true,
        approve_mcp_servers: true,
        use_scoped_identity: true,
      },
      NOW,
    );
    expect(before).toEqual(frozen);
    expect(applied).toHaveLength(16);
    const c = contributions(inputs);
    expect(c).toMatchObject({
      internet_exposure: 12,
      code_execution: 6,
      human_approval_coverage: 5,
      persistent_memory: 3,
      production_environment: 8,
      high_impact_tools: 10,
      privileged_tools: 10,
      write_tools: 5,
      gateway_enforcement: 10,
      owner_attestation: 6,
      delegation_breadth: 8,
      data_classification: 4,
      open_findings: 0,
      detections: 0,
      mcp_trust: 0,
      identity_scoping: 0,
    });
  });

  it('absent, null and false-by-default fields change nothing', () => {
    const inputs = quiet();
    const r = applyWhatIf(inputs, { internet_exposure: null, production: undefined, resolve_findings: false, clear_detections: false }, NOW);
    expect(r.applied).toEqual([]);
    expect(r.inputs).toEqual(inputs);
  });

  it('takes away what the agent has: tools, production, delegation, attestation', () => {
    const inputs = quiet();
    inputs.environment = 'production';
    inputs.tools.write = some('crm.update');
    inputs.delegations = { count: 5, principals: ['a'], groups_or_services: 1, wildcard_scopes: 0 };
    inputs.last_attested_at = null;
    const { inputs: next } = applyWhatIf(inputs, { production: false, has_write_tools: false, delegation_breadth: 'none', attestation_current: true }, NOW);
    expect(contributions(next)).toMatchObject({ production_environment: 0, write_tools: 0, delegation_breadth: 0, owner_attestation: 0 });
    expect(next.environment).toBe('development');
  });
});
