import type { BindingView, DecisionInput, Snapshot, ToolView, TraceEntry } from './types.js';

/** What the steps build up while deciding one action. Local to one `decide` call. */
export interface DecisionContext {
  readonly input: DecisionInput;
  readonly snapshot: Snapshot;
  tool?: ToolView;
  binding?: BindingView;
  denies: string[];
  approvals: Array<{ reason: string; count: number }>;
  allows: string[];
  trace: TraceEntry[];
  /** Set by a step after which nothing else can change the outcome (unknown tool, contained agent). */
  stop: boolean;
}

export type Step = (ctx: DecisionContext) => void;

export function deny(ctx: DecisionContext, step: string, reason: string, detail?: Record<string, unknown>, stop = false): void {
  ctx.denies.push(reason);
  ctx.trace.push(detail ? { step, outcome: 'deny', reason, detail } : { step, outcome: 'deny', reason });
  if (stop) ctx.stop = true;
}

export function pass(ctx: DecisionContext, step: string, detail?: Record<string, unknown>): void {
  ctx.trace.push(detail ? { step, outcome: 'pass', detail } : { step, outcome: 'pass' });
}
