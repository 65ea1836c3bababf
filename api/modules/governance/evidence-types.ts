/**
 * The evidence event types: the one list of the `event_type` names Tollgate writes into an organisation's evidence
 * chain, who writes each one and what its payload holds. The spec leaves the catalogue open ("not shown"); these are
 * Tollgate's. The framework catalogues' default mappings may name only these (catalogue.ts checks it at start),
 * docs/governance.md shows the same table, and an organisation's own mapping of a type not listed here is accepted
 * but flagged (`catalogued: false`), since such a type is not written by anything yet.
 *
 * Adding a type: its writer appends it (`auditWithEvidence` or `appendEvidence` from the evidence module, in the
 * transaction of the change), an entry here, and the row in docs/governance.md.
 */

export interface EvidenceTypeEntry {
  /** Who writes it and when. */
  writtenBy: string;
  /** Whether its records carry the `agent_id` of the agent they are about. */
  agent: 'always' | 'when about one' | 'never';
  /** Its payload fields, name → meaning. */
  payload: Record<string, string>;
}

/** Fields every record written for a person or service account (through `auditWithEvidence`) adds to its payload. */
export const ACTOR_FIELDS: Record<string, string> = {
  actor_id: 'the person or service account who made the change',
  actor_type: '`service_account` when a service account made it (absent for a person)',
};

export const EVIDENCE_EVENT_TYPES = {
  decision: {
    writtenBy:
      'the gateway, for every decision (POST /actions, POST /actions/console), and again when an approved action is ' +
      'resubmitted with its approval token; in the batch that records the action',
    agent: 'always',
    payload: {
      tool: 'the tool key submitted (first decision)',
      operation: 'the operation submitted (first decision)',
      target: 'the target submitted (first decision)',
      decision: 'allow, deny or require_approval',
      reason_codes: 'every reason code of the decision (an array)',
      request_hash: 'the hash of the exact request',
      source: 'gateway (an agent) or console (a person) (first decision)',
      approval_id: 'the approval redeemed (decision on resubmission)',
    },
  },
  approval_request: {
    writtenBy: 'the gateway, when a decision is require_approval and an approval request opens',
    agent: 'always',
    payload: { approval_id: 'the approval', approvals_required: 'how many approvers must agree', expires_at: 'when the request lapses' },
  },
  approval: {
    writtenBy: 'POST /approvals/{id}/decision: every approver’s vote, approve or reject',
    agent: 'always',
    payload: {
      approval_id: 'the approval',
      approver_id: 'the person who voted',
      decision: 'approve or reject',
      reason: 'the approver’s reason',
      status: 'the approval’s status after the vote (pending, approved, rejected)',
    },
  },
  approval_cancelled: {
    writtenBy: 'POST /actions/{id}/cancel: a person cancels an action awaiting approval or resubmission',
    agent: 'always',
    payload: { approval_id: 'the approval cancelled', reason: 'why', ...ACTOR_FIELDS },
  },
  execution: {
    writtenBy: 'the gateway, when an allowed action runs',
    agent: 'always',
    payload: { tool: 'the tool key', status: 'succeeded or failed' },
  },
  containment: {
    writtenBy:
      'suspend, restore, revoke, revoke-sessions and gateway access of an agent (POST /agents/{id}/...); deny-class rules ' +
      'added and lifted (POST /actions/deny-class, /actions/deny-class/lift)',
    agent: 'when about one',
    payload: {
      action: 'suspend, restore, revoke, revoke_sessions, gateway_access, deny_class or deny_class_lifted',
      reason: 'why',
      status: 'for agents: {from, to}',
      gateway_access: 'for gateway access: {from, to}',
      identities_revoked: 'for revoke: the identities revoked',
      approvals_cancelled: 'for suspend and revoke: the approvals cancelled',
      rule_id: 'for deny-class rules: the rule',
      privilege_class: 'for a deny-class rule added: the class denied',
      ...ACTOR_FIELDS,
    },
  },
  policy_change: {
    writtenBy:
      'the policies module: a policy created, a version drafted, a version published, a status changed (its control_ref ' +
      'is `policy:<key>`)',
    agent: 'never',
    payload: {
      policy_id: 'the policy',
      key: 'its key',
      change: 'created, version_created, published or status_changed',
      number: 'the version concerned',
      rules_sha256: 'the hash of the version’s rules',
      previous_published_version: 'for published: the version it replaced',
      author_id: 'for published: the version’s author (never the publisher)',
      from: 'for status_changed: the status before',
      to: 'for status_changed: the status after',
      ...ACTOR_FIELDS,
    },
  },
  mcp_trust_change: {
    writtenBy: 'PATCH /mcp-servers/{id} (a person), and discovery demoting an approved server whose tool set changed',
    agent: 'never',
    payload: { mcp_server_id: 'the server', trust_state: '{from, to}', reason: 'why', run_id: 'the discovery run (discovery only)', ...ACTOR_FIELDS },
  },
  discovery_run: {
    writtenBy: 'the discovery job, when a run ends, succeeded or failed',
    agent: 'never',
    payload: {
      run_id: 'the run',
      integration_id: 'its integration',
      adapter: 'the adapter that ran',
      status: 'succeeded or failed',
      counters: 'what it found and changed',
      error_message: 'why it failed, or null',
    },
  },
  finding_update: {
    writtenBy: 'PATCH /findings/{id}: a finding triaged (status, assignee, note)',
    agent: 'when about one',
    payload: {
      finding_id: 'the finding',
      category: 'its category',
      severity: 'its severity',
      status: '{from, to} when the status changed',
      assigned_to: '{from, to} when the assignee changed',
      note_changed: 'true when the note changed (its text is not repeated)',
      ...ACTOR_FIELDS,
    },
  },
  integration_status: {
    writtenBy: 'POST /integrations/{id}/status',
    agent: 'never',
    payload: { integration_id: 'the integration', status: '{from, to}', reason: 'why', ...ACTOR_FIELDS },
  },
  connector_enabled: {
    writtenBy: 'POST /connectors/{id}/enabled',
    agent: 'never',
    payload: { connector_id: 'the connector', integration_id: 'its integration', enabled: '{from, to}', reason: 'why', ...ACTOR_FIELDS },
  },
  binding_reapproval: {
    writtenBy: 'POST /agents/{id}/permissions/{binding_id}/reapprove: a binding re-pinned to its tool’s new definition',
    agent: 'always',
    payload: {
      binding_id: 'the binding',
      tool_id: 'its tool',
      reason: 'why the new definition is acceptable',
      previous_definition_hash: 'the definition it was pinned to',
      definition_hash: 'the definition it is pinned to now',
      ...ACTOR_FIELDS,
    },
  },
  risk_ruleset_change: {
    writtenBy: 'PATCH /risks/ruleset/{factor_key}: a risk factor switched on or off for the organisation',
    agent: 'never',
    payload: { factor_key: 'the factor', enabled: '{from, to}', reason: 'why', ...ACTOR_FIELDS },
  },
  control_mapping: {
    writtenBy: 'POST /controls/{id}/mappings: the organisation maps an evidence event type to a control (its control_ref is the control’s key)',
    agent: 'never',
    payload: {
      mapping_id: 'the mapping',
      control_id: 'the control',
      control_key: 'the control’s key, `<framework>:<ref>`',
      evidence_event_type: 'the type mapped',
      condition: 'the condition, or null',
      rationale: 'why this evidence shows the control works',
      catalogued: 'false when the type is not in this catalogue (absent otherwise)',
      ...ACTOR_FIELDS,
    },
  },
  exception_decision: {
    writtenBy: 'POST /exceptions/{id}/decision: an exception approved or rejected (its control_ref is the control’s key)',
    agent: 'when about one',
    payload: {
      exception_id: 'the exception',
      control_id: 'its control',
      control_key: 'the control’s key',
      decision: 'approve or reject',
      note: 'the decider’s note',
      status: 'approved or rejected',
      expires_at: 'when an approved exception lapses',
      requested_by: 'who asked for it (never the decider)',
      ...ACTOR_FIELDS,
    },
  },
  ai_system_classification: {
    writtenBy: 'POST /governance/systems/{agent_id}/classify: an agent classified as an AI system',
    agent: 'always',
    payload: {
      classification: '{from, to}; from is unclassified the first time',
      rationale: 'why this class',
      gaps: 'the keys of the gaps the class shows for the agent',
      remediation_task_ids: 'the remediation tasks the classification opened',
      ...ACTOR_FIELDS,
    },
  },
} satisfies Record<string, EvidenceTypeEntry>;

export type EvidenceEventType = keyof typeof EVIDENCE_EVENT_TYPES;

export const EVIDENCE_EVENT_TYPE_NAMES = Object.keys(EVIDENCE_EVENT_TYPES) as EvidenceEventType[];

export const isCatalogued = (name: string): name is EvidenceEventType => Object.hasOwn(EVIDENCE_EVENT_TYPES, name);
