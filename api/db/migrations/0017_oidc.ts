import type { Kysely } from 'kysely';
import { grantRuntime, run } from './helpers.js';

/**
 * The OpenID Connect identities of people (docs/authentication.md, OpenID Connect sign-in): the provider's
 * issuer and subject, which stay the same when the person's email changes, and the person they sign in as.
 * A person is linked to an identity on their first sign-in, by the provider's verified email. Like `users`,
 * the table belongs to no organisation: a person signs in before any organisation is chosen.
 */
export function oidcIdentities(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table user_identities (
           issuer text not null check (length(issuer) between 1 and 2048),
           subject text not null check (length(subject) between 1 and 255),
           user_id uuid not null references users (id) on delete cascade,
           created_at timestamptz not null default now(),
           last_sign_in_at timestamptz,
           primary key (issuer, subject)
         )`,
        `create index user_identities_user on user_identities (user_id)`,
      ]);
      await grantRuntime(db, runtimeRole, { user_identities: 'select, insert, update' });
    },
  };
}
