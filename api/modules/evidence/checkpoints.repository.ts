import { sql, type Selectable } from 'kysely';
import type { Db, Tx } from '../../db/database.js';
import type { EvidenceCheckpointsTable } from '../../db/schema.js';
import { iso } from '../../platform/schemas.js';

export type CheckpointRow = Selectable<EvidenceCheckpointsTable>;

/**
 * The organisations whose chain head moved past their last checkpoint, across every organisation (through the
 * owner-defined function of migration 0016: the runtime role sees one organisation at a time).
 */
export async function organisationsDue(db: Db): Promise<string[]> {
  const { rows } = await sql<{ org_id: string }>`select evidence_checkpoints_due() as org_id`.execute(db);
  return rows.map((r) => r.org_id);
}

/** The organisation's newest checkpoint. */
export function latestCheckpoint(tx: Tx, orgId: string): Promise<CheckpointRow | undefined> {
  return tx.selectFrom('evidence_checkpoints').selectAll().where('org_id', '=', orgId).orderBy('seq', 'desc').limit(1).executeTakeFirst();
}

/** Writes a checkpoint; false when one of that seq exists already (a job that ran twice). */
export async function insertCheckpoint(
  tx: Tx,
  orgId: string,
  c: { seq: number; hash: string; createdAt: Date; kid: string; signature: string },
): Promise<boolean> {
  const written = await tx
    .insertInto('evidence_checkpoints')
    .values({ org_id: orgId, seq: c.seq, hash: c.hash, created_at: c.createdAt, kid: c.kid, signature: c.signature })
    .onConflict((oc) => oc.columns(['org_id', 'seq']).doNothing())
    .executeTakeFirst();
  return Number(written.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** A page of the organisation's checkpoints, newest first, below the seq `beforeSeq`. */
export function listCheckpoints(tx: Tx, orgId: string, beforeSeq: string | undefined, limit: number): Promise<CheckpointRow[]> {
  let q = tx.selectFrom('evidence_checkpoints').selectAll().where('org_id', '=', orgId);
  if (beforeSeq !== undefined) q = q.where(sql<boolean>`seq < ${beforeSeq}::bigint`);
  return q.orderBy('seq', 'desc').limit(limit).execute();
}

/** A checkpoint as the API answers it: self-contained, to be stored and verified later (docs/evidence.md). */
export const toCheckpoint = (r: CheckpointRow) => ({
  org_id: r.org_id,
  seq: Number(r.seq),
  hash: r.hash,
  created_at: iso(r.created_at),
  kid: r.kid,
  signature: r.signature,
});
