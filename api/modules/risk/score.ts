import type {
  AGENT_STATUS,
  CLASSIFICATION,
  CODE_EXECUTION,
  ENVIRONMENT,
  HUMAN_APPROVAL_COVERAGE,
  INTERNET_EXPOSURE,
  MCP_TRUST_STATE,
  PERSISTENT_MEMORY,
  RISK_BAND,
} from '../shared/index.js';

/**
 * The Agent Risk Score as a pure function: `score(inputs, ruleset, now)` reads nothing but its arguments.
 * Recalculation (the job and POST .../recalculate), what-if and the benchmark all call it; the repository gathers
 * the inputs, the ruleset is data (table risk_factors with the organisation's overrides). docs/risk-and-graph.md
 * explains every factor.
 */

export type Classification = (typeof CLASSIFICATION)[number];
export type Band = (typeof RISK_BAND)[number];
export type TrustState = (typeof MCP_TRUST_STATE)[number];

/** How widely an agent acts for people (Tollgate's values; the spec names the WhatIf field only). */
export const DELEGATION_BREADTH = ['none', 'narrow', 'broad'] as const;
export type DelegationBreadth = (typeof DELEGATION_BREADTH)[number];

/** A group of things counted by a factor: how many, and up to EXAMPLES of their names for the `why`. */
export interface Counted {
  count: number;
  examples: string[];
}

/** How many names a Counted keeps: enough to explain, bounded for agents with thousands of bindings. */
export const EXAMPLES = 10;

/** What the score of one agent is computed from: facts gathered from the registry, JSON all the way down. */
export interface RiskInputs {
  environment: (typeof ENVIRONMENT)[number];
  internet_exposure: (typeof INTERNET_EXPOSURE)[number];
  code_execution: (typeof CODE_EXECUTION)[number];
  persistent_memory: (typeof PERSISTENT_MEMORY)[number];
  human_approval_coverage: (typeof HUMAN_APPROVAL_COVERAGE)[number];
  gateway_enforced: boolean;
  status: (typeof AGENT_STATUS)[number];
  gateway_access: boolean;
  /** ISO time, or null when never attested. */
  last_attested_at: string | null;
  /** The agent's own data classification. */
  data_classification: Classification;
  /** Data resources its bindings reach (directly, or as the data resource of a granted tool), with their classification. */
  data_reached: Array<{ name: string; classification: Classification }>;
  /** Tools it may call (live bindings on the tool or its MCP server; not blocked, class not denied), by class. */
  tools: { write: Counted; high_impact: Counted; privileged: Counted; read: Counted; excluded: Counted };
  /** MCP servers whose tools it is granted. */
  mcp_servers: Array<{ name: string; trust_state: TrustState }>;
  /** Live delegations (unexpired). */
  delegations: { count: number; principals: string[]; groups_or_services: number; wildcard_scopes: number };
  identity: { workload_identities: number; bindings: number; unscoped_bindings: number; shared_credentials: Counted };
  /** Open or in-progress findings about it or a granted tool, tool poisoning excepted, by severity. */
  findings: { critical: number; high: number; medium: number; low: number; examples: string[] };
  detections: { window_days: number; denied: number; secret_detected: number; poisoned_tools: Counted };
}

/** One factor of the ruleset as the organisation sees it: the global default with its override applied. */
export interface Factor {
  key: string;
  description: string;
  weight: number;
  enabled: boolean;
  parameters: Record<string, unknown>;
}

export interface FactorResult {
  key: string;
  description: string;
  weight: number;
  enabled: boolean;
  /** Points added to (negative: taken from) the total; 0 when disabled. */
  contribution: number;
  /** What the factor would contribute if enabled: equal to `contribution` when it is. */
  computed: number;
  /** The facts used, in words. */
  why: string;
}

export interface ScoreResult {
  /** 0-100: the sum of contributions, bounded. */
  score: number;
  band: Band;
  /** The sum of contributions before bounding. */
  raw: number;
  factors: FactorResult[];
}

/** Band thresholds: the lowest score of each band. */
export const BANDS: ReadonlyArray<{ band: Band; from: number }> = [
  { band: 'critical', from: 75 },
  { band: 'high', from: 50 },
  { band: 'medium', from: 25 },
  { band: 'low', from: 0 },
];

export function bandOf(score: number): Band {
  return BANDS.find((b) => score >= b.from)!.band;
}

const CLASSIFICATION_ORDER: readonly Classification[] = ['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'];
const DAY_MS = 86_400_000;

/** The most sensitive classification among the agent's own and the data it reaches. */
export function maxClassification(inputs: Pick<RiskInputs, 'data_classification' | 'data_reached'>): Classification {
  let max = CLASSIFICATION_ORDER.indexOf(inputs.data_classification);
  for (const d of inputs.data_reached) max = Math.max(max, CLASSIFICATION_ORDER.indexOf(d.classification));
  return CLASSIFICATION_ORDER[Math.max(0, max)]!;
}

/** Breadth of delegation from the live delegations (narrow: up to `narrowMax` people, no group, no wildcard). */
export function delegationBreadth(d: RiskInputs['delegations'], narrowMax: number): DelegationBreadth {
  if (d.count === 0) return 'none';
  if (d.count > narrowMax || d.groups_or_services > 0 || d.wildcard_scopes > 0) return 'broad';
  return 'narrow';
}

/** What an evaluator answers: points before the factor's enabled switch, and why. */
interface Evaluation {
  points: number;
  why: string;
}

type Evaluator = (inputs: RiskInputs, weight: number, params: Record<string, unknown>, now: Date) => Evaluation;

const num = (v: unknown, fallback: number) => (typeof v === 'number' && Number.isFinite(v) ? v : fallback);
const table = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const scaled = (weight: number, level: number) => Math.round(weight * level);
const capped = (weight: number, points: number) => (weight >= 0 ? Math.min(weight, points) : Math.max(weight, -points));
const names = (c: Counted) => (c.count === 0 ? '' : `${c.examples.join(', ')}${c.count > c.examples.length ? ` and ${c.count - c.examples.length} more` : ''}`);
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** A factor whose value is one of a few levels of an enumerated attribute. */
function levels<K extends keyof RiskInputs>(attribute: K, share: Record<string, number>, label: string): Evaluator {
  return (inputs, weight) => {
    const value = String(inputs[attribute]);
    const level = share[value] ?? 0;
    return { points: scaled(weight, level), why: `${label} is ${value}${level > 0 && level < 1 ? ` (counts ${level === 0.5 ? 'half' : `${level * 100}%`})` : ''}.` };
  };
}

function tools(group: 'write' | 'high_impact' | 'privileged', what: string): Evaluator {
  return (inputs, weight) => {
    const g = inputs.tools[group];
    if (g.count === 0) return { points: 0, why: `No ${what} granted.` };
    return { points: weight, why: `Granted ${plural(g.count, `${what.replace(/s$/, '')}`, what)}: ${names(g)}.` };
  };
}

/** Every factor the code knows, by key. A key of the ruleset without an evaluator contributes nothing. */
export const EVALUATORS: Readonly<Record<string, Evaluator>> = {
  internet_exposure: levels('internet_exposure', { public: 1, controlled: 0.5 }, 'Internet exposure'),
  code_execution: levels('code_execution', { privileged: 1, sandboxed: 0.5 }, 'Code execution'),
  persistent_memory: levels('persistent_memory', { unbounded: 1, bounded: 0.5 }, 'Persistent memory'),
  human_approval_coverage: levels('human_approval_coverage', { none: 1, partial: 0.5 }, 'Human approval coverage'),
  production_environment: levels('environment', { production: 1, staging: 0.25 }, 'Environment'),

  data_classification(inputs, weight, params) {
    const max = maxClassification(inputs);
    const level = num(table(params.levels)[max], CLASSIFICATION_ORDER.indexOf(max) / 5);
    const reached = inputs.data_reached.filter((d) => d.classification === max).map((d) => d.name);
    const source =
      inputs.data_classification === max
        ? `its own classification${reached.length ? ` and ${reached.slice(0, EXAMPLES).join(', ')}` : ''}`
        : `data it reaches: ${reached.slice(0, EXAMPLES).join(', ')}`;
    return { points: scaled(weight, level), why: `Most sensitive data reached is ${max} (${source}); ${inputs.data_reached.length} data resources reached.` };
  },

  write_tools: tools('write', 'write tools'),
  high_impact_tools: tools('high_impact', 'destructive or financial tools'),
  privileged_tools: tools('privileged', 'admin tools'),

  delegation_breadth(inputs, weight, params) {
    const d = inputs.delegations;
    const breadth = delegationBreadth(d, num(params.narrow_max, 2));
    if (breadth === 'none') return { points: 0, why: 'Acts for no one: no live delegation.' };
    const detail = [
      plural(d.count, 'live delegation'),
      d.groups_or_services ? `${d.groups_or_services} to a group or service` : '',
      d.wildcard_scopes ? `${d.wildcard_scopes} with a wildcard scope` : '',
    ].filter(Boolean);
    const who = d.principals.length ? ` (${d.principals.slice(0, EXAMPLES).join(', ')}${d.count > EXAMPLES ? ', …' : ''})` : '';
    return { points: scaled(weight, breadth === 'broad' ? 1 : 0.5), why: `Delegation is ${breadth}: ${detail.join(', ')}${who}.` };
  },

  gateway_enforcement(inputs, weight) {
    return inputs.gateway_enforced
      ? { points: 0, why: 'Its tool calls are enforced through the gateway.' }
      : { points: weight, why: 'gateway_enforced is false: its tool calls may bypass the gateway.' };
  },

  owner_attestation(inputs, weight, params, now) {
    const maxAge = num(params.max_age_days, 90);
    if (!inputs.last_attested_at) return { points: weight, why: 'The owner never attested the agent.' };
    const days = Math.floor((now.getTime() - new Date(inputs.last_attested_at).getTime()) / DAY_MS);
    return days > maxAge
      ? { points: weight, why: `Last attested ${days} days ago, more than ${maxAge}.` }
      : { points: 0, why: `Attested ${days} days ago (current up to ${maxAge}).` };
  },

  open_findings(inputs, weight, params) {
    const f = inputs.findings;
    const points = table(params.points);
    const severities = ['critical', 'high', 'medium', 'low'] as const;
    const total = severities.reduce((sum, s) => sum + f[s] * num(points[s], 0), 0);
    const count = severities.reduce((sum, s) => sum + f[s], 0);
    if (count === 0) return { points: 0, why: 'No open finding about it or a tool it is granted.' };
    const bySeverity = severities.filter((s) => f[s] > 0).map((s) => `${f[s]} ${s}`).join(', ');
    return {
      points: capped(weight, total),
      why: `${plural(count, 'open finding')} (${bySeverity}) worth ${total} points${total > weight ? `, capped at ${weight}` : ''}: ${f.examples.join('; ')}.`,
    };
  },

  detections(inputs, weight, params) {
    const d = inputs.detections;
    const total =
      (d.denied - d.secret_detected) * num(params.per_denial, 2) +
      d.secret_detected * num(params.per_secret_detection, 5) +
      d.poisoned_tools.count * num(params.per_poisoned_tool, 8);
    if (total === 0) return { points: 0, why: `No denied decision in the last ${d.window_days} days and no poisoned tool granted.` };
    const parts = [
      d.denied ? `${plural(d.denied, 'denied decision')} in the last ${d.window_days} days${d.secret_detected ? ` (${d.secret_detected} for secret material)` : ''}` : '',
      d.poisoned_tools.count ? `${plural(d.poisoned_tools.count, 'granted tool')} with an open tool-poisoning finding: ${names(d.poisoned_tools)}` : '',
    ].filter(Boolean);
    return { points: capped(weight, total), why: `${parts.join('; ')}; worth ${total} points${total > weight ? `, capped at ${weight}` : ''}.` };
  },

  mcp_trust(inputs, weight, params) {
    const points = table(params.points);
    const untrusted = inputs.mcp_servers.filter((s) => num(points[s.trust_state], 0) !== 0);
    if (inputs.mcp_servers.length === 0) return { points: 0, why: 'Granted no tool of an MCP server.' };
    if (untrusted.length === 0) return { points: 0, why: `Every MCP server it uses is approved (${inputs.mcp_servers.map((s) => s.name).join(', ')}).` };
    const total = untrusted.reduce((sum, s) => sum + num(points[s.trust_state], 0), 0);
    const each = untrusted.map((s) => `${s.name} ${s.trust_state} +${num(points[s.trust_state], 0)}`).join(', ');
    return { points: capped(weight, total), why: `MCP servers not approved: ${each}${total > weight ? ` (capped at ${weight})` : ''}.` };
  },

  identity_scoping(inputs, weight) {
    const i = inputs.identity;
    const gaps = [
      i.workload_identities === 0 ? 'no workload identity of its own' : '',
      i.unscoped_bindings > 0 ? `${i.unscoped_bindings} of ${plural(i.bindings, 'binding')} not tied to one of its identities` : '',
      i.shared_credentials.count > 0 ? `its tools use shared credential references (${names(i.shared_credentials)})` : '',
    ].filter(Boolean);
    if (gaps.length === 0) return { points: 0, why: 'Its own workload identity, bindings tied to it, no shared credential.' };
    return { points: scaled(weight, gaps.length / 3), why: `${gaps.join('; ')}.` };
  },

  containment(inputs, weight) {
    const contained = inputs.status !== 'active' || !inputs.gateway_access;
    if (!contained) return { points: 0, why: 'Active, with gateway access.' };
    const how = inputs.status !== 'active' ? `Agent is ${inputs.status}` : 'Gateway access is switched off';
    return { points: weight, why: `${how}: it cannot act.` };
  },
};

/** The Agent Risk Score of one agent: every factor of the ruleset in order, its contribution and why; total, band. */
export function score(inputs: RiskInputs, ruleset: readonly Factor[], now: Date): ScoreResult {
  const factors = ruleset.map((f): FactorResult => {
    const evaluate = EVALUATORS[f.key];
    const e = evaluate ? evaluate(inputs, f.weight, f.parameters, now) : { points: 0, why: 'This version of Tollgate has no evaluator for this factor.' };
    const why = f.enabled ? e.why : `Disabled for this organisation (would contribute ${e.points}). ${e.why}`;
    return { key: f.key, description: f.description, weight: f.weight, enabled: f.enabled, contribution: f.enabled ? e.points : 0, computed: e.points, why };
  });
  const raw = factors.reduce((sum, f) => sum + f.contribution, 0);
  const total = Math.max(0, Math.min(100, raw));
  return { score: total, band: bandOf(total), raw, factors };
}
