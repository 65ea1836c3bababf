import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { AgentView, DelegationView, Effect, Rule, ToolView } from '../../api/modules/gateway/engine/types.js';

/**
 * Policy cases as data (test/fixtures/policies): a request, the rules in force and the expected
 * decision, all against one registry (_registry.json). The engine test runs them on `decide`, the API
 * test through POST /policies/simulate in an organisation that mirrors the registry.
 */
export const POLICY_CASES_DIR = path.join(import.meta.dirname, '../fixtures/policies');

export interface PolicyRequest {
  tool: string;
  operation: string;
  target: string;
  parameters: Record<string, unknown>;
  environment: string | null;
  on_behalf_of: string | null;
  justification: string | null;
}

export interface PolicyCase {
  file: string;
  description: string;
  request: PolicyRequest;
  /** Rules of one published, active policy. */
  published?: Rule[];
  /** When present (even empty), evaluated instead of the published rules. */
  draft_rules?: Rule[];
  approval_present: boolean;
  /** Privilege classes denied for every agent. */
  deny_class?: string[];
  expect: { decision: Effect; reason_codes: string[]; approvals_required: number };
}

export interface PolicyRegistry {
  agent: AgentView;
  now: string;
  tools: Record<string, ToolView>;
  bindings: Array<{ tool: string; constraints: { max_amount?: number; currency?: string; allowed_targets?: string[] } }>;
  delegations: DelegationView[];
}

export function loadPolicyRegistry(): PolicyRegistry {
  return JSON.parse(readFileSync(path.join(POLICY_CASES_DIR, '_registry.json'), 'utf8')) as PolicyRegistry;
}

/** Every case, sorted by file name, with the request's defaults filled in (as simulation does). */
export function loadPolicyCases(): PolicyCase[] {
  return readdirSync(POLICY_CASES_DIR)
    .filter((f) => f.endsWith('.json') && !f.startsWith('_'))
    .sort()
    .map((file) => {
      const c = JSON.parse(readFileSync(path.join(POLICY_CASES_DIR, file), 'utf8')) as Omit<PolicyCase, 'file'> & {
        request: Partial<PolicyRequest> & { tool: string };
      };
      const r = c.request;
      return {
        ...c,
        file,
        approval_present: c.approval_present ?? false,
        request: {
          tool: r.tool,
          operation: r.operation ?? 'invoke',
          target: r.target ?? '',
          parameters: r.parameters ?? {},
          environment: r.environment ?? null,
          on_behalf_of: r.on_behalf_of ?? null,
          justification: r.justification ?? null,
        },
      };
    });
}
