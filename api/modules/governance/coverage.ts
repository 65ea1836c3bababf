import type { Condition, Control, Framework } from './catalogue.js';
import { canonicalize } from '../../../lib/canonical-json.js';

/**
 * Coverage and readiness (docs/governance.md, Coverage and readiness) as a pure function of facts the service
 * gathers in one transaction: which mapped evidence exists in the window, which remediation tasks are open, which
 * exceptions are in force. Nothing here reads the database or the clock.
 */

/** One control's standing over a window. */
export interface ControlStatus {
  id: string;
  ref: string;
  title: string;
  status: 'met' | 'excepted' | 'not_met';
  /** In words: the evidence found, the exception that covers it, the open task, or the evidence missing. */
  why: string;
}

/** One framework's coverage over a window: what GET /governance/frameworks answers and reports print. */
export interface FrameworkCoverage {
  key: string;
  name: string;
  version: string;
  controls_total: number;
  controls_met: number;
  controls_excepted: number;
  controls_not_met: number;
  /** 0-100, one decimal: (met + excepted) / total. */
  coverage_percent: number;
  /** `ready`: no control not met; `partial`: at least half covered; `not_ready`: less than half. */
  readiness: 'ready' | 'partial' | 'not_ready';
  window_days: number;
  since: string;
  until: string;
  /** Every not_met control, with why. */
  failing_controls: ControlStatus[];
  controls: ControlStatus[];
}

/** What counts as evidence for a control: a type, and what the record's payload must contain. */
export interface EvidenceProbe {
  evidence_event_type: string;
  condition: Condition | null;
}

/** The same probe, whichever mapping states it and in whichever key order: the key of `CoverageFacts.found`. */
export const probeKey = (p: EvidenceProbe) => `${p.evidence_event_type}\n${p.condition ? canonicalize(p.condition) : ''}`;

/** A probe in words: `decision`, or `decision with {"decision":"deny"}`. */
export const describeProbe = (p: EvidenceProbe) => (p.condition ? `${p.evidence_event_type} with ${JSON.stringify(p.condition)}` : p.evidence_event_type);

export interface TaskRef {
  id: string;
  title: string;
}

export interface ExceptionRef {
  id: string;
  title: string;
  expires_at: Date;
}

/** The facts coverage is decided on, gathered in one transaction. */
export interface CoverageFacts {
  windowDays: number;
  /** Probe keys (probeKey) with at least one record in the window. */
  found: ReadonlySet<string>;
  /** Open or in-progress remediation tasks, by control id (any agent's, or none). */
  openTasks: ReadonlyMap<string, TaskRef[]>;
  /** Approved exceptions in force for the whole organisation (no agent), by control id. */
  exceptions: ReadonlyMap<string, ExceptionRef[]>;
}

const listed = (items: string[], max = 3) =>
  items.length <= max ? items.join(', ') : `${items.slice(0, max).join(', ')} and ${items.length - max} more`;

const either = (items: string[]) => (items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`);

/**
 * A control's status. In this order: an open or in-progress remediation task on it makes it not met (someone has
 * said it is not); otherwise mapped evidence in the window makes it met; otherwise an approved exception in force
 * makes it excepted; otherwise it is not met for want of evidence.
 */
export function controlStatus(control: Control, probes: EvidenceProbe[], facts: CoverageFacts): ControlStatus {
  const base = { id: control.id, ref: control.ref, title: control.title };
  const days = `the last ${facts.windowDays} day${facts.windowDays === 1 ? '' : 's'}`;
  const tasks = facts.openTasks.get(control.id) ?? [];
  if (tasks.length > 0) {
    const named = listed(tasks.map((t) => `"${t.title}" (${t.id})`));
    return { ...base, status: 'not_met', why: `open remediation task${tasks.length === 1 ? '' : 's'} ${named}` };
  }
  const found = probes.filter((p) => facts.found.has(probeKey(p)));
  if (found.length > 0) return { ...base, status: 'met', why: `evidence in ${days}: ${listed(found.map(describeProbe), 5)}` };
  const missing = probes.length === 0 ? 'no evidence is mapped to this control' : `no evidence of ${either(probes.map(describeProbe))} in ${days}`;
  const exception = [...(facts.exceptions.get(control.id) ?? [])].sort((a, b) => b.expires_at.getTime() - a.expires_at.getTime())[0];
  if (exception) {
    return {
      ...base,
      status: 'excepted',
      why: `${missing}; covered by exception "${exception.title}" (${exception.id}) until ${exception.expires_at.toISOString()}`,
    };
  }
  return { ...base, status: 'not_met', why: missing };
}

/** The readiness rule (docs/governance.md): ready with nothing not met, partial from half covered, else not ready. */
export function readinessOf(notMet: number, coveragePercent: number): FrameworkCoverage['readiness'] {
  if (notMet === 0) return 'ready';
  return coveragePercent >= 50 ? 'partial' : 'not_ready';
}

/** One framework's coverage from its controls' statuses. */
export function frameworkCoverage(
  framework: Pick<Framework, 'key' | 'name' | 'version'>,
  controls: ControlStatus[],
  window: { days: number; since: Date; until: Date },
): FrameworkCoverage {
  const count = (s: ControlStatus['status']) => controls.filter((c) => c.status === s).length;
  const met = count('met');
  const excepted = count('excepted');
  const notMet = count('not_met');
  const coverage = controls.length === 0 ? 0 : Math.round(((met + excepted) / controls.length) * 1000) / 10;
  return {
    key: framework.key,
    name: framework.name,
    version: framework.version,
    controls_total: controls.length,
    controls_met: met,
    controls_excepted: excepted,
    controls_not_met: notMet,
    coverage_percent: coverage,
    readiness: readinessOf(notMet, coverage),
    window_days: window.days,
    since: window.since.toISOString(),
    until: window.until.toISOString(),
    failing_controls: controls.filter((c) => c.status === 'not_met'),
    controls,
  };
}
