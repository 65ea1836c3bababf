/** The evidence module's public face: the signed, append-only evidence chain, its bundles and checkpoints. */
export { buildEvidenceBundle, EVIDENCE_BUNDLE_MAX_BYTES, EvidenceBundleTooLarge } from './bundle.js';
export {
  alongside,
  appendAfter,
  appendEvidence,
  chainedWrite,
  chainedWriteOf,
  chainEvents,
  HeadMoved,
  headForUpdate,
  headMovedOr,
  lockedHead,
  writeChained,
  type Alongside,
  type Chained,
  type ChainHead,
  type EvidenceEvent,
} from './chain.js';
export { evidenceCheckpointJob } from './checkpoints.jobs.js';
export { firstSeqSince } from './evidence.repository.js';
export { checkpointOrganisation, writeDueCheckpoints } from './checkpoints.service.js';
export { auditWithEvidence } from './record.js';
export { EvidenceSigner } from './signer.js';
export { verifyBundle, type BundleVerdict, type Checkpoint } from './verify-bundle.js';
