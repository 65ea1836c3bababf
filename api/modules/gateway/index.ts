/** The gateway module's public face: the decision engine, its registry snapshots and the submission pipeline. */
export { compileRules, InvalidPolicy, OPERATOR_SPECS } from './engine/compile.js';
export { decide } from './engine/decide.js';
export { FIELDS } from './engine/fields.js';
export type { ActionRequest, AgentView, CompiledRule, Condition, Decision, DecisionInput, Effect, Rule, SessionFacts, SessionView, Snapshot } from './engine/types.js';
export type { DecisionFacts } from './submission/records.js';
export { DecisionSnapshots } from './snapshot.js';
export { ApprovalTokens } from './submission/approval-tokens.js';
export { SubmissionService } from './submission/submission.service.js';
export { decisionInput, type ActionBody } from './submission/decision-input.js';
export { sessionRetentionJob, sweepSessions, SESSION_IDLE_DAYS } from './sessions.jobs.js';
export { AUTHZEN_EVALUATION_PATH, AUTHZEN_EVALUATIONS_PATH } from './authzen.schemas.js';
