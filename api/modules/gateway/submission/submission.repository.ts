import { sql, type CompiledQuery, type Insertable, type QueryCreator } from 'kysely';
import { prepared, preparedShape, type Db, type Tx } from '../../../db/database.js';
import { insertAsJson, insertJsonRows, jsonRows } from '../../../db/json-rows.js';
import type { ActionRequestsTable, AgentSessionsTable, ApprovalsTable, DB } from '../../../db/schema.js';
import { alongside, chainedWrite, chainedWriteOf, headForUpdate, lockedHead, type Chained, type ChainHead } from '../../evidence/index.js';
import { notifyHoldersOf, type Notice } from '../../notifications/index.js';
import { insertTelemetry, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionRow } from '../actions.repository.js';
import type { DecisionColumns } from './records.js';
import type { SessionRow } from './sessions.js';

export interface ProbeRow {
  version: string | null;
  taken: string[] | null;
  head: ChainHead | null;
  /** The facts of the batch's sessions, as the probe's snapshot saw them (null: none stored, or not read). */
  sessions: SessionRow[] | null;
}

/**
 * The facts of the sessions `agentIds[i]`, `sessionKeys[i]`: a subquery of one JSON array, null when none
 * is stored. One primary-key lookup a pair (the `limit` keeps the planner from joining on the
 * organisation's prefix instead, which would read every session the organisation has whenever its
 * statistics say there are few).
 */
const sessionsOf = (orgId: unknown, agentIds: unknown, sessionKeys: unknown) => sql<SessionRow[] | null>`
  (select json_agg(json_build_object('agent_id', k.agent_id, 'session_key', k.session_key, 'facts', s.facts))
     from unnest(${agentIds}::uuid[], ${sessionKeys}::text[]) as k(agent_id, session_key)
     cross join lateral (
       select facts from agent_sessions
       where org_id = ${orgId} and agent_id = k.agent_id and session_key = k.session_key
       limit 1) s)`;

/**
 * One statement: the organisation's registry version, which of the batch's (agent, key) pairs are
 * already taken, with `lock` the evidence chain's head, locked for the transaction (null before the
 * organisation's first record), and the facts of `sessions` as they stand before the lock (the
 * decisions' record of them; flow rules read them again behind the lock: readSessions). Sent with the
 * batch's `begin`. Each pair is looked up on its own (a lateral lookup, one row at most) by the actions'
 * unique key: a plan made for no values in particular (kept, `prepared`) reads an index entry a pair,
 * where a join of the arrays with the actions could be planned as a read of the organisation's actions.
 */
export function probeQuery(
  db: Db,
  orgId: string,
  pairs: Array<{ agentId: string; key: string }>,
  lock: boolean,
  sessions: ReadonlyArray<{ agentId: string; session: string }>,
): CompiledQuery<ProbeRow> {
  const read = sessions.length > 0;
  const values = [orgId, pairs.map((p) => p.agentId), pairs.map((p) => p.key), ...(read ? [sessions.map((p) => p.agentId), sessions.map((p) => p.session)] : [])];
  return preparedShape(`probe ${lock ? 'lock' : ''} ${read ? 'sessions' : ''}`, values, ([org, agentIds, keys, sessionAgentIds, sessionKeys]) =>
    sql<ProbeRow>`
      select
        (select version from registry_versions where org_id = ${org}) as version,
        (select array_agg(k.agent_id || ' ' || k.key)
           from unnest(${agentIds}::uuid[], ${keys}::text[]) as k(agent_id, key)
           cross join lateral (
             select 1 from action_requests
             where org_id = ${org} and agent_id = k.agent_id and idempotency_key = k.key
             limit 1) a) as taken,
        ${lock ? headForUpdate(org as string) : sql`null`} as head,
        ${read ? sessionsOf(org, sessionAgentIds, sessionKeys) : sql`null`} as sessions`.compile(db),
  );
}

/**
 * The facts of `pairs`' sessions, read by a statement of their own: in a transaction holding the
 * organisation's chain head, every write of facts (made with the head's row, by batchWrite or
 * appendEvidence) is then either committed and seen, or waiting for this transaction.
 */
export async function readSessions(tx: Tx, orgId: string, pairs: ReadonlyArray<{ agentId: string; session: string }>): Promise<SessionRow[]> {
  if (pairs.length === 0) return [];
  const { rows } = await sql<{ sessions: SessionRow[] | null }>`select ${sessionsOf(orgId, pairs.map((p) => p.agentId), pairs.map((p) => p.session))} as sessions`.execute(tx);
  return rows[0]?.sessions ?? [];
}

/**
 * The sessions' new facts (what this transaction's allowed calls add), merged into what is stored by
 * merge_session_facts (migration 0021), so batches of one session written in any order add up.
 */
export function sessionsWrite(db: QueryCreator<DB>, rows: Insertable<AgentSessionsTable>[]) {
  return sessionsMerged(insertAsJson(db, 'agent_sessions', rows)!);
}

/** An insert of sessions' facts, merged into those stored (sessionsWrite). */
function sessionsMerged(insert: ReturnType<typeof insertJsonRows<'agent_sessions'>>) {
  return insert.onConflict((oc) =>
    oc.columns(['org_id', 'agent_id', 'session_key']).doUpdateSet({
      facts: sql`merge_session_facts(agent_sessions.facts, excluded.facts)`,
      last_at: sql`greatest(agent_sessions.last_at, excluded.last_at)`,
    }),
  );
}

/**
 * What the probe found. With `lock`, the head (created now, and locked, before the organisation's first
 * record: `created` says so, since a head row not yet committed cannot be handed over).
 */
export async function probed(tx: Tx, orgId: string, row: ProbeRow | undefined, lock: boolean) {
  return {
    version: row?.version ?? '0',
    taken: new Set(row?.taken ?? []),
    head: lock ? await lockedHead(tx, orgId, row?.head ?? null) : undefined,
    created: lock && !row?.head,
  };
}

/** The chain head, locked for the caller's transaction (created at genesis). */
export const lockHead = (tx: Tx, orgId: string) => lockedHead(tx, orgId, null);

/**
 * The batch's evidence (chained after the head the transaction holds, or after `unlockedAfter`, see
 * `chainedWrite`), its new actions, their approvals, the approvers' notices of them and its
 * redemptions' telemetry: one statement, compiled, which the batch sends with its `commit`.
 */
export function batchWrite(
  tx: Tx,
  orgId: string,
  chained: Chained,
  unlockedAfter: ChainHead | undefined,
  now: Date,
  actions: Insertable<ActionRequestsTable>[],
  approvals: Insertable<ApprovalsTable>[],
  telemetry: TelemetryEvent[] = [],
  notices: Notice[] = [],
  sessions: Insertable<AgentSessionsTable>[] = [],
): CompiledQuery {
  // Records, actions and sessions alone (the common batch) make a text that does not vary with the
  // batch's size: built once per shape (which columns the rows set, and whether the head is held).
  if (approvals.length + telemetry.length + notices.length === 0) {
    const records = jsonRows(chained.records);
    const acts = actions.length > 0 ? jsonRows(actions) : undefined;
    const facts = sessions.length > 0 ? jsonRows(sessions) : undefined;
    if (records && (actions.length === 0 || acts) && (sessions.length === 0 || facts)) {
      const shape = `batch ${unlockedAfter ? 'after' : 'held'} ${records.columns} ${acts?.columns ?? ''} ${facts?.columns ?? ''}`;
      const values = [orgId, records.document, acts?.document, facts?.document, chained.head.seq, chained.head.hash, unlockedAfter?.seq, unlockedAfter?.hash];
      return preparedShape(shape, values, ([org, recordsDoc, actionsDoc, factsDoc, seq, hash, afterSeq, afterHash]) =>
        chainedWriteOf(
          tx,
          org as string,
          (db) => insertJsonRows(db, 'evidence_records', records.columns, recordsDoc),
          { seq: seq as number, hash: hash as string },
          [
            ...(acts ? [alongside('actions', (db) => insertJsonRows(db, 'action_requests', acts.columns, actionsDoc, ACTION_JSON_TEXT))] : []),
            ...(facts ? [alongside('sessions', (db) => sessionsMerged(insertJsonRows(db, 'agent_sessions', facts.columns, factsDoc)))] : []),
          ],
          unlockedAfter && { seq: afterSeq as number, hash: afterHash as string },
        ),
      );
    }
  }
  const write = chainedWrite(
    tx,
    orgId,
    chained,
    [
      ...(actions.length > 0
        ? [alongside('actions', (db) => insertAsJson(db, 'action_requests', actions, ACTION_JSON_TEXT) ?? db.insertInto('action_requests').values(actions))]
        : []),
      ...(approvals.length > 0 ? [alongside('approvals', (db) => db.insertInto('approvals').values(approvals))] : []),
      ...(notices.length > 0 ? [alongside('notified', (db) => notifyHoldersOf(db, orgId, 'approval:decide', notices, now))] : []),
      ...(telemetry.length > 0 ? [alongside('telemetry', (db) => insertTelemetry(db, orgId, telemetry))] : []),
      ...(sessions.length > 0 ? [alongside('sessions', (db) => sessionsWrite(db, sessions))] : []),
    ],
    unlockedAfter,
  );
  return approvals.length + telemetry.length + notices.length === 0 ? prepared(write) : write;
}

/** The columns of an action row that hold JSON text (records.ts makes them with JSON.stringify). */
const ACTION_JSON_TEXT = ['parameters', 'trace', 'output_redacted'];

/** The action an agent submitted under `key`, locked. */
export function lockActionByKey(tx: Tx, orgId: string, agentId: string, key: string): Promise<ActionRow | undefined> {
  return tx
    .selectFrom('action_requests')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('idempotency_key', '=', key)
    .forUpdate()
    .executeTakeFirst();
}

export function actionById(tx: Tx, id: string): Promise<ActionRow> {
  return tx.selectFrom('action_requests').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

/** One new action, its approval and the approvers' notice of it. */
export async function insertAction(
  tx: Tx,
  action: Insertable<ActionRequestsTable>,
  approval: Insertable<ApprovalsTable> | undefined,
  notice: Notice | undefined,
  now: Date,
): Promise<void> {
  await tx.insertInto('action_requests').values(action).execute();
  if (approval) await tx.insertInto('approvals').values(approval).execute();
  if (notice) await notifyHoldersOf(tx, action.org_id, 'approval:decide', [notice], now).execute();
}

/**
 * Marks an approval's token used and sets the action's new decision (with `decision_ms` null: its first
 * decision's telemetry is no longer read from it); returns the action.
 */
export async function redeemAction(
  tx: Tx,
  approvalId: string,
  actionId: string,
  columns: DecisionColumns & { decision_ms: null },
  now: Date,
): Promise<ActionRow> {
  await tx.updateTable('approvals').set({ token_used_at: now }).where('id', '=', approvalId).execute();
  return tx.updateTable('action_requests').set(columns).where('id', '=', actionId).returningAll().executeTakeFirstOrThrow();
}
