import type { AgentView, DecisionInput, SessionView } from '../engine/types.js';

/** The fields of an action body the engine reads (POST /actions, /actions/console, /policies/simulate). */
export interface ActionBody {
  tool: string;
  operation: string;
  target: string;
  parameters: Record<string, unknown>;
  environment?: string | null;
  on_behalf_of?: string | null;
  justification?: string | null;
}

/**
 * The engine's input for one action body: the one mapping from the API's snake_case body to the
 * engine's request, shared by submission and simulation so that both decide the same thing.
 */
export function decisionInput(
  agent: AgentView,
  body: ActionBody,
  opts: { identityId: string | null; now: Date; approvalPresent: boolean; explain?: boolean; session?: SessionView | null },
): DecisionInput {
  return {
    agent,
    session: opts.session ?? null,
    identityId: opts.identityId,
    action: {
      tool: body.tool,
      operation: body.operation,
      target: body.target,
      parameters: body.parameters,
      environment: body.environment ?? null,
      onBehalfOf: body.on_behalf_of ?? null,
      justification: body.justification ?? null,
    },
    now: opts.now.toISOString(),
    approvalPresent: opts.approvalPresent,
    ...(opts.explain ? { explain: true } : {}),
  };
}
