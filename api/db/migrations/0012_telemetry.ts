import { sql, type Kysely } from 'kysely';
import { createJobQueue, JOBS_SCHEMA } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue of the telemetry retention sweep (api/modules/telemetry/telemetry.jobs.ts). */
export const TELEMETRY_RETENTION_QUEUE = 'telemetry.retention';

/**
 * pg-boss's own queue for recurring jobs: its scheduler (on in every process that works queues) sends a
 * job here on each cron tick, once across the processes, and that job sends the scheduled queue its job.
 * pg-boss would create it at start, but the runtime role may not create queues.
 */
const SCHEDULER_QUEUE = '__pgboss__send-it';

/**
 * Telemetry (docs/telemetry.md, D26): one row per operational event (a gateway decision, a token exchange
 * or refusal, a containment, a discovery run, an MCP trust change, a policy publish), kept for
 * TELEMETRY_RETENTION_DAYS. Not evidence: no chain, no signature; a log to filter and count.
 *
 * The gateway wrote one row per decision here in its batch's one statement (until migration 0013 read first
 * decisions from their action rows instead), so every index here was paid on
 * the hot path: the primary key is the listing order itself (organisation, time, id), and the other
 * indexes serve one filter each. What is the bulk stays out of the index that would only repeat the
 * primary key: decisions out of the type index, `info` events (allowed decisions, issued tokens) out of
 * the severity index; filtering on those walks the time order, where they are dense. `q` is a substring
 * match on the summary within the other filters: no text index.
 * No foreign key on agent_id: an event keeps the id it was written with, and the check would cost every
 * decision a lookup.
 */
export function telemetry(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table telemetry_events (
           org_id uuid not null references organisations (id),
           occurred_at timestamptz not null,
           id uuid not null,
           event_type text not null check (event_type ~ '^[a-z][a-z_]*(\\.[a-z][a-z_]*)+$' and char_length(event_type) <= 80),
           severity text not null check (severity in ('info', 'low', 'medium', 'high', 'critical')),
           agent_id uuid,
           correlation_id text not null default '',
           summary text not null default '' check (char_length(summary) <= 500),
           attributes jsonb not null default '{}',
           primary key (org_id, occurred_at, id)
         )`,
        // Decisions are the bulk and dense in the primary key: the type index holds the rarer types only.
        `create index telemetry_events_type on telemetry_events (org_id, event_type, occurred_at, id) where event_type <> 'gateway.decision'`,
        `create index telemetry_events_agent on telemetry_events (org_id, agent_id, occurred_at, id) where agent_id is not null`,
        `create index telemetry_events_severity on telemetry_events (org_id, severity, occurred_at, id) where severity <> 'info'`,
        `create index telemetry_events_correlation on telemetry_events (org_id, correlation_id)`,
        // Retention runs across organisations, which the runtime role cannot see at once (row-level
        // security): this owner-defined function deletes at most p_limit events older than p_before, the
        // oldest first, walking each organisation's time index, and answers how many it deleted. It
        // reads nothing back and touches no other table.
        `create function purge_telemetry(p_before timestamptz, p_limit integer)
           returns integer
           language sql volatile security definer set search_path = public as $$
             with doomed as (
               select e.org_id, e.occurred_at, e.id
               from organisations o
               cross join lateral (
                 select t.org_id, t.occurred_at, t.id from telemetry_events t
                 where t.org_id = o.id and t.occurred_at < p_before
                 order by t.occurred_at
                 limit least(greatest(p_limit, 1), 10000)
               ) e
               limit least(greatest(p_limit, 1), 10000)
             ), gone as (
               delete from telemetry_events t using doomed d
               where t.org_id = d.org_id and t.occurred_at = d.occurred_at and t.id = d.id
               returning 1
             )
             select count(*)::integer from gone
           $$`,
        `revoke all on function purge_telemetry(timestamptz, integer) from public`,
      ]);
      await sql`grant execute on function purge_telemetry(timestamptz, integer) to ${sql.id(runtimeRole)}`.execute(db);
      await enableOrgIsolation(db, ['telemetry_events']);
      // A log the API appends to and reads; only the retention function removes rows.
      await grantRuntime(db, runtimeRole, { telemetry_events: 'select, insert' });

      await sql`select ${sql.raw(JOBS_SCHEMA)}.create_queue(${SCHEDULER_QUEUE}, ${JSON.stringify({ policy: 'standard' })}::json)
                where not exists (select 1 from ${sql.raw(JOBS_SCHEMA)}.queue where name = ${SCHEDULER_QUEUE})`.execute(db);
      // A missed sweep is made up by the next (every 10 minutes): one retry, no dead-letter handler.
      await createJobQueue(db, runtimeRole, { name: TELEMETRY_RETENTION_QUEUE, expireInSeconds: 300, retryLimit: 1, retryDelay: 60 });
    },
  };
}
