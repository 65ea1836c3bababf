import type { Kysely } from 'kysely';
import { grantRuntime, run } from './helpers.js';

/**
 * What the public website's forms send (docs/public.md): demo and assessment requests (`lead`) and pricing
 * quote requests (`quote`). They belong to the operator of the service, not to a customer organisation, so the
 * table has no `org_id` and no row-level security; access is held apart instead by the grants below (the
 * runtime role inserts, reads and deletes expired rows, never updates) and by the staff operations, which
 * answer only members of the operator's organisation (SALES_ORG_ID) holding `tenant:manage`.
 *
 * Data minimisation: the client address is kept only as a keyed hash (enough to see that submissions came
 * from one address, not which), the user agent cut to 400 characters, the honeypot and challenge token not at
 * all. Rows older than the retention (docs/public.md) are deleted when the next submission arrives and never
 * served.
 */
export function publicSubmissions(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table public_submissions (
           id uuid primary key,
           kind text not null check (kind in ('lead', 'quote')),
           name text not null check (char_length(name) between 1 and 120),
           email text not null check (char_length(email) between 3 and 254),
           company text not null check (char_length(company) between 1 and 160),
           payload jsonb not null default '{}',
           consent_given boolean not null,
           consented_at timestamptz,
           client_address_hash text not null check (char_length(client_address_hash) <= 64),
           user_agent text check (char_length(user_agent) <= 400),
           created_at timestamptz not null,
           check (consent_given = (consented_at is not null))
         )`,
        // The staff listing: newest first, all kinds or one.
        `create index public_submissions_page on public_submissions (created_at desc, id desc)`,
        `create index public_submissions_kind_page on public_submissions (kind, created_at desc, id desc)`,
      ]);
      await grantRuntime(db, runtimeRole, { public_submissions: 'select, insert, delete' });
    },
  };
}
