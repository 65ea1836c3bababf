/**
 * The console's pages: the path of each, its name in the navigation and the permission that shows it
 * (the API checks every operation again; a hidden link is a courtesy, not a control). `tollgate api`
 * answers index.html for these paths and everything under them (api/platform/console.ts lists the
 * same top-level paths; test/console/serving.test.ts checks that the two lists agree).
 */
export interface SectionInfo {
  path: string;
  label: string;
  permission: string;
}

export const SECTIONS: readonly SectionInfo[] = [
  { path: '/', label: 'Dashboard', permission: 'agent:read' },
  { path: '/approvals', label: 'Approvals', permission: 'approval:read' },
  { path: '/agents', label: 'Agents', permission: 'agent:read' },
  { path: '/actions', label: 'Actions', permission: 'action:read' },
  { path: '/evidence', label: 'Evidence', permission: 'evidence:read' },
  { path: '/policies', label: 'Policies', permission: 'policy:read' },
  { path: '/inventory', label: 'Inventory', permission: 'inventory:read' },
  { path: '/findings', label: 'Findings', permission: 'finding:read' },
  { path: '/graph', label: 'Graph', permission: 'graph:read' },
  { path: '/risk', label: 'Risk', permission: 'risk:read' },
  { path: '/governance', label: 'Governance', permission: 'governance:read' },
  { path: '/reports', label: 'Reports', permission: 'report:read' },
  { path: '/integrations', label: 'Integrations', permission: 'integration:read' },
];

/** Pages outside the navigation: sign-in and onboarding. */
export const OTHER_PATHS = ['/sign-in', '/onboarding'] as const;
