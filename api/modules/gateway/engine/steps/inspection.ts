import { findSecrets } from '../../../shared/index.js';
import { deny, pass, type Step } from '../context.js';

/** Baseline: parameters carrying key-like material are denied (SECRET_DETECTED); where, never what. */
export const inspection: Step = (ctx) => {
  const findings = findSecrets(ctx.input.action.parameters);
  if (findings.length > 0) return deny(ctx, 'inspection', 'SECRET_DETECTED', { findings });
  pass(ctx, 'inspection');
};
