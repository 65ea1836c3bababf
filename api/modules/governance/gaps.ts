import { requireControl, type Control } from './catalogue.js';
import type { TaskPriority } from './remediation.schemas.js';

/**
 * AI-system classification and the evidence gaps each class checks (docs/governance.md, Classification), as a pure
 * function of facts about one agent that systems.repository.ts gathers: the registry (owners, purpose, status,
 * gateway enforcement, attestation), the risk score, and the evidence chain over the window.
 */

export const AI_SYSTEM_CLASSES = ['unclassified', 'minimal', 'limited', 'high', 'prohibited'] as const;
export type AiSystemClass = (typeof AI_SYSTEM_CLASSES)[number];

/** An owner's attestation older than this is no longer current (the risk score's owner_attestation factor uses the same). */
export const ATTESTATION_MAX_AGE_DAYS = 90;

/** The priority of the tasks a classification opens, by class. */
export const GAP_PRIORITY: Readonly<Record<AiSystemClass, TaskPriority>> = {
  unclassified: 'low',
  minimal: 'low',
  limited: 'medium',
  high: 'high',
  prohibited: 'critical',
};

/** What the checks read about one agent. */
export interface AgentFacts {
  status: string;
  purpose: string;
  description: string;
  gateway_enforced: boolean;
  last_attested_at: Date | null;
  has_accountable_owner: boolean;
  has_risk_score: boolean;
  /** A `decision` evidence record about the agent in the window. */
  decided_in_window: boolean;
  /** An `approval` evidence record (a person's vote) about the agent in the window. */
  approved_in_window: boolean;
}

interface GapCheck {
  key: string;
  control: Control;
  classes: readonly AiSystemClass[];
  title: string;
  /** What closes the gap, for the task's description. */
  remedy: string;
  /** Why it is a gap for this agent, or null when the agent passes. */
  test(f: AgentFacts, ctx: { now: Date; windowDays: number }): string | null;
}

const DAY_MS = 86_400_000;
const lastDays = (n: number) => `the last ${n} day${n === 1 ? '' : 's'}`;

/** Every check, in the order gaps are listed; each names the control its task is about (one control per check). */
export const GAP_CHECKS: readonly GapCheck[] = [
  {
    key: 'prohibited_in_service',
    remedy: 'Suspend or revoke the agent (POST /agents/{id}/suspend or /revoke).',
    control: requireControl('eu-ai-act:Art.5'),
    classes: ['prohibited'],
    title: 'Prohibited system still in service',
    test: (f) => (f.status === 'active' ? 'the agent is classified prohibited but is active: suspend or revoke it' : null),
  },
  {
    key: 'accountable_owner',
    remedy: 'Add an owner of type accountable (POST /agents/{id}/owners).',
    control: requireControl('iso-42001:A.3'),
    classes: ['minimal', 'limited', 'high'],
    title: 'No accountable owner',
    test: (f) => (f.has_accountable_owner ? null : 'the agent has no owner of type accountable'),
  },
  {
    key: 'transparency',
    remedy: "State the agent's purpose and description (PATCH /agents/{id}).",
    control: requireControl('eu-ai-act:Art.13'),
    classes: ['limited', 'high'],
    title: 'Purpose and description not stated',
    test: (f) => {
      const missing = [f.purpose.trim() ? null : 'purpose', f.description.trim() ? null : 'description'].filter(Boolean);
      return missing.length ? `the agent's ${missing.join(' and ')} ${missing.length === 1 ? 'is' : 'are'} empty` : null;
    },
  },
  {
    key: 'owner_attestation',
    remedy: 'Have the owner attest the agent (POST /agents/{id}/attest).',
    control: requireControl('eu-ai-act:Art.11'),
    classes: ['high'],
    title: 'No current owner attestation',
    test: (f, { now }) => {
      if (!f.last_attested_at) return 'the owner never attested the agent';
      const days = Math.floor((now.getTime() - f.last_attested_at.getTime()) / DAY_MS);
      return days > ATTESTATION_MAX_AGE_DAYS ? `last attested ${days} days ago, more than ${ATTESTATION_MAX_AGE_DAYS}` : null;
    },
  },
  {
    key: 'risk_management',
    remedy: 'Have its risk score calculated (POST /risks/agents/{id}/recalculate).',
    control: requireControl('eu-ai-act:Art.9'),
    classes: ['high'],
    title: 'No risk score',
    test: (f) => (f.has_risk_score ? null : 'the agent has no risk score yet'),
  },
  {
    key: 'gateway_enforcement',
    remedy: 'Route its tool calls through the gateway and set gateway_enforced (PATCH /agents/{id}).',
    control: requireControl('eu-ai-act:Art.15'),
    classes: ['high'],
    title: 'Tool calls not enforced through the gateway',
    test: (f) => (f.gateway_enforced ? null : 'gateway_enforced is false: its tool calls may bypass the gateway'),
  },
  {
    key: 'record_keeping',
    remedy: 'Make its tool calls through the gateway, so that each decision is recorded.',
    control: requireControl('eu-ai-act:Art.12'),
    classes: ['high'],
    title: 'No decisions recorded',
    test: (f, { windowDays }) => (f.decided_in_window ? null : `no gateway decision about the agent in ${lastDays(windowDays)}`),
  },
  {
    key: 'human_oversight',
    remedy: "Have a policy require a person's approval for its consequential calls, and decide them.",
    control: requireControl('eu-ai-act:Art.14'),
    classes: ['high'],
    title: 'No human-oversight evidence',
    test: (f, { windowDays }) => (f.approved_in_window ? null : `no approval decided by a person for the agent in ${lastDays(windowDays)}`),
  },
];

export interface Gap {
  key: string;
  control: Control;
  title: string;
  why: string;
  remedy: string;
}

/** The gaps `cls` shows for an agent with `facts`; none for unclassified. */
export function gapsFor(cls: AiSystemClass, facts: AgentFacts, ctx: { now: Date; windowDays: number }): Gap[] {
  const gaps: Gap[] = [];
  for (const check of GAP_CHECKS) {
    if (!check.classes.includes(cls)) continue;
    const why = check.test(facts, ctx);
    if (why) gaps.push({ key: check.key, control: check.control, title: check.title, why, remedy: check.remedy });
  }
  return gaps;
}
