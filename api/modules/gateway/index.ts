/** The gateway module's public face: the decision engine, its registry snapshots and the submission pipeline. */
export { compileRules, InvalidPolicy, OPERATOR_SPECS } from './engine/compile.js';
export { decide } from './engine/decide.js';
export { FIELDS } from './engine/fields.js';
export type { ActionRequest, CompiledRule, Condition, Decision, DecisionInput, Effect, Rule, Snapshot } from './engine/types.js';
export { DecisionSnapshots } from './snapshot.js';
export { decisionInput, type ActionBody } from './submission/decision-input.js';
