import { deny, pass, type Step } from '../context.js';

/** Acting on behalf of someone needs an unexpired delegation from exactly that principal. */
export const delegation: Step = (ctx) => {
  const who = ctx.input.action.onBehalfOf;
  if (!who) return;
  const now = Date.parse(ctx.input.now);
  const found = ctx.snapshot.delegations.find(
    (d) => d.principalRef === who && (d.expiresAt === null || Date.parse(d.expiresAt) > now),
  );
  if (!found) return deny(ctx, 'delegation', 'DELEGATION_MISSING', { on_behalf_of: who });
  pass(ctx, 'delegation', { on_behalf_of: who });
};
