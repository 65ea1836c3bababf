import type { CompiledRule, Decision, Effect } from '../gateway/index.js';

/**
 * The pure half of policy replay (docs/policies.md, Replay): what a rule set reads of a request's
 * parameters, where a stored parameters object lost what the decision read, and the tally of two
 * decisions of each recorded action. No I/O, so it is tested without a database.
 */

/** What a rule set reads of `action.parameters`: everything, or these paths (dot-joined, '' never). */
export interface ParameterReads {
  all: boolean;
  /** Every path some rule reads, dot-joined. */
  paths: Set<string>;
  /** Every proper prefix of those paths: a redaction above a read path hides it too. */
  prefixes: Set<string>;
}

/**
 * The parameters a CEL expression reads. `action.parameters.a.b`, `action.amount` and `action.currency`
 * name their path; `action.parameters` used whole (indexed, passed to a function, compared) or the
 * `action` map indexed by a string reads everything, as far as this reading can tell.
 */
function celReads(expression: string, add: (path: string) => void): boolean {
  if (/\baction\s*\[/.test(expression)) return true;
  for (const m of expression.matchAll(/\baction\s*\.\s*(amount|currency)\b/g)) add(m[1]!);
  const re = /\baction\s*\.\s*parameters\b((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)/g;
  for (const m of expression.matchAll(re)) {
    const path = m[1]!.replace(/\s+/g, '').replace(/^\./, '');
    if (path === '') return true;
    add(path);
  }
  return false;
}

/** What the rules of one or more sets read of the parameters. */
export function parameterReads(...sets: ReadonlyArray<readonly CompiledRule[]>): ParameterReads {
  const reads: ParameterReads = { all: false, paths: new Set(), prefixes: new Set() };
  const add = (path: string) => {
    reads.paths.add(path);
    const parts = path.split('.');
    for (let i = 1; i < parts.length; i++) reads.prefixes.add(parts.slice(0, i).join('.'));
  };
  for (const rules of sets) {
    for (const rule of rules) {
      for (const c of rule.compiled) {
        if (c.op === 'cel') {
          if (typeof c.value === 'string' && celReads(c.value, add)) reads.all = true;
          continue;
        }
        const field = c.field ?? '';
        if (field === 'action.parameters') reads.all = true;
        else if (field.startsWith('action.parameters.')) add(field.slice('action.parameters.'.length));
        else if (field === 'action.amount') add('amount');
        else if (field === 'action.currency') add('currency');
      }
    }
  }
  return reads;
}

/** The marker `redact` (gateway/submission/execution.ts) leaves for the whole object under metadata_only. */
const isMetadataOnly = (p: Record<string, unknown>) => p.redacted === 'metadata_only' && Object.keys(p).length === 1;

/** The parameters as stored, made ready to decide on, and what was lost of them. */
export interface StoredParameters {
  parameters: Record<string, unknown>;
  /** Nothing of the parameters was kept (metadata_only retention). */
  withheld: boolean;
  /** A secret was masked: the inspection step saw a value that was not kept. */
  secret: boolean;
  /** Paths (dot-joined) of values a redaction changed. */
  redacted: string[];
}

const NOTHING_LOST: readonly string[] = [];

/**
 * Reads stored parameters: under metadata_only nothing is left to decide on, so they replay as `{}`; under
 * redacted_excerpts, strings holding `[redacted:...]` are what remains of a secret or an email address.
 */
export function storedParameters(stored: unknown): StoredParameters {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) {
    return { parameters: {}, withheld: false, secret: false, redacted: NOTHING_LOST as string[] };
  }
  const p = stored as Record<string, unknown>;
  if (isMetadataOnly(p)) return { parameters: {}, withheld: true, secret: false, redacted: NOTHING_LOST as string[] };
  let redacted: string[] | undefined;
  let secret = false;
  const walk = (v: unknown, path: string) => {
    if (typeof v === 'string') {
      if (v.includes('[redacted:')) {
        (redacted ??= []).push(path);
        if (v === '[redacted:secret]') secret = true;
      }
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) walk(v[i], path === '' ? String(i) : `${path}.${i}`);
    } else if (v !== null && typeof v === 'object') {
      for (const k in v) if (Object.hasOwn(v, k)) walk((v as Record<string, unknown>)[k], path === '' ? k : `${path}.${k}`);
    }
  };
  walk(p, '');
  return { parameters: p, withheld: false, secret, redacted: redacted ?? (NOTHING_LOST as string[]) };
}

/** A rule of the compared sets read a value the stored parameters no longer hold. */
export function readsLostValue(reads: ParameterReads, stored: StoredParameters): boolean {
  if (stored.secret) return true;
  if (stored.withheld) return reads.all || reads.paths.size > 0;
  if (stored.redacted.length === 0) return false;
  if (reads.all) return true;
  for (const path of stored.redacted) {
    if (reads.paths.has(path) || reads.prefixes.has(path)) return true;
    // A rule reading an object above the redacted value reads it too.
    for (let dot = path.lastIndexOf('.'); dot > 0; dot = path.lastIndexOf('.', dot - 1)) {
      if (reads.paths.has(path.slice(0, dot))) return true;
    }
  }
  return false;
}

/** One recorded action replayed: its two decisions and what the record says. */
export interface Replayed {
  id: string;
  agentId: string;
  tool: string;
  createdAt: Date;
  /** The recorded first decision. */
  recorded: Effect;
  before: Decision;
  after: Decision;
  inexact: boolean;
  withoutFacts: boolean;
}

export interface RuleDifference {
  source: 'version' | 'published';
  rule_id: string;
  effect: Effect;
  reason_code: string;
  decisions_changed: number;
  reason_codes_changed: number;
}

export interface ReplayExample {
  action_id: string;
  agent_id: string;
  tool: string;
  created_at: string;
  recorded: Effect;
  from: Effect;
  to: Effect;
  reason_codes_before: string[];
  reason_codes_after: string[];
  inexact: boolean;
}

/** The counts and lists a replay answers with (docs/policies.md, Replay). */
export interface ReplayCounts {
  replayed: number;
  changed: number;
  reason_codes_changed: number;
  unchanged: number;
  drift: number;
  inexact: number;
  without_facts: number;
  skipped: number;
  transitions: Array<{ from: Effect; to: Effect; count: number }>;
  drift_transitions: Array<{ from: Effect; to: Effect; count: number }>;
  by_rule: RuleDifference[];
  agents_changed: number;
  by_agent: Array<{ agent_id: string; replayed: number; changed: number; reason_codes_changed: number }>;
  examples: ReplayExample[];
}

export const MAX_EXAMPLES = 50;
export const MAX_AGENTS_LISTED = 100;

const sameCodes = (a: string[], b: string[]) => {
  if (a.length !== b.length) return false;
  for (const code of a) if (!b.includes(code)) return false;
  return true;
};

/** The policy's rules that matched, from a decision's trace (`policy` steps name their policy). */
function hitsOf(decision: Decision, policyKey: string): Array<{ id: string; effect: Effect; reason: string }> {
  const hits: Array<{ id: string; effect: Effect; reason: string }> = [];
  for (const t of decision.trace) {
    if (t.step !== 'policy' || t.outcome === 'skip' || t.outcome === 'pass' || t.detail?.policy !== policyKey) continue;
    hits.push({ id: String(t.detail.rule_id), effect: t.outcome, reason: t.reason ?? '' });
  }
  return hits;
}

const transitionKey = (from: Effect, to: Effect) => `${from}>${to}`;
const transitionList = (m: Map<string, number>) =>
  [...m]
    .map(([k, count]) => {
      const [from, to] = k.split('>') as [Effect, Effect];
      return { from, to, count };
    })
    .sort((a, b) => b.count - a.count || a.from.localeCompare(b.from) || a.to.localeCompare(b.to));

/**
 * The running tally of one replay. `before` is the decision with the rules in force, `after` with the
 * version replayed; the rules that made a difference are this policy's rules that matched on one side
 * and not the other (the rest of the two sets is the same).
 */
export class ReplayTally {
  private readonly c = { replayed: 0, changed: 0, reason_codes_changed: 0, drift: 0, inexact: 0, without_facts: 0, skipped: 0 };
  private readonly transitions = new Map<string, number>();
  private readonly drifts = new Map<string, number>();
  private readonly rules = new Map<string, RuleDifference>();
  private readonly agents = new Map<string, { replayed: number; changed: number; reason_codes_changed: number }>();
  private readonly examples: ReplayExample[] = [];

  constructor(
    private readonly policyKey: string,
    private readonly maxExamples = MAX_EXAMPLES,
  ) {}

  skip(): void {
    this.c.skipped++;
  }

  add(r: Replayed): void {
    const c = this.c;
    c.replayed++;
    if (r.inexact) c.inexact++;
    if (r.withoutFacts) c.without_facts++;
    const { before, after } = r;
    if (before.decision !== r.recorded) {
      c.drift++;
      const k = transitionKey(r.recorded, before.decision);
      this.drifts.set(k, (this.drifts.get(k) ?? 0) + 1);
    }
    let agent = this.agents.get(r.agentId);
    if (!agent) this.agents.set(r.agentId, (agent = { replayed: 0, changed: 0, reason_codes_changed: 0 }));
    agent.replayed++;
    const decisionChanged = before.decision !== after.decision;
    if (!decisionChanged && sameCodes(before.reasonCodes, after.reasonCodes)) return;
    if (decisionChanged) {
      c.changed++;
      agent.changed++;
      const k = transitionKey(before.decision, after.decision);
      this.transitions.set(k, (this.transitions.get(k) ?? 0) + 1);
    } else {
      c.reason_codes_changed++;
      agent.reason_codes_changed++;
    }
    this.attribute(r, decisionChanged);
    if (this.examples.length < this.maxExamples) {
      this.examples.push({
        action_id: r.id,
        agent_id: r.agentId,
        tool: r.tool,
        created_at: r.createdAt.toISOString(),
        recorded: r.recorded,
        from: before.decision,
        to: after.decision,
        reason_codes_before: before.reasonCodes,
        reason_codes_after: after.reasonCodes,
        inexact: r.inexact,
      });
    }
  }

  private attribute(r: Replayed, decisionChanged: boolean): void {
    const published = hitsOf(r.before, this.policyKey);
    const version = hitsOf(r.after, this.policyKey);
    const count = (source: RuleDifference['source'], h: { id: string; effect: Effect; reason: string }) => {
      const key = `${source}\u0000${h.id}\u0000${h.effect}\u0000${h.reason}`;
      let d = this.rules.get(key);
      if (!d) {
        d = { source, rule_id: h.id, effect: h.effect, reason_code: h.reason, decisions_changed: 0, reason_codes_changed: 0 };
        this.rules.set(key, d);
      }
      if (decisionChanged) d.decisions_changed++;
      else d.reason_codes_changed++;
    };
    const same = (a: { id: string; effect: Effect; reason: string }, b: { id: string; effect: Effect; reason: string }) =>
      a.id === b.id && a.effect === b.effect && a.reason === b.reason;
    for (const h of published) if (!version.some((v) => same(v, h))) count('published', h);
    for (const h of version) if (!published.some((p) => same(p, h))) count('version', h);
  }

  /** The counts and lists, ordered most changes first. */
  result(): ReplayCounts {
    const c = this.c;
    const agents = [...this.agents].filter(([, a]) => a.changed + a.reason_codes_changed > 0);
    return {
      ...c,
      unchanged: c.replayed - c.changed - c.reason_codes_changed,
      transitions: transitionList(this.transitions),
      drift_transitions: transitionList(this.drifts),
      by_rule: [...this.rules.values()].sort(
        (a, b) => b.decisions_changed - a.decisions_changed || b.reason_codes_changed - a.reason_codes_changed || a.source.localeCompare(b.source) || a.rule_id.localeCompare(b.rule_id),
      ),
      agents_changed: agents.length,
      by_agent: agents
        .map(([agent_id, a]) => ({ agent_id, ...a }))
        .sort((a, b) => b.changed - a.changed || b.reason_codes_changed - a.reason_codes_changed || a.agent_id.localeCompare(b.agent_id))
        .slice(0, MAX_AGENTS_LISTED),
      examples: this.examples,
    };
  }
}
