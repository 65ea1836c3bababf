import type { Kysely } from 'kysely';
import { run } from './helpers.js';

/**
 * The unique key of an agent's idempotency keys, `(org_id, agent_id, idempotency_key)`, made again as the
 * last index of `action_requests`. The gateway's probe looks each of a batch's (agent, key) pairs up by it
 * (D36) with a plan made once per connection, at its first run. On a table that has not been analysed yet
 * (a new database, until autovacuum or the embedded database's maintenance first analyses it) PostgreSQL
 * costs that lookup the same on the unique key and on the page index `(org_id, created_at, id)`, and of
 * two plans of equal cost it keeps the one on the index made last (seen with `explain` on PGlite's
 * PostgreSQL 17): that was the page index, which reads every action of the organisation for each pair,
 * until the next analyze made the plan again. On PostgreSQL 15 under `bench/decisions` (pg_stat_statements,
 * one organisation), the probe took 31 to 226 µs a decision before, by whether its connections had planned
 * it before autovacuum's first analyze, and 10-11 µs after.
 * test/api/gateway-embedded.test.ts holds the plan on a table never analysed: an index on `action_requests`
 * added later that the lookup could use (one led by `org_id`) would be the last one made and fail it, and
 * this one would then have to be made again after it.
 */
export function idempotencyIndex() {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create unique index action_requests_idempotency on action_requests (org_id, agent_id, idempotency_key)`,
        `alter table action_requests drop constraint action_requests_org_id_agent_id_idempotency_key_key`,
        `alter table action_requests add constraint action_requests_idempotency unique using index action_requests_idempotency`,
      ]);
    },
  };
}
