import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALL_PERMISSIONS, ROLES, permissionsBeyond, permissionsOf } from '../../api/modules/roles/catalogue.js';
import { withMatrix } from '../../scripts/roles-document.js';

// The spec's "Permissions named" (behaviour.md, Authentication).
const SPEC_PERMISSIONS = `tenant:read tenant:manage role:read settings:read settings:manage user:read user:manage agent:read
agent:write agent:control identity:read identity:manage inventory:read inventory:write inventory:control integration:read
integration:manage connector:run graph:read graph:export risk:read risk:configure finding:read finding:write telemetry:read
policy:read policy:write policy:publish action:read action:control action:test approval:read approval:decide audit:read
evidence:read governance:read governance:write exception:approve report:read report:create`.split(/\s+/);

describe('role catalogue', () => {
  it('holds exactly the 40 permissions of the spec', () => {
    expect(SPEC_PERMISSIONS).toHaveLength(40);
    expect([...ALL_PERMISSIONS].sort()).toEqual([...SPEC_PERMISSIONS].sort());
  });

  it('lets both administrator roles of the spec publish policies', () => {
    expect(permissionsOf(['org_admin']).has('policy:publish')).toBe(true);
    expect(permissionsOf(['security_admin']).has('policy:publish')).toBe(true);
  });

  it('keeps the narrower roles narrow', () => {
    const writes = (key: string) => [...permissionsOf([key])].filter((p) => !p.endsWith(':read'));
    expect(writes('auditor').sort()).toEqual(['graph:export', 'report:create']);
    expect(writes('viewer')).toEqual([]);
    expect(permissionsOf(['agent_developer']).has('policy:publish')).toBe(false);
    expect(permissionsOf(['approver']).has('approval:decide')).toBe(true);
    for (const r of ROLES) for (const p of r.permissions) expect(ALL_PERMISSIONS).toContain(p);
  });

  it("gives the Kubernetes controller what reconciling needs, and never policy:publish", () => {
    expect([...permissionsOf(['controller'])].sort()).toEqual(
      [
        'tenant:read',
        'role:read',
        'agent:read',
        'agent:write',
        'agent:control',
        'identity:read',
        'identity:manage',
        'inventory:read',
        'inventory:write',
        'inventory:control',
        'policy:read',
        'policy:write',
        'telemetry:read',
      ].sort(),
    );
    expect(permissionsOf(['controller']).has('policy:publish')).toBe(false);
    expect(permissionsOf(['controller']).has('user:manage')).toBe(false);
  });

  it('names the permissions a grant of roles would add beyond what the granter holds', () => {
    expect(permissionsBeyond(permissionsOf(['org_admin']), ['controller', 'security_admin'])).toEqual([]);
    expect(permissionsBeyond(permissionsOf(['agent_developer']), ['viewer'])).toEqual([]);
    expect(permissionsBeyond(permissionsOf(['agent_developer']), ['controller']).sort()).toEqual(['agent:control', 'inventory:control']);
    expect(permissionsBeyond(new Set(), ['controller'])).toHaveLength(permissionsOf(['controller']).size);
    expect(permissionsBeyond(new Set(), [])).toEqual([]);
  });

  it('gives the union of permissions for several roles, and nothing for unknown ones', () => {
    const both = permissionsOf(['viewer', 'approver']);
    expect(both.has('approval:decide')).toBe(true);
    expect(both.has('graph:read')).toBe(true);
    expect(permissionsOf(['no_such_role']).size).toBe(0);
  });

  it('matches the matrix in docs/roles.md (run `make docs` after changing a role)', () => {
    const doc = readFileSync(new URL('../../docs/roles.md', import.meta.url), 'utf8');
    expect(withMatrix(doc)).toBe(doc);
  });
});
