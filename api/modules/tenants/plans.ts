import { ApiError } from '../../platform/errors.js';

/**
 * What each plan allows (docs/plans.md). The spec fixes the developer plan: at most five
 * non-production agents; Tollgate also keeps production agents out of it.
 */
export interface PlanLimits {
  productionAgents: boolean;
  /** Agents that are not revoked, of any environment; null means no limit. */
  maxAgents: number | null;
  maxNonProductionAgents: number | null;
}

export const PLAN_LIMITS: Record<string, PlanLimits> = {
  developer: { productionAgents: false, maxAgents: 5, maxNonProductionAgents: 5 },
  team: { productionAgents: true, maxAgents: 250, maxNonProductionAgents: null },
  enterprise: { productionAgents: true, maxAgents: null, maxNonProductionAgents: null },
};

export interface AgentCounts {
  total: number;
  nonProduction: number;
}

/** Refuses, with 403 module_not_in_plan, an agent in `environment` that the plan does not allow. */
export function checkAgentAllowed(plan: string, environment: string, counts: AgentCounts): void {
  const limits = PLAN_LIMITS[plan] ?? PLAN_LIMITS.developer!;
  if (environment === 'production' && !limits.productionAgents) {
    throw new ApiError('module_not_in_plan', `The ${plan} plan has no production agents.`, {
      plan,
      module: 'production_agents',
    });
  }
  if (limits.maxAgents !== null && counts.total >= limits.maxAgents) {
    throw new ApiError('module_not_in_plan', `The ${plan} plan allows at most ${limits.maxAgents} agents.`, {
      plan,
      module: 'agents',
      limit: limits.maxAgents,
    });
  }
  if (environment !== 'production' && limits.maxNonProductionAgents !== null && counts.nonProduction >= limits.maxNonProductionAgents) {
    throw new ApiError(
      'module_not_in_plan',
      `The ${plan} plan allows at most ${limits.maxNonProductionAgents} non-production agents.`,
      { plan, module: 'non_production_agents', limit: limits.maxNonProductionAgents },
    );
  }
}
