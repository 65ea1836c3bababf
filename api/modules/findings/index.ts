/**
 * The findings module's public face: what detectors (discovery's reconciliation, later risk) use to open
 * findings in their own transaction, and the finding's shape.
 */
export { openFinding, type OpenFindingInput } from './findings.repository.js';
export { FINDING_SEVERITY, FINDING_STATUS, findingOut, type FindingOut, type FindingSeverity, type FindingStatus } from './findings.schemas.js';
