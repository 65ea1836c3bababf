import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db } from '../../db/database.js';
import { notFound } from '../../platform/errors.js';
import { chainHead } from './bundle.repository.js';
import { insertCheckpoint, latestCheckpoint, listCheckpoints, organisationsDue, type CheckpointRow } from './checkpoints.repository.js';
import type { EvidenceSigner } from './signer.js';
import { checkpointDigest } from './verify-bundle.js';

/**
 * Signs a checkpoint of the organisation's chain head when the head moved past its last checkpoint: the head's
 * seq and hash and the time, signed with the evidence key over the SHA-256 of their canonical JSON (with the
 * organisation's id). Answers the checkpoint written, or null when the head has not moved. Idempotent: one
 * checkpoint per head position.
 */
export function checkpointOrganisation(db: Db, signer: EvidenceSigner, clock: Clock, orgId: string): Promise<CheckpointRow | null> {
  return inScope(db, { orgId }, async (tx) => {
    const head = await chainHead(tx, orgId);
    const last = await latestCheckpoint(tx, orgId);
    if (!head || head.seq <= Number(last?.seq ?? 0)) return null;
    // Milliseconds, as a Date holds them and timestamptz keeps them: the checkpoint reads back as it was signed.
    const createdAt = clock.now();
    const statement = { org_id: orgId, seq: head.seq, hash: head.hash, created_at: createdAt.toISOString() };
    const checkpoint = { seq: head.seq, hash: head.hash, createdAt, kid: signer.kid, signature: signer.sign(checkpointDigest(statement)) };
    if (!(await insertCheckpoint(tx, orgId, checkpoint))) return null;
    return { org_id: orgId, seq: String(head.seq), hash: head.hash, created_at: createdAt, kid: checkpoint.kid, signature: checkpoint.signature };
  });
}

/**
 * Writes a checkpoint for every organisation whose chain head moved since its last one, each in its own
 * transaction, until done or `signal` aborts. Answers how many were written.
 */
export async function writeDueCheckpoints(deps: {
  db: Db;
  evidence: EvidenceSigner;
  clock: Clock;
  log?: FastifyBaseLogger;
  signal?: AbortSignal;
}): Promise<{ written: number }> {
  let written = 0;
  for (const orgId of await organisationsDue(deps.db)) {
    deps.signal?.throwIfAborted();
    if (await checkpointOrganisation(deps.db, deps.evidence, deps.clock, orgId)) written++;
  }
  deps.log?.info({ written }, 'evidence checkpoints written');
  return { written };
}

/** One page (`limit` rows, one more to tell whether another follows) of checkpoints below `beforeSeq`, newest first. */
export function checkpointsPage(db: Db, orgId: string, beforeSeq: string | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listCheckpoints(tx, orgId, beforeSeq, limit));
}

export async function newestCheckpoint(db: Db, orgId: string): Promise<CheckpointRow> {
  const row = await inScope(db, { orgId }, (tx) => latestCheckpoint(tx, orgId));
  if (!row) throw notFound('No checkpoint yet: the first is signed within 15 minutes of the first evidence record.');
  return row;
}
