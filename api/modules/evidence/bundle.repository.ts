import type { Tx } from '../../db/database.js';
import type { ChainHead, EvidenceRow } from './chain.js';
import { firstSeqSince } from './evidence.repository.js';
import { GENESIS_HASH } from './signer.js';

/** The organisation a bundle is of, as its manifest names it. */
export function bundleOrganisation(tx: Tx, orgId: string) {
  return tx.selectFrom('organisations').select(['id', 'slug', 'name']).where('id', '=', orgId).executeTakeFirst();
}

/**
 * The records created in [since, until), as the run of the chain from the first record at or after `since` to the
 * one before the first at or after `until` (bisection on seq: `firstSeqSince`), and the position just before that
 * run (where the chain stood when the window opened; genesis before the first record).
 */
export async function windowSeqs(tx: Tx, orgId: string, since: Date, until: Date): Promise<{ first: number; last: number; before: ChainHead }> {
  const first = Number(await firstSeqSince(tx, orgId, since));
  const last = Math.max(first, Number(await firstSeqSince(tx, orgId, until))) - 1;
  const before = first > 1 ? await recordHash(tx, orgId, first - 1) : GENESIS_HASH;
  if (before === undefined) throw new Error(`record ${first - 1}, the one before the window, is missing from the chain: verify it (GET /evidence/verify)`);
  return { first, last, before: { seq: first - 1, hash: before } };
}

/** The hash of record `seq`, or undefined when there is none. */
export async function recordHash(tx: Tx, orgId: string, seq: number): Promise<string | undefined> {
  const row = await tx.selectFrom('evidence_records').select('hash').where('org_id', '=', orgId).where('seq', '=', String(seq)).executeTakeFirst();
  return row?.hash;
}

/** The organisation's chain head as it is now; undefined before its first record. */
export async function chainHead(tx: Tx, orgId: string): Promise<ChainHead | undefined> {
  const row = await tx.selectFrom('evidence_heads').select(['seq', 'hash']).where('org_id', '=', orgId).executeTakeFirst();
  return row ? { seq: Number(row.seq), hash: row.hash } : undefined;
}

/** Up to `limit` records after seq `after` and up to seq `last`, in seq order. */
export function recordsBetween(tx: Tx, orgId: string, after: number, last: number, limit: number): Promise<EvidenceRow[]> {
  return tx
    .selectFrom('evidence_records')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('seq', '>', String(after))
    .where('seq', '<=', String(last))
    .orderBy('seq')
    .limit(limit)
    .execute();
}
