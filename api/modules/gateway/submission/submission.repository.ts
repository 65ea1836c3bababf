import { sql, type Insertable } from 'kysely';
import type { Tx } from '../../../db/database.js';
import type { ActionRequestsTable, ApprovalsTable } from '../../../db/schema.js';
import { countHits, type Bucket } from '../../../platform/rate-limit.js';
import { alongside, appendAfter, headForUpdate, lockedHead, type ChainHead, type EvidenceEvent, type EvidenceSigner } from '../../evidence/index.js';
import { notifyHoldersOf, type Notice } from '../../notifications/index.js';
import { insertTelemetry, type TelemetryEvent } from '../../telemetry/index.js';
import type { ActionRow } from '../actions.repository.js';
import type { DecisionColumns } from './records.js';

/**
 * In one statement: the batch's hits counted on the agents' gateway budgets, the organisation's
 * registry version, which of the batch's (agent, key) pairs are already taken, and the evidence
 * chain's head, locked for this transaction.
 */
export async function probeBatch(tx: Tx, orgId: string, hits: Bucket[], pairs: Array<{ agentId: string; key: string }>) {
  const { rows } = await sql<{
    hits: Record<string, number> | null;
    version: string | null;
    taken: string[] | null;
    head: ChainHead | null;
  }>`
    with hits as (${countHits(hits)})
    select
      (select json_object_agg(key, count) from hits) as hits,
      (select version from registry_versions where org_id = ${orgId}) as version,
      (select array_agg(a.agent_id || ' ' || a.idempotency_key)
         from unnest(${pairs.map((p) => p.agentId)}::uuid[], ${pairs.map((p) => p.key)}::text[]) as k(agent_id, key)
         join action_requests a on a.org_id = ${orgId} and a.agent_id = k.agent_id and a.idempotency_key = k.key) as taken,
      ${headForUpdate(orgId)} as head`.execute(tx);
  const r = rows[0];
  return {
    hits: r?.hits ?? {},
    version: r?.version ?? '0',
    taken: new Set(r?.taken ?? []),
    head: await lockedHead(tx, orgId, r?.head ?? null),
  };
}

/**
 * The batch's evidence, its new actions, their approvals, the approvers' notices of them and its
 * redemptions' telemetry, in the evidence append's one statement.
 */
export async function writeBatch(
  tx: Tx,
  signer: EvidenceSigner,
  orgId: string,
  head: ChainHead,
  events: EvidenceEvent[],
  now: Date,
  actions: Insertable<ActionRequestsTable>[],
  approvals: Insertable<ApprovalsTable>[],
  telemetry: TelemetryEvent[] = [],
  notices: Notice[] = [],
): Promise<void> {
  await appendAfter(tx, signer, orgId, head, events, now, [
    ...(actions.length > 0 ? [alongside('actions', (db) => db.insertInto('action_requests').values(actions))] : []),
    ...(approvals.length > 0 ? [alongside('approvals', (db) => db.insertInto('approvals').values(approvals))] : []),
    ...(notices.length > 0 ? [alongside('notified', (db) => notifyHoldersOf(db, orgId, 'approval:decide', notices, now))] : []),
    ...(telemetry.length > 0 ? [alongside('telemetry', (db) => insertTelemetry(db, orgId, telemetry))] : []),
  ]);
}

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
