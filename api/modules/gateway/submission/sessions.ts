import type { Insertable } from 'kysely';
import type { AgentSessionsTable } from '../../../db/schema.js';
import { afterCall, factsFromJson, factsToJson, noFacts } from '../engine/session.js';
import type { SessionFacts, SessionView, Snapshot } from '../engine/types.js';
/** The caller of a decision, as far as its session goes (a Submitter). */
type InSession = { agentId: string; session?: string | null };

/** One session's facts as stored (agent_sessions). */
export interface SessionRow {
  agent_id: string;
  session_key: string;
  facts: unknown;
}

const pairKey = (agentId: string, session: string) => `${agentId} ${session}`;

/** The distinct (agent, session) pairs of `who`s, those with a session only. */
export function sessionPairs(who: Iterable<InSession>): Array<{ agentId: string; session: string }> {
  const pairs = new Map<string, { agentId: string; session: string }>();
  for (const w of who) if (w.session) pairs.set(pairKey(w.agentId, w.session), { agentId: w.agentId, session: w.session });
  return [...pairs.values()];
}

/**
 * The session facts of one transaction's decisions: those stored when it read them, brought forward by
 * each allowed call it decides (so a later call of the same session in the same batch sees the earlier
 * one), and what those calls add, written with the transaction (sessionsWrite merges it).
 */
export class SessionLedger {
  private readonly current = new Map<string, SessionFacts>();
  private readonly added = new Map<string, { agentId: string; session: string; facts: SessionFacts }>();

  constructor(stored: readonly SessionRow[] = []) {
    for (const row of stored) this.current.set(pairKey(row.agent_id, row.session_key), factsFromJson(row.facts));
  }

  /** The session of `who`'s call with its facts before it; null without a session (the console). */
  view(who: InSession): SessionView | null {
    if (!who.session) return null;
    return { id: who.session, facts: this.current.get(pairKey(who.agentId, who.session)) ?? noFacts() };
  }

  /** Counts an allowed call of `toolKey` (as `snapshot` has the tool) in `who`'s session. */
  called(who: InSession, toolKey: string, snapshot: Snapshot): void {
    if (!who.session) return;
    const tool = snapshot.tools[toolKey];
    const server = tool?.mcpServerId ? snapshot.mcpServers[tool.mcpServerId] : undefined;
    const key = pairKey(who.agentId, who.session);
    this.current.set(key, afterCall(this.current.get(key) ?? noFacts(), toolKey, tool, server));
    const added = this.added.get(key);
    this.added.set(key, { agentId: who.agentId, session: who.session, facts: afterCall(added?.facts ?? noFacts(), toolKey, tool, server) });
  }

  /** The rows to merge into agent_sessions: one per session an allowed call was counted in. */
  rows(orgId: string, now: Date): Insertable<AgentSessionsTable>[] {
    return [...this.added.values()].map((a) => ({
      org_id: orgId,
      agent_id: a.agentId,
      session_key: a.session,
      facts: factsToJson(a.facts),
      first_at: now,
      last_at: now,
    }));
  }
}
