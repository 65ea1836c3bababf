import { inScope, type Db } from '../../db/database.js';
import { notFound } from '../../platform/errors.js';
import { verifyChain, type ChainReport } from './chain.js';
import { getEvidence, listEvidence, type EvidenceFilters } from './evidence.repository.js';
import type { EvidenceSigner } from './signer.js';

/** One page (`limit` rows, one more to tell whether another follows) of the evidence after `afterSeq`. */
export function evidencePage(db: Db, orgId: string, filters: EvidenceFilters, afterSeq: string | undefined, limit: number) {
  return inScope(db, { orgId }, (tx) => listEvidence(tx, orgId, filters, afterSeq, limit));
}

export async function evidenceRecord(db: Db, orgId: string, id: string) {
  const row = await inScope(db, { orgId }, (tx) => getEvidence(tx, orgId, id));
  if (!row) throw notFound('No such evidence record.');
  return row;
}

export function verifyEvidence(db: Db, signer: EvidenceSigner, orgId: string): Promise<ChainReport> {
  return inScope(db, { orgId }, (tx) => verifyChain(tx, signer, orgId));
}
