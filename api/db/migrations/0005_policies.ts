import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * Policies with numbered versions. A policy's published version, while the policy is active, is what
 * the gateway evaluates; drafts never are. (Authoring, four-eyes publishing and the operator set
 * belong to the policies module; the gateway only reads.)
 */
export function policies(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table policies (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           key text not null,
           name text not null,
           description text not null default '',
           critical boolean not null default false,
           status text not null default 'active' check (status in ('active', 'inactive')),
           latest_version integer not null default 1,
           published_version integer,
           version integer not null default 1,
           created_at timestamptz not null default now(),
           updated_at timestamptz not null default now(),
           unique (org_id, key)
         )`,
        `create table policy_versions (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           policy_id uuid not null references policies (id),
           number integer not null,
           rules jsonb not null,
           change_note text not null default '',
           author_id uuid,
           created_at timestamptz not null default now(),
           published_at timestamptz,
           published_by uuid,
           unique (policy_id, number)
         )`,
      ]);
      await enableOrgIsolation(db, ['policies', 'policy_versions']);
      await grantRuntime(db, runtimeRole, { policies: 'select, insert, update', policy_versions: 'select, insert, update' });
    },
  };
}
