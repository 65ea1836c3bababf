import { sql, type CompiledQuery, type Insertable } from 'kysely';
import { prepared, type Db, type Tx } from '../../../db/database.js';
import { insertAsJson } from '../../../db/json-rows.js';
import type { ActionRequestsTable, ApprovalsTable } from '../../../db/schema.js';
import { alongside, chainedWrite, headForUpdate, lockedHead, type Chained, type ChainHead } from '../../evidence/index.js';
import { notifyHoldersOf, type Notice } from '../../notifications/index.js';
import { insertTelemetry, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionRow } from '../actions.repository.js';
import type { DecisionColumns } from './records.js';

export interface ProbeRow {
  version: string | null;
  taken: string[] | null;
  head: ChainHead | null;
}

/**
 * One statement: the organisation's registry version, which of the batch's (agent, key) pairs are
 * already taken, and, with `lock`, the evidence chain's head, locked for the transaction (null before the
 * organisation's first record). Sent with the batch's `begin`.
 */
export function probeQuery(db: Db, orgId: string, pairs: Array<{ agentId: string; key: string }>, lock: boolean): CompiledQuery<ProbeRow> {
  return prepared(sql<ProbeRow>`
    select
      (select version from registry_versions where org_id = ${orgId}) as version,
      (select array_agg(a.agent_id || ' ' || a.idempotency_key)
         from unnest(${pairs.map((p) => p.agentId)}::uuid[], ${pairs.map((p) => p.key)}::text[]) as k(agent_id, key)
         join action_requests a on a.org_id = ${orgId} and a.agent_id = k.agent_id and a.idempotency_key = k.key) as taken,
      ${lock ? headForUpdate(orgId) : sql`null`} as head`.compile(db));
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
): CompiledQuery {
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
    ],
    unlockedAfter,
  );
  // Records and actions alone (the common batch) make a text that does not vary with the batch's size.
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
