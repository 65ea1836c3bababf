/**
 * The spec's 40 permissions: what an operation's caller names (platform/route.ts) and what the
 * authentication hook checks. The built-in roles that grant them live in the roles module.
 */
export const PERMISSIONS = {
  'tenant:read': 'Read the organisation profile',
  'tenant:manage': 'Rename the organisation',
  'role:read': 'Read roles and the permission catalogue',
  'settings:read': 'Read organisation settings',
  'settings:manage': 'Change organisation settings',
  'user:read': 'List people of the organisation',
  'user:manage': 'Add people, change their roles, disable them',
  'agent:read': 'Read agents, their containment history and the dashboard; attest agents',
  'agent:write': 'Register and edit agents, owners and versions',
  'agent:control': 'Contain agents: suspend, restore, revoke, gateway access, credential actions',
  'identity:read': 'List workload identities',
  'identity:manage': 'Issue and revoke identities, delegations and permission bindings',
  'inventory:read': 'Read MCP servers, models, resources, credentials and tools',
  'inventory:write': 'Register and edit inventory',
  'inventory:control': 'Change MCP trust states, block tools',
  'integration:read': 'Read integrations, connector runs and the catalogue',
  'integration:manage': 'Configure integrations, connectors and credential references',
  'connector:run': 'Start discovery runs',
  'graph:read': 'Read the agent security graph',
  'graph:export': 'Export the graph',
  'risk:read': 'Read risk scores, history, ruleset and what-if',
  'risk:configure': 'Recalculate risk, change the ruleset, rebuild the graph',
  'finding:read': 'Read findings',
  'finding:write': 'Triage findings',
  'telemetry:read': 'Read telemetry',
  'policy:read': 'Read policies and operators',
  'policy:write': 'Author policies and draft versions',
  'policy:publish': 'Publish versions and change policy status',
  'action:read': 'Read actions, decisions and executions',
  'action:control': 'Cancel actions, deny or lift privilege classes',
  'action:test': 'Simulate policies and run console actions',
  'approval:read': 'Read approvals',
  'approval:decide': 'Approve or reject approval requests',
  'audit:read': 'Read the audit log',
  'evidence:read': 'Read and verify the evidence chain',
  'governance:read': 'Read controls, exceptions, frameworks, remediation and systems',
  'governance:write': 'Map controls, request exceptions, manage remediation, classify systems',
  'exception:approve': 'Decide exceptions',
  'report:read': 'Read and download reports',
  'report:create': 'Create reports',
} as const;

export type Permission = keyof typeof PERMISSIONS;
export const ALL_PERMISSIONS = Object.keys(PERMISSIONS) as Permission[];
