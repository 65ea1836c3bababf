import { sql, type Kysely } from 'kysely';
import { createJobQueue } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue of the sweep that deletes idle sessions' facts (api/modules/gateway/sessions.jobs.ts). */
export const SESSION_RETENTION_QUEUE = 'gateway.session-retention';

/**
 * Flow rules and policy replay (docs/policies.md, D37).
 *
 * - `action_requests.decision_facts`: what a first decision read besides the request and the current
 *   registry (the agent as it was, the session's facts before the call), so replay re-decides it as it was
 *   decided. Null on actions decided before this migration: replay reads the current agent for those.
 * - `agent_sessions`: what an agent did earlier in one session (the highest data classification read,
 *   untrusted content seen, tools called and how often), written in the decision's own transaction and
 *   read by every API process from here, never from memory. A session idle for a week is deleted by a
 *   sweep (purge_agent_sessions, across organisations as purge_telemetry is). No index on `last_at` and
 *   pages left half empty: a batch's update of a session's facts then changes no indexed column and stays
 *   on its page (a HOT update, no index entry per decision); the hourly sweep reads each organisation's
 *   sessions through the primary key instead.
 * - `policy_replays`: the summary of each replay of a policy version, so the person who publishes it sees
 *   its effect; the decisions replayed are never stored.
 * - Resources join the registry a decision reads (a tool's data classification and whether its API is on
 *   the internet), so a change to one raises the organisation's registry version (migration 0006).
 */
export function flowAndReplay(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `alter table action_requests add column decision_facts jsonb`,
        `create table agent_sessions (
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           session_key text not null check (length(session_key) between 1 and 300),
           facts jsonb not null,
           first_at timestamptz not null,
           last_at timestamptz not null,
           primary key (org_id, agent_id, session_key)
         ) with (fillfactor = 50)`,
        // Two batches' facts of one session, merged: what their writes make together whatever their order
        // (the highest classification, untrusted content seen by either, calls and calls by tool added;
        // at most 200 tool keys, the MAX_SESSION_TOOLS of engine/session.ts, those counted already kept).
        // PL/pgSQL, not SQL: its statements are planned once per connection, where a SQL function's body
        // would be planned again by every batch's write; and it walks only the keys `b` adds (a batch's
        // calls), not all of `a`'s.
        `create function merge_session_facts(a jsonb, b jsonb) returns jsonb
           language plpgsql immutable set search_path = public as $$
           declare
             ranks constant text[] := array['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'];
             tools jsonb := coalesce(a -> 'tools', '{}');
             kept integer;
             k text;
             n text;
           begin
             for k, n in select * from jsonb_each_text(coalesce(b -> 'tools', '{}')) loop
               if jsonb_exists(tools, k) then
                 tools := jsonb_set(tools, array[k], to_jsonb((tools ->> k)::bigint + n::bigint));
               else
                 if kept is null then
                   select count(*) into kept from jsonb_object_keys(tools);
                 end if;
                 if kept < 200 then
                   tools := tools || jsonb_build_object(k, n::bigint);
                   kept := kept + 1;
                 end if;
               end if;
             end loop;
             return jsonb_build_object(
               'max_classification',
                 case when coalesce(array_position(ranks, b ->> 'max_classification'), 0)
                           > coalesce(array_position(ranks, a ->> 'max_classification'), 0)
                      then b -> 'max_classification' else coalesce(a -> 'max_classification', 'null'::jsonb) end,
               'untrusted_content', coalesce((a ->> 'untrusted_content')::boolean, false) or coalesce((b ->> 'untrusted_content')::boolean, false),
               'calls', coalesce((a ->> 'calls')::bigint, 0) + coalesce((b ->> 'calls')::bigint, 0),
               'tools', tools);
           end
         $$`,
        `create table policy_replays (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           policy_id uuid not null references policies (id),
           version_number integer not null check (version_number > 0),
           window_from timestamptz not null,
           window_to timestamptz not null check (window_to > window_from),
           agent_id uuid,
           summary jsonb not null,
           requested_by uuid,
           created_at timestamptz not null
         )`,
        `create function purge_agent_sessions(p_before timestamptz, p_limit integer)
           returns integer
           language sql volatile security definer set search_path = public as $$
             with doomed as (
               select s.org_id, s.agent_id, s.session_key
               from organisations o
               cross join lateral (
                 select x.org_id, x.agent_id, x.session_key from agent_sessions x
                 where x.org_id = o.id and x.last_at < p_before
                 limit least(greatest(p_limit, 1), 10000)
               ) s
               limit least(greatest(p_limit, 1), 10000)
             ), gone as (
               delete from agent_sessions a using doomed d
               where a.org_id = d.org_id and a.agent_id = d.agent_id and a.session_key = d.session_key
               returning 1
             )
             select count(*)::integer from gone
           $$`,
        `revoke all on function purge_agent_sessions(timestamptz, integer) from public`,
        `create index policy_replays_latest on policy_replays (org_id, policy_id, version_number, created_at desc)`,
        `create constraint trigger registry_changed after insert or update or delete on resources
           deferrable initially deferred for each row execute function bump_registry_version('org_id')`,
      ]);
      await enableOrgIsolation(db, ['agent_sessions', 'policy_replays']);
      await sql`grant execute on function purge_agent_sessions(timestamptz, integer) to ${sql.id(runtimeRole)}`.execute(db);
      // Facts are merged in place; only the sweep deletes them.
      await grantRuntime(db, runtimeRole, { agent_sessions: 'select, insert, update', policy_replays: 'select, insert' });
      await createJobQueue(db, runtimeRole, { name: SESSION_RETENTION_QUEUE, expireInSeconds: 300, retryLimit: 1, retryDelay: 60 });
    },
  };
}
