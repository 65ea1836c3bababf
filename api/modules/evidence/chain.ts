import { randomUUID } from 'node:crypto';
import { sql, type InsertQueryBuilder, type InsertResult, type QueryCreator, type RawBuilder, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { DB, EvidenceRecordsTable } from '../../db/schema.js';
import { GENESIS_HASH, type EvidenceBody, type EvidenceSigner } from './signer.js';

export interface EvidenceEvent {
  eventType: string;
  agentId?: string | null;
  actionRequestId?: string | null;
  controlRef?: string | null;
  correlationId: string;
  payload: Record<string, unknown>;
}

export type EvidenceRow = Selectable<EvidenceRecordsTable>;

export function bodyOf(r: EvidenceRow): EvidenceBody {
  return {
    id: r.id,
    org_id: r.org_id,
    seq: Number(r.seq),
    prev_hash: r.prev_hash,
    event_type: r.event_type,
    agent_id: r.agent_id,
    action_request_id: r.action_request_id,
    control_ref: r.control_ref,
    correlation_id: r.correlation_id,
    payload: r.payload,
    created_at: new Date(r.created_at).toISOString(),
  };
}

export interface ChainHead {
  seq: number;
  hash: string;
}

/**
 * Locks the organisation's chain head for the caller's transaction, creating it at genesis. Appends
 * of one organisation queue on this row lock, across every API process.
 */
async function lockHead(tx: Tx, orgId: string): Promise<ChainHead> {
  const lock = () => tx.selectFrom('evidence_heads').select(['seq', 'hash']).where('org_id', '=', orgId).forUpdate().executeTakeFirst();
  let head = await lock();
  if (!head) {
    await tx
      .insertInto('evidence_heads')
      .values({ org_id: orgId, seq: 0, hash: GENESIS_HASH })
      .onConflict((oc) => oc.column('org_id').doNothing())
      .execute();
    head = await lock();
  }
  return { seq: head ? Number(head.seq) : 0, hash: head?.hash ?? GENESIS_HASH };
}

/**
 * The head, locked, as a subquery of a caller's own first statement (the gateway's batch takes the
 * lock in the round trip that also counts its hits): `{seq, hash}` as JSON, null before the first
 * record. `lockedHead` turns the answer into the head.
 */
export const headForUpdate = (orgId: string): RawBuilder<ChainHead | null> =>
  sql<ChainHead | null>`(select json_build_object('seq', seq, 'hash', hash) from evidence_heads where org_id = ${orgId} for update)`;

/** The head `headForUpdate` selected, or, before the organisation's first record, the head created and locked now. */
export async function lockedHead(tx: Tx, orgId: string, selected: ChainHead | null): Promise<ChainHead> {
  return selected ? { seq: Number(selected.seq), hash: selected.hash } : lockHead(tx, orgId);
}

type ChainedRecord = EvidenceBody & { hash: string; signature: string; kid: string };

/** Numbers, links and signs events after `head`; writes nothing. */
function chainEvents(signer: EvidenceSigner, orgId: string, head: ChainHead, events: EvidenceEvent[], now: Date) {
  let seq = head.seq;
  let prev = head.hash;
  const records: ChainedRecord[] = events.map((e) => {
    const body: EvidenceBody = {
      id: randomUUID(),
      org_id: orgId,
      seq: ++seq,
      prev_hash: prev,
      event_type: e.eventType,
      agent_id: e.agentId ?? null,
      action_request_id: e.actionRequestId ?? null,
      control_ref: e.controlRef ?? null,
      correlation_id: e.correlationId,
      payload: e.payload,
      created_at: now.toISOString(),
    };
    const hash = signer.hash(body);
    prev = hash;
    return { ...body, hash, signature: signer.sign(hash), kid: signer.kid };
  });
  return { records, head: { seq, hash: prev } };
}

/** An insert that commits in an append's own statement, as the common table expression `name`. */
export interface Alongside {
  name: string;
  insert: (db: QueryCreator<DB>) => InsertQueryBuilder<DB, keyof DB, InsertResult>;
}

/** An insert into any table, to commit alongside an append (`appendAfter`). */
export function alongside<T extends keyof DB>(name: string, insert: (db: QueryCreator<DB>) => InsertQueryBuilder<DB, T, InsertResult>): Alongside {
  return { name, insert: insert as unknown as Alongside['insert'] };
}

/**
 * Appends events after `head`, which the caller's transaction holds locked: the records, the caller's
 * own `inserts` (in order) and the new head are written in one statement.
 */
export async function appendAfter(
  tx: Tx,
  signer: EvidenceSigner,
  orgId: string,
  head: ChainHead,
  events: EvidenceEvent[],
  now: Date,
  inserts: Alongside[] = [],
): Promise<ChainedRecord[]> {
  const { records, head: next } = chainEvents(signer, orgId, head, events, now);
  // The CTEs only add tables to the query's type; the statement ends with the head's update.
  let write: QueryCreator<DB> = tx.with('appended', (db) =>
    db.insertInto('evidence_records').values(records.map((r) => ({ ...r, payload: JSON.stringify(r.payload), created_at: now }))),
  ) as unknown as QueryCreator<DB>;
  for (const a of inserts) write = write.with(a.name, a.insert) as unknown as QueryCreator<DB>;
  await write.updateTable('evidence_heads').set({ seq: next.seq, hash: next.hash }).where('org_id', '=', orgId).execute();
  return records;
}

/**
 * Appends events to the organisation's chain inside the caller's transaction, so a change and its
 * evidence commit together: the head is locked, then the records and the new head are written in one
 * statement. Several events in one call share the lock and the statement.
 */
export async function appendEvidence(tx: Tx, signer: EvidenceSigner, orgId: string, events: EvidenceEvent[], now: Date) {
  if (events.length === 0) return [];
  return appendAfter(tx, signer, orgId, await lockHead(tx, orgId), events, now);
}

export interface ChainReport {
  valid: boolean;
  records_checked: number;
  head_seq: number;
  first_broken: { id: string | null; seq: number; reason: string } | null;
}

/**
 * Recomputes every hash and signature in order and names the first broken record: an edited record
 * (`hash_mismatch`), a removed one (`sequence_gap` at the record after it, `missing_records` at the
 * end), records out of order or re-linked (`prev_hash_mismatch`), a record signed with a key not held
 * here (`unknown_key`), a forged signature (`signature_invalid`). Each record is verified with the key
 * its `kid` names.
 */
export async function verifyChain(tx: Tx, signer: EvidenceSigner, orgId: string): Promise<ChainReport> {
  const head = await tx.selectFrom('evidence_heads').select(['seq', 'hash']).where('org_id', '=', orgId).executeTakeFirst();
  const headSeq = head ? Number(head.seq) : 0;
  let expectedSeq = 1;
  let prev = GENESIS_HASH;
  let checked = 0;
  const broken = (id: string | null, seq: number, reason: string): ChainReport => ({
    valid: false,
    records_checked: checked,
    head_seq: headSeq,
    first_broken: { id, seq, reason },
  });
  for (let after = 0; ; ) {
    const page = await tx
      .selectFrom('evidence_records')
      .selectAll()
      .where('org_id', '=', orgId)
      .where('seq', '>', String(after))
      .orderBy('seq')
      .limit(1000)
      .execute();
    if (page.length === 0) break;
    for (const r of page) {
      const seq = Number(r.seq);
      if (seq !== expectedSeq) return broken(r.id, seq, 'sequence_gap');
      if (r.prev_hash !== prev) return broken(r.id, seq, 'prev_hash_mismatch');
      if (signer.hash(bodyOf(r)) !== r.hash) return broken(r.id, seq, 'hash_mismatch');
      // A key this process does not hold (a previous seed left out, or a kid written by someone else)
      // leaves the record unproven, and so everything after it.
      if (!signer.knows(r.kid)) return broken(r.id, seq, 'unknown_key');
      if (!signer.verify(r.kid, r.hash, r.signature)) return broken(r.id, seq, 'signature_invalid');
      prev = r.hash;
      expectedSeq++;
      checked++;
    }
    after = Number(page[page.length - 1]!.seq);
  }
  if (checked !== headSeq || (head && head.hash !== prev)) return broken(null, checked + 1, 'missing_records');
  return { valid: true, records_checked: checked, head_seq: headSeq, first_broken: null };
}
