/**
 * The risk module's public face: the background recalculation job, and the pure score with what-if for those who
 * compute scores elsewhere (the benchmark, a graph's risk level).
 */
export { drainRecalculations, RISK_QUEUE, riskJobHandler } from './risk.jobs.js';
export { BANDS, bandOf, score, type Factor, type RiskInputs, type ScoreResult } from './score.js';
export { applyWhatIf, type WhatIf } from './what-if.js';
export { recalculate } from './risk.service.js';
