/**
 * The spec's 40 permissions and Tollgate's built-in roles. docs/roles.md shows the same matrix;
 * test/unit/roles.test.ts fails when the two drift.
 */
import { ALL_PERMISSIONS, type Permission } from '../../platform/permissions.js';

export { ALL_PERMISSIONS, PERMISSIONS, type Permission } from '../../platform/permissions.js';

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
      // An Agent's status shows its last decision, and its Events the calls denied (gateway.decision events).
      'telemetry:read',
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

/** The keys of the roles that grant `permission`: who is told about work that needs it. */
export function rolesGranting(permission: Permission): string[] {
  return ROLES.filter((r) => r.permissions.includes(permission)).map((r) => r.key);
}

/**
 * The permissions `roles` grant that `held` lacks: whoever grants roles to another principal must
 * hold every permission they grant (no escalation). Empty when the grant is allowed.
 */
export function permissionsBeyond(held: ReadonlySet<Permission>, roles: readonly string[]): Permission[] {
  return [...permissionsOf(roles)].filter((p) => !held.has(p));
}
