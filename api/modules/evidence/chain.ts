import { sql, type CompiledQuery, type InsertQueryBuilder, type InsertResult, type QueryCreator, type RawBuilder, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import { timeOrderedId } from '../../db/ids.js';
import { insertAsJson } from '../../db/json-rows.js';
import type { DB, EvidenceRecordsTable } from '../../db/schema.js';
import { isUniqueViolation } from '../../platform/schemas.js';
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

/** Events numbered, linked after a head and signed, not yet written; `head` is the chain's head after them. */
export interface Chained {
  records: ChainedRecord[];
  head: ChainHead;
}

/** Numbers, links and signs events after `head`; writes nothing. */
export function chainEvents(signer: EvidenceSigner, orgId: string, head: ChainHead, events: EvidenceEvent[], now: Date): Chained {
  let seq = head.seq;
  let prev = head.hash;
  const records: ChainedRecord[] = events.map((e) => {
    const body: EvidenceBody = {
      id: timeOrderedId(),
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

/**
 * The head moved from under an append chained after a head it had not locked (`writeChained` with
 * `unlockedAfter`): another append got there first, or the one it followed rolled back. Nothing of
 * the statement stays once its transaction rolls back; the caller chains again after the locked head.
 */
export class HeadMoved extends Error {
  constructor() {
    super('the evidence chain head moved');
  }
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
  const chained = chainEvents(signer, orgId, head, events, now);
  await writeChained(tx, orgId, chained, inserts);
  return chained.records;
}

/**
 * Writes chained records, the caller's own `inserts` (in order) and the new head in one statement.
 * The head they were chained after is either held locked by the caller's transaction, or, with
 * `unlockedAfter`, expected: the head's update then waits for any transaction holding it and applies
 * only if the head is still the one expected, else the statement fails and `HeadMoved` is thrown (the
 * caller's transaction must roll back). So an append may be chained and signed while the one before it
 * commits, and the chain stays one line across processes.
 */
export async function writeChained(
  tx: Tx,
  orgId: string,
  chained: Chained,
  inserts: Alongside[] = [],
  unlockedAfter?: ChainHead,
): Promise<void> {
  await tx.executeQuery(chainedWrite(tx, orgId, chained, inserts, unlockedAfter)).catch((err: unknown) => {
    throw unlockedAfter ? headMovedOr(err) : err;
  });
}

/**
 * The statement writeChained runs, compiled, for a caller that sends it itself (the gateway's batch
 * sends it with its `commit`); a failure of it goes through `headMovedOr` when it had `unlockedAfter`.
 * The caller chained after `unlockedAfter` must know that head's row to be committed (it is once the
 * append that created it has committed), since an update finds no row inserted by a transaction still
 * open.
 */
export function chainedWrite(tx: Tx, orgId: string, chained: Chained, inserts: Alongside[] = [], unlockedAfter?: ChainHead): CompiledQuery {
  // As one JSON parameter: the same text whatever the number of records. Each record is written with
  // the time it was hashed with.
  const records = (db: QueryCreator<DB>) =>
    insertAsJson(db, 'evidence_records', chained.records) ??
    db.insertInto('evidence_records').values(chained.records.map((r) => ({ ...r, payload: JSON.stringify(r.payload), created_at: new Date(r.created_at) })));
  return chainedWriteOf(tx, orgId, records, chained.head, inserts, unlockedAfter);
}

/**
 * chainedWrite with the records' insert given (`records`) and the head after them (`next`): for a caller
 * that builds the statement once per shape, with stand-ins for its values (`preparedShape`).
 */
export function chainedWriteOf(
  tx: Tx,
  orgId: string,
  records: (db: QueryCreator<DB>) => InsertQueryBuilder<DB, 'evidence_records', InsertResult>,
  next: ChainHead,
  inserts: Alongside[] = [],
  unlockedAfter?: ChainHead,
): CompiledQuery {
  // The CTEs only add tables to the query's type; the statement ends with the head's update.
  let write: QueryCreator<DB> = tx.with('appended', records) as unknown as QueryCreator<DB>;
  for (const a of inserts) write = write.with(a.name, a.insert) as unknown as QueryCreator<DB>;
  if (!unlockedAfter) return write.updateTable('evidence_heads').set({ seq: next.seq, hash: next.hash }).where('org_id', '=', orgId).compile();
  // Not `where seq = expected`: a row is picked by the statement's snapshot, in which the append before
  // may not have committed yet. Picked by its key, the row is waited for and then read as committed; a
  // head that is not the one expected gets -1, which a trigger refuses (migration 0020), failing the
  // statement (and so its transaction, whatever is sent behind it).
  const expected = sql<boolean>`seq = ${unlockedAfter.seq} and hash = ${unlockedAfter.hash}`;
  return write
    .updateTable('evidence_heads')
    .set({ seq: sql`case when ${expected} then ${next.seq} else -1 end`, hash: next.hash })
    .where('org_id', '=', orgId)
    .compile();
}

/**
 * HeadMoved for a failure of a write chained after an unlocked head: the head was not the one expected,
 * or a record already holds one of the numbers (an append that got there first fails the insert before
 * the head is read); any other failure as it is.
 */
export function headMovedOr(err: unknown): unknown {
  const constraint = (err as { constraint?: string } | null)?.constraint;
  if ((err as { code?: string } | null)?.code === 'TGHM1') return new HeadMoved();
  if (isUniqueViolation(err) && constraint === 'evidence_records_org_id_seq_key') return new HeadMoved();
  return err;
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
