import { sql, type Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * Service accounts: callers of the REST API that are not persons (the Kubernetes controller first).
 * Like workload identities, a client ID and a peppered hash of the secret; unlike them, built-in roles
 * instead of an agent, and a second, previous secret hash that stays valid until a rotation's overlap
 * ends. Also lets the runtime role delete delegations (DELETE /agents/{id}/delegations/{id}).
 */
export function serviceAccounts(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table service_accounts (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           name text not null check (char_length(name) between 2 and 100),
           description text not null default '',
           roles text[] not null default '{controller}',
           client_id text not null unique,
           secret_hash text not null,
           previous_secret_hash text,
           previous_valid_until timestamptz,
           status text not null default 'active' check (status in ('active', 'revoked')),
           created_by uuid,
           created_at timestamptz not null default now(),
           last_used_at timestamptz,
           revoked_at timestamptz,
           unique (org_id, name)
         )`,
        `create index service_accounts_page on service_accounts (org_id, created_at, id)`,
        // Token exchange knows only the client ID, not the organisation: this owner-defined function
        // finds the account by client ID and nothing else (as identity_for_client does for agents).
        `create function service_account_for_client(p_client_id text)
           returns table (service_account_id uuid, org_id uuid, secret_hash text, previous_secret_hash text,
                          previous_valid_until timestamptz, status text)
           language sql stable security definer set search_path = public as $$
             select s.id, s.org_id, s.secret_hash, s.previous_secret_hash, s.previous_valid_until, s.status
             from service_accounts s
             where s.client_id = p_client_id
           $$`,
        `revoke all on function service_account_for_client(text) from public`,
      ]);
      await sql`grant execute on function service_account_for_client(text) to ${sql.id(runtimeRole)}`.execute(db);
      await enableOrgIsolation(db, ['service_accounts']);
      await grantRuntime(db, runtimeRole, {
        service_accounts: 'select, insert, update',
        // Delegations were insert-only for the API until the controller needed to remove one.
        delegations: 'select, insert, update, delete',
      });
    },
  };
}
