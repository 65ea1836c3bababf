import { sql } from 'kysely';
import type { Tx } from '../../db/database.js';
import { iso } from '../../platform/schemas.js';
import type { EvidenceRow } from './chain.js';

export interface EvidenceFilters {
  event_type?: string;
  control_ref?: string;
  agent_id?: string;
  action_request_id?: string;
}

/**
 * The seq of the organisation's first evidence record created at or after `since`, or one past the head when none
 * is (1 before the first record): `evidence_first_seq_since` of migration 0014 bisects on the chain's sequence, so
 * a time window needs no index on the time, which every append would pay for. Records are appended under the
 * head's lock with the app's clock, so time follows seq (to within the clocks of the API processes).
 */
export async function firstSeqSince(tx: Tx, orgId: string, since: Date): Promise<string> {
  const { rows } = await sql<{ seq: string }>`select evidence_first_seq_since(${orgId}::uuid, ${since}::timestamptz)::text as seq`.execute(tx);
  return rows[0]!.seq;
}

/** A page of the organisation's evidence records, newest first, after the record numbered `afterSeq`. */
export function listEvidence(tx: Tx, orgId: string, filters: EvidenceFilters, afterSeq: string | undefined, limit: number) {
  let q = tx.selectFrom('evidence_records').selectAll().where('org_id', '=', orgId);
  if (filters.event_type) q = q.where('event_type', '=', filters.event_type);
  if (filters.control_ref) q = q.where('control_ref', '=', filters.control_ref);
  if (filters.agent_id) q = q.where('agent_id', '=', filters.agent_id);
  if (filters.action_request_id) q = q.where('action_request_id', '=', filters.action_request_id);
  if (afterSeq !== undefined) q = q.where(sql<boolean>`seq < ${afterSeq}::bigint`);
  return q.orderBy('seq', 'desc').limit(limit).execute();
}

export function getEvidence(tx: Tx, orgId: string, id: string): Promise<EvidenceRow | undefined> {
  return tx.selectFrom('evidence_records').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
}

export const toEvidence = (r: EvidenceRow) => ({
  id: r.id,
  seq: Number(r.seq),
  event_type: r.event_type,
  agent_id: r.agent_id,
  action_request_id: r.action_request_id,
  control_ref: r.control_ref,
  correlation_id: r.correlation_id,
  payload: r.payload,
  created_at: iso(r.created_at),
  prev_hash: r.prev_hash,
  hash: r.hash,
  signature: r.signature,
  kid: r.kid,
});
