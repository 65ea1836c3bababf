import { sql, type Kysely } from 'kysely';
import { grantRuntime, run } from './helpers.js';

/**
 * Self-service sign-up (docs/authentication.md, Self-service sign-up). A sign-up waits in `signups` until its
 * emailed code is verified; verifying creates the person (`users`) and keeps their password hash in
 * `local_credentials`. Neither table belongs to an organisation (the person has none yet), so no org_id and no
 * row-level security: the runtime role's grants are what narrow them. Codes are stored as hashes only.
 */
export function signup(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table signups (
           id uuid primary key,
           email text not null check (length(email) <= 254),
           name text not null check (length(name) between 2 and 120),
           password_hash text not null,
           consent_at timestamptz not null,
           code_hash text,
           code_expires_at timestamptz,
           attempts integer not null default 0 check (attempts >= 0),
           last_sent_at timestamptz,
           created_at timestamptz not null,
           updated_at timestamptz not null
         )`,
        // One waiting sign-up an address: signing up again replaces it.
        `create unique index signups_email_key on signups (lower(email))`,
        `create index signups_created on signups (created_at)`,
        `create table local_credentials (
           user_id uuid primary key references users (id) on delete cascade,
           password_hash text not null,
           -- When the person consented at sign-up: the record of consent outlives the sign-up.
           consent_at timestamptz,
           created_at timestamptz not null,
           updated_at timestamptz not null
         )`,
      ]);
      await grantRuntime(db, runtimeRole, { signups: 'select, insert, update, delete' });
      // Written once at verification and never read by the API (no password sign-in yet): the runtime role
      // may see whose hash is kept (the insert's conflict check needs that) but not the hash.
      await sql`grant select (user_id), insert on local_credentials to ${sql.id(runtimeRole)}`.execute(db);
    },
  };
}
