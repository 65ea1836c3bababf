import { deny, pass, type Step } from '../context.js';

/** A suspended or revoked agent, or one whose gateway access is off, runs nothing. */
export const agentState: Step = (ctx) => {
  const { agent } = ctx.input;
  if (agent.status === 'suspended') return deny(ctx, 'agent_state', 'AGENT_SUSPENDED', undefined, true);
  if (agent.status === 'revoked') return deny(ctx, 'agent_state', 'AGENT_REVOKED', undefined, true);
  if (!agent.gatewayAccess) return deny(ctx, 'agent_state', 'GATEWAY_ACCESS_DISABLED', undefined, true);
  pass(ctx, 'agent_state');
};
