/** The evidence module's public face: the signed, append-only evidence chain. */
export { alongside, appendAfter, appendEvidence, headForUpdate, lockedHead, type Alongside, type ChainHead, type EvidenceEvent } from './chain.js';
export { auditWithEvidence } from './record.js';
export { EvidenceSigner } from './signer.js';
