import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The tables whose rows a decision reads, with the column naming their organisation. */
export const REGISTRY_TABLES: Record<string, string> = {
  organisations: 'id',
  agents: 'org_id',
  tools: 'org_id',
  mcp_servers: 'org_id',
  credential_refs: 'org_id',
  permission_bindings: 'org_id',
  delegations: 'org_id',
  deny_class_rules: 'org_id',
  policies: 'org_id',
  policy_versions: 'org_id',
};

/**
 * A version number per organisation, raised by the database itself whenever a row a decision reads
 * changes, whoever writes it. The gateway keeps each organisation's registry in memory and reads this
 * one number per batch, inside the batch's transaction: a change committed by any API process is seen
 * by the next decision, and nothing in the application has to remember to invalidate.
 *
 * The triggers are deferred constraint triggers, so the version row is locked only at commit, after
 * every other lock of the writing transaction: two writers cannot deadlock on it.
 */
export function registryVersions(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table registry_versions (
           org_id uuid primary key,
           version bigint not null
         )`,
        // Runs as the schema owner: a writer may have no organisation in scope (onboarding creates one).
        `create function bump_registry_version() returns trigger
           language plpgsql security definer set search_path = public as $$
         declare
           org uuid;
         begin
           if tg_op = 'DELETE' then
             org := (to_jsonb(old) ->> tg_argv[0])::uuid;
           else
             org := (to_jsonb(new) ->> tg_argv[0])::uuid;
           end if;
           insert into registry_versions as v (org_id, version) values (org, 1)
             on conflict (org_id) do update set version = v.version + 1;
           return null;
         end $$`,
        `revoke all on function bump_registry_version() from public`,
        ...Object.entries(REGISTRY_TABLES).map(
          ([table, column]) =>
            `create constraint trigger registry_changed after insert or update or delete on ${table}
               deferrable initially deferred for each row execute function bump_registry_version('${column}')`,
        ),
      ]);
      await enableOrgIsolation(db, ['registry_versions']);
      await grantRuntime(db, runtimeRole, { registry_versions: 'select' });
    },
  };
}
