import type { ColumnType, Generated } from 'kysely';

/** Row types of the tables, as the database returns them. Repositories map them to API shapes. */

export interface OrganisationsTable {
  id: string;
  slug: string;
  name: string;
  primary_region: string;
  plan: Generated<string>;
  content_retention: Generated<string>;
  approval_ttl_seconds: Generated<number>;
  owners_count_as_self: Generated<boolean>;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface UsersTable {
  id: string;
  email: string;
  display_name: string;
  created_at: Generated<Date>;
}

export interface MembershipsTable {
  org_id: string;
  user_id: string;
  display_name: string;
  roles: string[];
  status: Generated<string>;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface SessionsTable {
  id: string; // SHA-256 of the cookie value: the token itself is never stored
  user_id: string;
  org_id: string | null;
  csrf_token: string;
  created_at: Generated<Date>;
  expires_at: Date;
}

export interface AuditEventsTable {
  id: string;
  org_id: string;
  at: Generated<Date>;
  actor_type: string;
  actor_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  outcome: string;
  correlation_id: string;
  details: ColumnType<Record<string, unknown>, string, string>;
}

export interface NotificationsTable {
  id: string;
  org_id: string;
  user_id: string;
  kind: string;
  title: string;
  body: string;
  read_at: Date | null;
  created_at: Generated<Date>;
}

export interface RateLimitBucketsTable {
  key: string;
  window_start: number; // epoch milliseconds (bigint)
  count: number;
}


type Json<T = Record<string, unknown>> = ColumnType<T, string, string>;

export interface AgentsTable {
  id: string;
  org_id: string;
  slug: string;
  name: string;
  description: string;
  purpose: string;
  framework: string;
  environment: string;
  business_unit: string | null;
  criticality: string;
  data_classification: string;
  internet_exposure: string;
  code_execution: string;
  persistent_memory: string;
  human_approval_coverage: string;
  gateway_enforced: Generated<boolean>;
  tags: string[];
  status: Generated<string>;
  gateway_access: Generated<boolean>;
  session_epoch: Generated<number>;
  source: Generated<string>;
  external_ref: string | null;
  risk_band: string | null;
  last_attested_at: Date | null;
  last_seen_at: Date | null;
  integration_id: string | null;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface AgentOwnersTable {
  id: string;
  org_id: string;
  agent_id: string;
  name: string;
  email: string;
  owner_type: string;
  created_at: Generated<Date>;
}

export interface AgentVersionsTable {
  id: string;
  org_id: string;
  agent_id: string;
  version_label: string;
  model_id: string | null;
  manifest: Json;
  change_summary: string;
  created_by: string | null;
  created_at: Generated<Date>;
}

export interface AgentAttestationsTable {
  id: string;
  org_id: string;
  agent_id: string;
  statement: string;
  attested_by: string;
  attested_at: Date;
}

export interface ContainmentEventsTable {
  id: string;
  /** Insertion order: events in the same millisecond keep the order they happened in. */
  seq: Generated<string>;
  org_id: string;
  agent_id: string;
  action: string;
  reason: string;
  actor_id: string | null;
  correlation_id: string;
  details: Json;
  at: Date;
}

export interface WorkloadIdentitiesTable {
  id: string;
  org_id: string;
  agent_id: string;
  client_id: string;
  secret_hash: string;
  status: Generated<string>;
  created_by: string | null;
  created_at: Generated<Date>;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

export interface DelegationsTable {
  id: string;
  org_id: string;
  agent_id: string;
  principal_ref: string;
  display_name: string;
  principal_type: string;
  scopes: string[];
  expires_at: Date | null;
  created_by: string | null;
  created_at: Generated<Date>;
}

export interface PermissionBindingsTable {
  id: string;
  org_id: string;
  agent_id: string;
  target_kind: string;
  target_id: string;
  actions: string[];
  delegated: boolean;
  constraints: Json;
  expires_at: Date | null;
  identity_id: string | null;
  created_by: string | null;
  created_at: Generated<Date>;
  /** The tool definition hash the binding was granted against (rug-pull protection). */
  pinned_definition_hash: string | null;
  pinned_at: Date | null;
  pinned_by: string | null;
}

export interface McpServersTable {
  id: string;
  org_id: string;
  name: string;
  endpoint: string;
  transport: string;
  auth_type: string;
  publisher: string | null;
  trust_state: Generated<string>;
  capability_hash: string | null;
  protocol_version: string | null;
  source: Generated<string>;
  last_seen_at: Date | null;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ModelsTable {
  id: string;
  org_id: string;
  provider: string;
  model_name: string;
  model_version: string | null;
  hosting: string;
  data_policy: string;
  approved: Generated<boolean>;
  max_data_classification: string | null;
  source: Generated<string>;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ResourcesTable {
  id: string;
  org_id: string;
  resource_type: 'api' | 'data';
  name: string;
  system: string;
  base_url: string | null;
  auth_type: string | null;
  criticality: string | null;
  kind: string | null;
  classification: string | null;
  contains_personal_data: boolean | null;
  region: string | null;
  source: Generated<string>;
  created_at: Generated<Date>;
}

export interface CredentialRefsTable {
  id: string;
  org_id: string;
  name: string;
  provider: string;
  secret_path: string;
  credential_type: string;
  scope: string;
  shared: boolean;
  rotation_interval_days: number | null;
  status: Generated<string>;
  last_rotated_at: Date | null;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ToolsTable {
  id: string;
  org_id: string;
  tool_key: string;
  name: string;
  description: string;
  mcp_server_id: string | null;
  api_resource_id: string | null;
  data_resource_id: string | null;
  operations: string[];
  privilege_class: string;
  approval_class: string;
  idempotent: boolean;
  input_schema: Json;
  credential_ref_id: string | null;
  rate_limit_per_minute: number | null;
  blocked: Generated<boolean>;
  builtin: Generated<boolean>;
  title: string | null;
  read_only_hint: boolean | null;
  definition_hash: string | null;
  privilege_source: Generated<'declared' | 'discovery' | 'staff'>;
  source: Generated<string>;
  last_seen_at: Date | null;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface EvidenceRecordsTable {
  id: string;
  org_id: string;
  seq: ColumnType<string, number, number>;
  prev_hash: string;
  hash: string;
  signature: string;
  kid: string;
  event_type: string;
  agent_id: string | null;
  action_request_id: string | null;
  control_ref: string | null;
  correlation_id: string;
  payload: Json<unknown>;
  created_at: Date;
}

export interface EvidenceHeadsTable {
  org_id: string;
  seq: ColumnType<string, number, number>;
  hash: string;
}

export interface ActionRequestsTable {
  id: string;
  org_id: string;
  agent_id: string;
  identity_id: string | null;
  source: string;
  idempotency_key: string;
  request_hash: string;
  tool: string;
  operation: string;
  target: string;
  parameters: Json<unknown> | null;
  environment: string | null;
  on_behalf_of: string | null;
  justification: string | null;
  state: string;
  decision: string;
  reason_codes: string[];
  trace: Json<unknown>;
  approvals_required: number;
  execution_status: string | null;
  output_redacted: Json<unknown> | null;
  requested_by: string | null;
  correlation_id: string;
  created_at: Date;
  updated_at: Date;
  executed_at: Date | null;
  /** Milliseconds to the first decision; set while that decision is read as telemetry (migration 0013). */
  decision_ms: number | null;
  /**
   * What the first decision read besides the request and the registry (DecisionFacts, migration 0021); null
   * before it. Written as the object itself: the batch's one JSON document carries it as JSON, not as text.
   */
  decision_facts: ColumnType<unknown, object | null, object | null>;
}

export interface ApprovalsTable {
  id: string;
  org_id: string;
  action_id: string;
  agent_id: string;
  status: string;
  approvals_required: number;
  request_hash: string;
  expires_at: Date;
  token_used_at: Date | null;
  created_at: Date;
  decided_at: Date | null;
}

export interface ApprovalVotesTable {
  id: string;
  org_id: string;
  approval_id: string;
  approver_id: string;
  decision: string;
  reason: string;
  created_at: Date;
}

export interface DenyClassRulesTable {
  id: string;
  org_id: string;
  privilege_class: string;
  agent_id: string | null;
  reason: string;
  created_by: string | null;
  created_at: Date;
  lifted_at: Date | null;
  lifted_by: string | null;
  lift_reason: string | null;
}

export interface PoliciesTable {
  id: string;
  org_id: string;
  key: string;
  name: string;
  description: Generated<string>;
  critical: Generated<boolean>;
  status: Generated<string>;
  latest_version: Generated<number>;
  published_version: number | null;
  version: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface PolicyVersionsTable {
  id: string;
  org_id: string;
  policy_id: string;
  number: number;
  rules: Json<unknown[]>;
  change_note: Generated<string>;
  author_id: string | null;
  created_at: Generated<Date>;
  published_at: Date | null;
  published_by: string | null;
}

/** Raised by the database whenever a row a decision reads changes (migration 0006). */
export interface RegistryVersionsTable {
  org_id: string;
  version: string;
}

export interface ServiceAccountsTable {
  id: string;
  org_id: string;
  name: string;
  description: Generated<string>;
  roles: string[];
  client_id: string;
  secret_hash: string;
  previous_secret_hash: string | null;
  previous_valid_until: Date | null;
  status: Generated<string>;
  created_by: string | null;
  created_at: Generated<Date>;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export interface IntegrationsTable {
  id: string;
  org_id: string;
  kind: string;
  name: string;
  mode: Generated<string>;
  config: Json;
  credential_ref_id: string | null;
  status: Generated<string>;
  created_by: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface ConnectorsTable {
  id: string;
  org_id: string;
  integration_id: string;
  adapter_key: string;
  enabled: Generated<boolean>;
  last_run_at: Date | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

export interface DiscoveryRunsTable {
  id: string;
  org_id: string;
  connector_id: string;
  status: Generated<'running' | 'succeeded' | 'failed'>;
  idempotency_key: string | null;
  started_by: string | null;
  started_at: Generated<Date>;
  finished_at: Date | null;
  /** Written as JSON text, optional on insert (default {}). */
  counters: ColumnType<Record<string, unknown>, string | undefined, string>;
  warnings: Generated<string[]>;
  error_message: string | null;
  attempts: Generated<number>;
  correlation_id: Generated<string>;
}

export interface FindingsTable {
  id: string;
  org_id: string;
  category: string;
  severity: 'low' | 'medium' | 'high' | 'critical';
  status: Generated<'open' | 'in_progress' | 'resolved' | 'accepted' | 'false_positive'>;
  title: string;
  description: Generated<string>;
  /** Written as JSON text, optional on insert (default {}). */
  evidence: ColumnType<Record<string, unknown>, string | undefined, string>;
  agent_id: string | null;
  mcp_server_id: string | null;
  tool_id: string | null;
  run_id: string | null;
  dedupe_key: string;
  assigned_to: string | null;
  note: string | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  resolved_at: Date | null;
  version: Generated<number>;
}

export interface ToolVersionsTable {
  id: string;
  org_id: string;
  tool_id: string;
  number: number;
  title: string | null;
  description: string;
  input_schema: Json;
  read_only_hint: boolean | null;
  definition_hash: string;
  run_id: string | null;
  created_at: Generated<Date>;
}

export interface AgentExternalIdentitiesTable {
  id: string;
  org_id: string;
  agent_id: string;
  identity_type: string;
  subject: string;
  issuer: string | null;
  authentication_strength: 'weak' | 'moderate' | 'strong' | null;
  first_seen_at: Generated<Date>;
  last_seen_at: Generated<Date>;
}

/** Operational events, kept for TELEMETRY_RETENTION_DAYS (migration 0012, docs/telemetry.md). */
export interface TelemetryEventsTable {
  org_id: string;
  occurred_at: Date;
  id: string;
  event_type: string;
  severity: 'info' | 'low' | 'medium' | 'high' | 'critical';
  agent_id: string | null;
  correlation_id: string;
  summary: string;
  attributes: Json<Record<string, unknown>>;
}

/** The Agent Risk Score (migration 0010; docs/risk-and-graph.md). */
export interface RiskFactorsTable {
  key: string;
  position: number;
  description: string;
  weight: number;
  enabled: Generated<boolean>;
  parameters: ColumnType<Record<string, unknown>, string | undefined, string>;
}

export interface RiskFactorOverridesTable {
  org_id: string;
  factor_key: string;
  enabled: boolean;
  reason: string;
  changed_by: string | null;
  changed_at: Date;
}

export interface RiskScoresTable {
  org_id: string;
  agent_id: string;
  score: number;
  band: string;
  /** The sum of the contributions before bounding to 0-100. */
  raw_total: number;
  factors: ColumnType<unknown[], string, string>;
  inputs: ColumnType<Record<string, unknown>, string, string>;
  computed_at: Date;
}

export interface RiskHistoryTable {
  org_id: string;
  agent_id: string;
  /** A calendar day (UTC); node-postgres answers a `date` as text when told to, a Date otherwise. */
  day: ColumnType<Date | string, string, string>;
  score: number;
  band: string;
  computed_at: Date;
}

export interface RiskStaleTable {
  org_id: string;
  agent_id: string;
  generation: ColumnType<string, number | undefined, number>;
  marked_at: Generated<Date>;
}

export interface RiskOrgsTable {
  org_id: string;
  job_queued: Generated<boolean>;
  full_generation: ColumnType<string, number | undefined, number>;
  full_done: ColumnType<string, number | undefined, number>;
  refresh_due_at: Date | null;
}

/** The Agent Security Graph (migration 0011; docs/risk-and-graph.md, "The graph"). */
export interface GraphVersionsTable {
  org_id: string;
  version: string;
  changed_at: Date;
}

export interface GraphNodesTable {
  row_id: Generated<string>;
  org_id: string;
  id: string;
  kind: string;
  key: string;
  label: string;
  risk_level: string;
  source_table: string;
  source_id: string;
  attributes: Json;
  digest: string;
  valid_from: Date;
  valid_to: Date | null;
}

export interface GraphEdgesTable {
  row_id: Generated<string>;
  org_id: string;
  id: string;
  kind: string;
  from_id: string;
  to_id: string;
  source_table: string;
  source_id: string;
  attributes: Json;
  expires_at: Date | null;
  digest: string;
  valid_from: Date;
  valid_to: Date | null;
}

export interface GraphStateTable {
  org_id: string;
  projected_version: string;
  projection_id: string;
  stamp: Date;
  node_count: number;
  edge_count: number;
  projected_at: Date;
}

// Governance (migration 0014).

/** Governance (migration 0014; docs/governance.md). Controls are the shipped catalogue, not rows. */
export interface GovernanceControlMappingsTable {
  id: string;
  org_id: string;
  control_id: string;
  evidence_event_type: string;
  rationale: string;
  /** What the evidence record's payload must contain (jsonb `@>`); null: any record of the type. */
  condition: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  created_by: string | null;
  created_at: Date;
}

export interface GovernanceExceptionsTable {
  id: string;
  org_id: string;
  control_id: string;
  agent_id: string | null;
  title: string;
  justification: string;
  compensating_controls: string;
  owner_email: string;
  expires_at: Date;
  /** pending, approved or rejected; `expired` is worked out from expires_at when read. */
  status: Generated<string>;
  requested_by: string | null;
  requested_by_type: 'person' | 'service_account';
  created_at: Date;
  decided_by: string | null;
  decided_at: Date | null;
  decision_note: string | null;
  expiry_notified_at: Date | null;
  version: Generated<number>;
}

export interface GovernanceRemediationTasksTable {
  id: string;
  org_id: string;
  title: string;
  description: string;
  control_id: string | null;
  agent_id: string | null;
  finding_id: string | null;
  assignee_email: string | null;
  due_at: Date | null;
  priority: string;
  status: Generated<string>;
  source: 'manual' | 'classification';
  gap: string | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
  closed_at: Date | null;
  version: Generated<number>;
}

export interface GovernanceAiSystemsTable {
  org_id: string;
  agent_id: string;
  classification: string;
  rationale: string;
  classified_by: string | null;
  classified_by_type: 'person' | 'service_account';
  classified_at: Date;
  version: Generated<number>;
}

// Reports (migration 0015).

/** Reports and their files (migration 0015; docs/reports.md). */
export interface ReportsTable {
  id: string;
  org_id: string;
  kind: string;
  parameters: Json;
  format: string;
  status: Generated<'queued' | 'running' | 'ready' | 'failed'>;
  /** The file once ready: node-postgres answers a Buffer, the embedded database a Uint8Array. */
  content: Uint8Array | null;
  content_type: string | null;
  file_name: string | null;
  size: number | null;
  error: string | null;
  attempts: Generated<number>;
  created_by: string | null;
  created_by_type: 'person' | 'service_account';
  correlation_id: Generated<string>;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

// Evidence checkpoints (migration 0016).

/** Signed checkpoints of each organisation's evidence chain head (migration 0016; docs/evidence.md). */
export interface EvidenceCheckpointsTable {
  org_id: string;
  /** The head's seq: the number of records in the chain when the checkpoint was signed. */
  seq: ColumnType<string, number, number>;
  hash: string;
  created_at: Date;
  kid: string;
  signature: string;
}

// Self-service sign-up (migration 0018).

/** A sign-up waiting for its emailed code (migration 0018; docs/authentication.md). The code is kept hashed only. */
export interface SignupsTable {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  consent_at: Date;
  code_hash: string | null;
  code_expires_at: Date | null;
  attempts: Generated<number>;
  last_sent_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A person's password hash (Argon2id), kept from a verified sign-up (migration 0018). The API only writes it. */
export interface LocalCredentialsTable {
  user_id: string;
  password_hash: string;
  consent_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A person's OpenID Connect identity: issuer and subject (0017). */
export interface UserIdentitiesTable {
  issuer: string;
  subject: string;
  user_id: string;
  created_at: Generated<Date>;
  last_sign_in_at: Date | null;
}

/** What an agent did earlier in one session (SessionFacts), for flow rules (migration 0021). */
export interface AgentSessionsTable {
  org_id: string;
  agent_id: string;
  session_key: string;
  facts: ColumnType<unknown, object, object>;
  first_at: Date;
  last_at: Date;
}

/** The summary of one replay of a policy version (migration 0021). */
export interface PolicyReplaysTable {
  id: string;
  org_id: string;
  policy_id: string;
  version_number: number;
  window_from: Date;
  window_to: Date;
  agent_id: string | null;
  summary: Json<unknown>;
  requested_by: string | null;
  created_at: Date;
}

export interface DB {
  organisations: OrganisationsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  sessions: SessionsTable;
  audit_events: AuditEventsTable;
  notifications: NotificationsTable;
  rate_limit_buckets: RateLimitBucketsTable;
  agents: AgentsTable;
  agent_owners: AgentOwnersTable;
  agent_versions: AgentVersionsTable;
  agent_attestations: AgentAttestationsTable;
  containment_events: ContainmentEventsTable;
  workload_identities: WorkloadIdentitiesTable;
  delegations: DelegationsTable;
  permission_bindings: PermissionBindingsTable;
  mcp_servers: McpServersTable;
  models: ModelsTable;
  resources: ResourcesTable;
  credential_refs: CredentialRefsTable;
  tools: ToolsTable;
  evidence_records: EvidenceRecordsTable;
  evidence_heads: EvidenceHeadsTable;
  action_requests: ActionRequestsTable;
  agent_sessions: AgentSessionsTable;
  policy_replays: PolicyReplaysTable;
  approvals: ApprovalsTable;
  approval_votes: ApprovalVotesTable;
  deny_class_rules: DenyClassRulesTable;
  policies: PoliciesTable;
  policy_versions: PolicyVersionsTable;
  registry_versions: RegistryVersionsTable;
  service_accounts: ServiceAccountsTable;
  integrations: IntegrationsTable;
  connectors: ConnectorsTable;
  discovery_runs: DiscoveryRunsTable;
  findings: FindingsTable;
  tool_versions: ToolVersionsTable;
  agent_external_identities: AgentExternalIdentitiesTable;
  risk_factors: RiskFactorsTable;
  risk_factor_overrides: RiskFactorOverridesTable;
  risk_scores: RiskScoresTable;
  risk_history: RiskHistoryTable;
  risk_stale: RiskStaleTable;
  risk_orgs: RiskOrgsTable;
  telemetry_events: TelemetryEventsTable;
  graph_versions: GraphVersionsTable;
  graph_nodes: GraphNodesTable;
  graph_edges: GraphEdgesTable;
  graph_state: GraphStateTable;
  // governance (0014)
  governance_control_mappings: GovernanceControlMappingsTable;
  governance_exceptions: GovernanceExceptionsTable;
  governance_remediation_tasks: GovernanceRemediationTasksTable;
  governance_ai_systems: GovernanceAiSystemsTable;
  // reports (0015)
  reports: ReportsTable;
  // evidence checkpoints (0016)
  evidence_checkpoints: EvidenceCheckpointsTable;
  // OpenID Connect identities of people (0017)
  user_identities: UserIdentitiesTable;
  // sign-up (0018)
  signups: SignupsTable;
  local_credentials: LocalCredentialsTable;
}
