/**
 * The spec's 40 permissions and Tollgate's built-in roles. docs/roles.md shows the same matrix;
 * test/unit/roles.test.ts fails when the two drift.
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

const reads = ALL_PERMISSIONS.filter((p) => p.endsWith(':read'));

export interface RoleDefinition {
  key: string;
  name: string;
  description: string;
  permissions: Permission[];
}

export const ROLES: RoleDefinition[] = [
  {
    key: 'org_admin',
    name: 'Organisation administrator',
    description: 'Everything, including people, roles, settings and the organisation itself.',
    permissions: [...ALL_PERMISSIONS],
  },
  {
    key: 'security_admin',
    name: 'Security administrator',
    description:
      'Runs governance: contains agents, publishes policies, decides approvals and exceptions. Cannot manage people or the organisation.',
    permissions: ALL_PERMISSIONS.filter((p) => !['tenant:manage', 'user:manage', 'settings:manage'].includes(p)),
  },
  {
    key: 'approver',
    name: 'Approver',
    description: 'Decides approval requests and reads what it needs to judge them.',
    permissions: [
      'tenant:read',
      'role:read',
      'agent:read',
      'inventory:read',
      'policy:read',
      'action:read',
      'approval:read',
      'approval:decide',
      'evidence:read',
    ],
  },
  {
    key: 'agent_developer',
    name: 'Agent developer',
    description:
      'Registers agents, their inventory and identities, drafts policies and tests them; cannot publish or contain.',
    permissions: [
      'tenant:read',
      'role:read',
      'settings:read',
      'agent:read',
      'agent:write',
      'identity:read',
      'identity:manage',
      'inventory:read',
      'inventory:write',
      'integration:read',
      'graph:read',
      'risk:read',
      'finding:read',
      'telemetry:read',
      'policy:read',
      'policy:write',
      'action:read',
      'action:test',
      'approval:read',
    ],
  },
  {
    key: 'auditor',
    name: 'Auditor',
    description: 'Reads everything, exports the graph and creates reports; changes nothing else.',
    permissions: [...reads, 'graph:export', 'report:create'],
  },
  {
    key: 'viewer',
    name: 'Viewer',
    description: 'Reads the registry, inventory, policies and actions.',
    permissions: [
      'tenant:read',
      'role:read',
      'agent:read',
      'inventory:read',
      'graph:read',
      'risk:read',
      'finding:read',
      'policy:read',
      'action:read',
      'approval:read',
    ],
  },
  {
    key: 'controller',
    name: 'Kubernetes controller',
    description:
      'For the service account of the Kubernetes controller: reconciles agents, identities, inventory and policy drafts; cannot publish policies, so a person still does.',
    permissions: [
      'tenant:read',
      'role:read',
      'agent:read',
      'agent:write',
      // A deleted Agent resource revokes its agent.
      'agent:control',
      'identity:read',
      'identity:manage',
      'inventory:read',
      'inventory:write',
      // A deleted Tool is blocked, a deleted MCPServer quarantined.
      'inventory:control',
      'policy:read',
      'policy:write',
    ],
  },
];

export const ROLE_KEYS = ROLES.map((r) => r.key) as [string, ...string[]];
const byKey = new Map(ROLES.map((r) => [r.key, r]));

export function permissionsOf(roles: readonly string[]): Set<Permission> {
  const out = new Set<Permission>();
  for (const key of roles) for (const p of byKey.get(key)?.permissions ?? []) out.add(p);
  return out;
}

/**
 * The permissions `roles` grant that `held` lacks: whoever grants roles to another principal must
 * hold every permission they grant (no escalation). Empty when the grant is allowed.
 */
export function permissionsBeyond(held: ReadonlySet<Permission>, roles: readonly string[]): Permission[] {
  return [...permissionsOf(roles)].filter((p) => !held.has(p));
}
