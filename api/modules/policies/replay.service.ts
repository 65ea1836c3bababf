import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { ApiError, notFound, validationFailed } from '../../platform/errors.js';
import { audit } from '../audit/index.js';
import {
  compileRules,
  decide,
  decisionInput,
  InvalidPolicy,
  type AgentView,
  type CompiledRule,
  type DecisionSnapshots,
  type Effect,
  type SessionView,
  type Snapshot,
} from '../gateway/index.js';
import { getPolicy, getVersion, type PolicyRow } from './policies.repository.js';
import { parameterReads, readsLostValue, ReplayTally, storedParameters, type ParameterReads, type ReplayCounts } from './replay-tally.js';
import { agentsInWindow, countActions, fetchActions, insertReplay, latestReplays, openActions, type RecordedAction, type ReplayWindow } from './replay.repository.js';
import type { replayIn } from './replay.schemas.js';

/** How much one replay may cover (docs/policies.md, Replay). */
export interface ReplayLimits {
  /** Recorded decisions in one replay; above it the caller is asked for a narrower window. */
  maxDecisions: number;
  /** The longest window, in days. */
  maxWindowDays: number;
  /** Actions read and decided per round trip; the event loop serves other requests between pages. */
  pageSize: number;
}

export const REPLAY_LIMITS: ReplayLimits = { maxDecisions: 200_000, maxWindowDays: 92, pageSize: 2000 };

/**
 * Replays running at once in one API process, at most: each holds a transaction and most of a core for
 * seconds (100,000 decisions in about 2.5 s), so more would starve the process's other requests. A replay
 * over the bound answers 503 at once, and can be asked again when one has finished.
 */
export const MAX_CONCURRENT_REPLAYS = 2;
let running = 0;

/** Runs `replay` unless MAX_CONCURRENT_REPLAYS are running already (503). */
async function oneOfFew<T>(replay: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT_REPLAYS) {
    throw new ApiError('service_unavailable', `${MAX_CONCURRENT_REPLAYS} replays are running in this API process: ask again when one has finished.`);
  }
  running++;
  try {
    return await replay();
  } finally {
    running--;
  }
}

/** A replay's answer, as stored in `policy_replays.summary` and shown as a version's `latest_replay`. */
export interface ReplaySummary extends ReplayCounts {
  id: string;
  policy_id: string;
  version_number: number;
  window: { from: string; to: string };
  agent_id: string | null;
  /** The published version the replayed one was compared with (null: none published). */
  published_version: number | null;
  policy_status: 'active' | 'inactive';
  /** The policy is inactive: its replayed version was decided as if the policy were active. */
  replayed_as_active: boolean;
  requested_by: string | null;
  created_at: string;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** The window asked for, checked (422 validation_failed naming the field). */
function windowOf(body: z.output<typeof replayIn>, now: Date, limits: ReplayLimits): ReplayWindow {
  const from = new Date(body.from);
  const to = body.to ? new Date(body.to) : now;
  if (to.getTime() <= from.getTime()) {
    throw validationFailed([{ field: body.to ? 'to' : 'from', message: 'the window must end after it begins' }], 'The replay window must end after it begins.');
  }
  if (to.getTime() - from.getTime() > limits.maxWindowDays * DAY_MS) {
    throw validationFailed(
      [{ field: 'from', message: `a window spans at most ${limits.maxWindowDays} days` }],
      `A replay window spans at most ${limits.maxWindowDays} days: replay a narrower one.`,
    );
  }
  return { from, to, agentId: body.agent_id ?? null };
}

/** A version's rules compiled as its policy's, or 422 invalid_policy when the current operators refuse them. */
function compiledVersion(rules: unknown, policyKey: string): CompiledRule[] {
  try {
    return compileRules(rules as Parameters<typeof compileRules>[0], policyKey);
  } catch (err) {
    if (err instanceof InvalidPolicy) throw new ApiError('invalid_policy', `The version cannot be replayed: ${err.message}`, err.problems);
    throw err;
  }
}

/**
 * The rules in force with this policy's published rules replaced by the version's, in the same place
 * (policies are read in key order, and reason codes follow it); an inactive or unpublished policy's rules
 * are added where its key sorts.
 */
function withVersion(inForce: readonly CompiledRule[], policyKey: string, version: CompiledRule[]): CompiledRule[] {
  const out: CompiledRule[] = [];
  let placed = false;
  for (const r of inForce) {
    if (r.policy === policyKey) {
      if (!placed) out.push(...version);
      placed = true;
      continue;
    }
    if (!placed && r.policy !== undefined && r.policy > policyKey) {
      out.push(...version);
      placed = true;
    }
    out.push(r);
  }
  if (!placed) out.push(...version);
  return out;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

/** The facts a decision recorded (DecisionFacts, version 1), or null when it recorded none or something else. */
function recordedFacts(f: unknown): { agent: AgentView; session: SessionView | null } | null {
  if (!isObject(f) || f.v !== 1 || !isObject(f.agent)) return null;
  const s = f.session;
  // A session whose facts are not of the recorded shape reads as none rather than failing the replay.
  const session = isObject(s) && typeof s.id === 'string' && isObject(s.facts) && isObject(s.facts.tools) ? (s as unknown as SessionView) : null;
  return { agent: f.agent as unknown as AgentView, session };
}

/** One agent's registry as decisions read it now, with the rules in force and with the version's. */
interface AgentSnapshots {
  current: AgentView | undefined;
  inForce: Snapshot;
  replayed: Snapshot;
}

/**
 * Re-decides the recorded first decisions of the window twice on the same input, once with the rules in
 * force and once with the version's in place of its policy's published rules, on the current registry;
 * stores and answers the summary. Nothing else is written: no action, evidence, approval or execution.
 */
export async function replayVersion(
  db: Db,
  snapshots: DecisionSnapshots,
  req: RequestContext,
  actor: ActorPrincipal,
  policyId: string,
  number: number,
  body: z.output<typeof replayIn>,
  now: Date,
  limits: ReplayLimits = REPLAY_LIMITS,
): Promise<ReplaySummary> {
  const window = windowOf(body, now, limits);
  const orgId = actor.orgId;
  return oneOfFew(() => inScope(db, { orgId }, async (tx) => {
    const policy = await getPolicy(tx, orgId, policyId);
    if (!policy) throw notFound('No such policy.');
    const version = await getVersion(tx, orgId, policy.id, number);
    if (!version) throw notFound('No such version of this policy.');
    if (window.agentId) {
      const view = await snapshots.load(tx, orgId, [window.agentId]);
      if (!view.state(window.agentId, '').agent) throw notFound('No such agent.');
    }
    const found = await countActions(tx, orgId, window, limits.maxDecisions + 1);
    if (found > limits.maxDecisions) {
      throw validationFailed(
        [{ field: 'from', message: `the window holds more than ${limits.maxDecisions} decisions` }],
        `The window holds more than ${limits.maxDecisions} recorded decisions, the most one replay covers: replay a narrower window or one agent.`,
      );
    }
    const draft = compiledVersion(version.rules, policy.key);

    // The registry is read once: each agent's view is built once and reused for all its actions.
    const agentIds = found > 0 ? await agentsInWindow(tx, orgId, window) : [];
    const view = await snapshots.load(tx, orgId, agentIds);
    const inForceRules = view.state('', '').snapshot.rules;
    const replayedRules = withVersion(inForceRules, policy.key, draft);
    const agents = new Map<string, AgentSnapshots>();
    for (const id of agentIds) {
      const state = view.state(id, '');
      agents.set(id, { current: state.agent, inForce: state.snapshot, replayed: { ...state.snapshot, rules: replayedRules } });
    }
    const reads = parameterReads(inForceRules, replayedRules);
    const tally = new ReplayTally(policy.key);

    if (found > 0) {
      await openActions(tx, orgId, window);
      let page = fetchActions(tx, limits.pageSize);
      for (;;) {
        const rows = await page;
        if (rows.length === 0) break;
        // The next page is read while this one is decided.
        page = rows.length === limits.pageSize ? fetchActions(tx, limits.pageSize) : Promise.resolve([]);
        // Should deciding this page throw, the read ahead fails with the transaction: not an unhandled rejection.
        page.catch(() => undefined);
        for (const row of rows) replayOne(row, agents, reads, tally);
      }
    }

    const summary = summaryOf(randomUUID(), tally.result(), policy, number, window, actor, now);
    await insertReplay(tx, orgId, {
      id: summary.id,
      policy_id: policy.id,
      version_number: number,
      window_from: window.from,
      window_to: window.to,
      agent_id: window.agentId,
      summary,
      requested_by: actor.userId,
      created_at: now,
    });
    // Audited, not chained as evidence: a replay changes nothing in force (docs/decisions.md, D37).
    await audit(tx, req, orgId, {
      action: 'policy.replayed',
      targetType: 'policy',
      targetId: policy.id,
      details: {
        replay_id: summary.id,
        number,
        from: summary.window.from,
        to: summary.window.to,
        agent_id: window.agentId,
        replayed: summary.replayed,
        changed: summary.changed,
      },
    });
    return summary;
  }));
}

function replayOne(row: RecordedAction, agents: Map<string, AgentSnapshots>, reads: ParameterReads, tally: ReplayTally): void {
  const snapshots = agents.get(row.agent_id);
  const facts = recordedFacts(row.decision_facts);
  const agent = facts?.agent ?? snapshots?.current;
  if (!snapshots || !agent) {
    // An agent no longer in the registry, decided before its facts were kept: nothing to decide it as.
    tally.skip();
    return;
  }
  const stored = storedParameters(row.parameters);
  const input = decisionInput(
    agent,
    {
      tool: row.tool,
      operation: row.operation,
      target: row.target,
      parameters: stored.parameters,
      environment: row.environment,
      on_behalf_of: row.on_behalf_of,
      justification: row.justification,
    },
    { identityId: row.identity_id, now: row.created_at, approvalPresent: false, session: facts?.session ?? null },
  );
  tally.add({
    id: row.id,
    agentId: row.agent_id,
    tool: row.tool,
    createdAt: row.created_at,
    recorded: row.recorded as Effect,
    before: decide(input, snapshots.inForce),
    after: decide(input, snapshots.replayed),
    inexact: readsLostValue(reads, stored) || (row.recorded_codes?.includes('SECRET_DETECTED') ?? false),
    withoutFacts: facts === null,
  });
}

function summaryOf(
  id: string,
  counts: ReplayCounts,
  policy: PolicyRow,
  number: number,
  window: ReplayWindow,
  actor: ActorPrincipal,
  now: Date,
): ReplaySummary {
  return {
    id,
    policy_id: policy.id,
    version_number: number,
    window: { from: window.from.toISOString(), to: window.to.toISOString() },
    agent_id: window.agentId,
    published_version: policy.published_version,
    policy_status: policy.status as 'active' | 'inactive',
    replayed_as_active: policy.status !== 'active',
    requested_by: actor.userId,
    created_at: now.toISOString(),
    ...counts,
  };
}

/** The latest replay of each version of a policy, by version number. */
export async function latestReplaysOf(tx: Tx, orgId: string, policyId: string): Promise<Map<number, ReplaySummary>> {
  const rows = await latestReplays(tx, orgId, policyId);
  return new Map(rows.map((r) => [r.version_number, r.summary as ReplaySummary]));
}
