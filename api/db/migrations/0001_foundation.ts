import { sql, type Kysely } from 'kysely';
import { createRuntimeRoleIfMissing, enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * Organisations, people and their memberships, sessions, audit log, notifications and the shared
 * rate-limit buckets. Organisation-owned tables carry org_id and a row-level-security policy keyed on
 * the transaction-local setting app.org_id (see inScope in api/db/database.ts).
 */
export function foundation(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await createRuntimeRoleIfMissing(db, runtimeRole);
      await run(db, [
        `create function app_org_id() returns uuid language sql stable as
           $$ select nullif(current_setting('app.org_id', true), '')::uuid $$`,
        `create function app_user_id() returns uuid language sql stable as
           $$ select nullif(current_setting('app.user_id', true), '')::uuid $$`,
        `create table organisations (
           id uuid primary key,
           slug text not null unique,
           name text not null,
           primary_region text not null,
           plan text not null default 'developer',
           content_retention text not null default 'redacted_excerpts',
           approval_ttl_seconds integer not null default 900
             check (approval_ttl_seconds between 60 and 86400),
           owners_count_as_self boolean not null default false,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now()
         )`,
        `-- A person is global (one sign-in, several organisations); what an organisation knows of a
         -- person is its membership row below.
         create table users (
           id uuid primary key,
           email text not null,
           display_name text not null,
           created_at timestamptz not null default now()
         )`,
        `create unique index users_email_key on users (lower(email))`,
        `create table memberships (
           org_id uuid not null references organisations (id),
           user_id uuid not null references users (id),
           display_name text not null,
           roles text[] not null,
           status text not null default 'active' check (status in ('active', 'disabled')),
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           primary key (org_id, user_id)
         )`,
        `create index memberships_user on memberships (user_id)`,
        `create index memberships_page on memberships (org_id, created_at, user_id)`,
        `create table sessions (
           id text primary key,
           user_id uuid not null references users (id) on delete cascade,
           org_id uuid references organisations (id),
           csrf_token text not null,
           created_at timestamptz not null default now(),
           expires_at timestamptz not null
         )`,
        `create index sessions_user on sessions (user_id)`,
        `create table audit_events (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           at timestamptz not null default now(),
           actor_type text not null,
           actor_id text,
           action text not null,
           target_type text,
           target_id text,
           outcome text not null,
           correlation_id text not null,
           details jsonb not null default '{}'
         )`,
        `create index audit_events_page on audit_events (org_id, at desc, id desc)`,
        `create table notifications (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           user_id uuid not null references users (id),
           kind text not null,
           title text not null,
           body text not null default '',
           read_at timestamptz,
           created_at timestamptz not null default now()
         )`,
        `create index notifications_page on notifications (org_id, user_id, created_at desc, id desc)`,
        `-- Unlogged: a counter lost in a crash costs nothing, and writes need no WAL flush per request.
         create unlogged table rate_limit_buckets (
           key text primary key,
           window_start bigint not null,
           count integer not null
         )`,
      ]);

      // Organisations: visible when it is the transaction's organisation or one the person belongs to.
      await run(db, [
        `alter table organisations enable row level security`,
        `create policy org_isolation on organisations
           using (id = app_org_id() or exists (
             select 1 from memberships m where m.org_id = organisations.id and m.user_id = app_user_id()))
           with check (id = app_org_id())`,
        `alter table memberships enable row level security`,
        `create policy org_isolation on memberships
           using (org_id = app_org_id() or user_id = app_user_id())
           with check (org_id = app_org_id())`,
      ]);
      await enableOrgIsolation(db, ['audit_events', 'notifications']);

      // Authenticating a request reads the session and the membership it acts in. This owner-defined
      // function does it in one round trip, keyed by the hash of the session token; it returns nothing
      // for an unknown or expired session and exposes no other row.
      await run(db, [
        `create function session_principal(p_session_id text, p_now timestamptz)
           returns table (user_id uuid, org_id uuid, csrf_token text, email text,
                          roles text[], status text, display_name text)
           language sql stable security definer set search_path = public as $$
             select s.user_id, s.org_id, s.csrf_token, u.email, m.roles, m.status, m.display_name
             from sessions s
             join users u on u.id = s.user_id
             join memberships m on m.org_id = s.org_id and m.user_id = s.user_id
             where s.id = p_session_id and s.expires_at > p_now
           $$`,
        `revoke all on function session_principal(text, timestamptz) from public`,
      ]);
      await sql`grant execute on function session_principal(text, timestamptz) to ${sql.id(runtimeRole)}`.execute(db);

      await grantRuntime(db, runtimeRole, {
        organisations: 'select, insert, update',
        users: 'select, insert, update',
        memberships: 'select, insert, update, delete',
        sessions: 'select, insert, update, delete',
        audit_events: 'select, insert', // the audit log is append-only for the API
        notifications: 'select, insert, update',
        rate_limit_buckets: 'select, insert, update, delete',
      });
    },
  };
}
