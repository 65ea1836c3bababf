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

export interface DB {
  organisations: OrganisationsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  sessions: SessionsTable;
  audit_events: AuditEventsTable;
  notifications: NotificationsTable;
  rate_limit_buckets: RateLimitBucketsTable;
}
