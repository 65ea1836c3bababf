import type { CLASSIFICATION, CODE_EXECUTION, HUMAN_APPROVAL_COVERAGE, INTERNET_EXPOSURE, PERSISTENT_MEMORY } from '../shared/index.js';
import type { Counted, DelegationBreadth, RiskInputs } from './score.js';

/**
 * What-if: the spec's WhatIf fields applied to a copy of an agent's inputs, purely. The service scores the copy
 * with the same `score()` as recalculation, beside the unchanged inputs, and saves nothing.
 */
export interface WhatIf {
  internet_exposure?: (typeof INTERNET_EXPOSURE)[number] | null;
  code_execution?: (typeof CODE_EXECUTION)[number] | null;
  approval_coverage?: (typeof HUMAN_APPROVAL_COVERAGE)[number] | null;
  persistent_memory?: (typeof PERSISTENT_MEMORY)[number] | null;
  production?: boolean | null;
  has_high_impact_tools?: boolean | null;
  has_privileged_tools?: boolean | null;
  has_write_tools?: boolean | null;
  gateway_enforced?: boolean | null;
  attestation_current?: boolean | null;
  delegation_breadth?: DelegationBreadth | null;
  max_data_classification?: (typeof CLASSIFICATION)[number] | null;
  resolve_findings?: boolean;
  clear_detections?: boolean;
  approve_mcp_servers?: boolean;
  use_scoped_identity?: boolean;
}

const ORDER: readonly string[] = ['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'];
const NONE: Counted = { count: 0, examples: [] };
const HYPOTHETICAL = (what: string): Counted => ({ count: 1, examples: [`(a hypothetical ${what})`] });

/** Sets a tool group present or absent; present keeps the real tools when the agent has some. */
const toolsPresent = (group: Counted, present: boolean, what: string): Counted => (present ? (group.count > 0 ? group : HYPOTHETICAL(what)) : NONE);

/**
 * The inputs with the changes applied (a copy: `inputs` is not touched) and the names of the fields that were
 * applied. Absent and null fields change nothing, and so do the four booleans that default to false.
 */
export function applyWhatIf(inputs: RiskInputs, w: WhatIf, now: Date): { inputs: RiskInputs; applied: string[] } {
  const next: RiskInputs = structuredClone(inputs);
  const applied: string[] = [];
  const set = (field: keyof WhatIf, change: () => void) => {
    change();
    applied.push(field);
  };

  if (w.internet_exposure != null) set('internet_exposure', () => (next.internet_exposure = w.internet_exposure!));
  if (w.code_execution != null) set('code_execution', () => (next.code_execution = w.code_execution!));
  if (w.approval_coverage != null) set('approval_coverage', () => (next.human_approval_coverage = w.approval_coverage!));
  if (w.persistent_memory != null) set('persistent_memory', () => (next.persistent_memory = w.persistent_memory!));
  if (w.production != null) {
    // Out of production means development; a staging agent stays staging.
    set('production', () => (next.environment = w.production ? 'production' : next.environment === 'production' ? 'development' : next.environment));
  }
  if (w.has_high_impact_tools != null) set('has_high_impact_tools', () => (next.tools.high_impact = toolsPresent(next.tools.high_impact, w.has_high_impact_tools!, 'financial tool')));
  if (w.has_privileged_tools != null) set('has_privileged_tools', () => (next.tools.privileged = toolsPresent(next.tools.privileged, w.has_privileged_tools!, 'admin tool')));
  if (w.has_write_tools != null) set('has_write_tools', () => (next.tools.write = toolsPresent(next.tools.write, w.has_write_tools!, 'write tool')));
  if (w.gateway_enforced != null) set('gateway_enforced', () => (next.gateway_enforced = w.gateway_enforced!));
  if (w.attestation_current != null) set('attestation_current', () => (next.last_attested_at = w.attestation_current ? now.toISOString() : null));
  if (w.delegation_breadth != null) {
    set('delegation_breadth', () => {
      const d = next.delegations;
      if (w.delegation_breadth === 'none') next.delegations = { count: 0, principals: [], groups_or_services: 0, wildcard_scopes: 0 };
      else if (w.delegation_breadth === 'narrow') next.delegations = { count: 1, principals: d.principals.slice(0, 1).concat(d.principals.length ? [] : ['(a hypothetical person)']), groups_or_services: 0, wildcard_scopes: 0 };
      // Broad whatever the organisation's narrow limit: a wildcard scope is broad by definition.
      else next.delegations = { ...d, count: Math.max(d.count, 1), wildcard_scopes: Math.max(d.wildcard_scopes, 1), principals: d.principals.length ? d.principals : ['(a hypothetical principal)'] };
    });
  }
  if (w.max_data_classification != null) {
    set('max_data_classification', () => {
      const max = ORDER.indexOf(w.max_data_classification!);
      next.data_classification = w.max_data_classification!;
      next.data_reached = next.data_reached.map((d) => (ORDER.indexOf(d.classification) > max ? { ...d, classification: w.max_data_classification! } : d));
    });
  }
  if (w.resolve_findings) set('resolve_findings', () => (next.findings = { critical: 0, high: 0, medium: 0, low: 0, examples: [] }));
  if (w.clear_detections) set('clear_detections', () => (next.detections = { ...next.detections, denied: 0, secret_detected: 0, poisoned_tools: NONE }));
  if (w.approve_mcp_servers) set('approve_mcp_servers', () => (next.mcp_servers = next.mcp_servers.map((s) => ({ ...s, trust_state: 'approved' }))));
  if (w.use_scoped_identity) {
    set('use_scoped_identity', () => {
      const i = next.identity;
      next.identity = { workload_identities: Math.max(1, i.workload_identities), bindings: i.bindings, unscoped_bindings: 0, shared_credentials: NONE };
    });
  }
  return { inputs: next, applied };
}
