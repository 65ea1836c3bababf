/** Role and database names of the test harness. */
export const OWNER_ROLE = 'tollgate_owner';
export const RUNTIME_ROLE = 'tollgate_app';
export const ROLE_PASSWORD = 'tollgate-test';
export const TEMPLATE_DB = 'tollgate_template';

/** The same server as `url`, another database and (optionally) another role. */
export function withDatabase(url: string, database: string, role?: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  if (role) {
    u.username = role;
    u.password = ROLE_PASSWORD;
  }
  return u.toString();
}
