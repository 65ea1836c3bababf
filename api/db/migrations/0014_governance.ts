import { sql, type Kysely } from 'kysely';
import { createJobQueue } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue of the exception expiry notices (api/modules/governance/governance.jobs.ts). */
export const EXCEPTION_EXPIRY_QUEUE = 'governance.exception_expiry';

/**
 * Governance (docs/governance.md): the organisation's own control mappings, exceptions, remediation tasks and the
 * AI-system classification of its agents. Controls themselves are not rows: they are the framework catalogue shipped
 * with the code, the same everywhere, and their ids are deterministic UUIDs; so `control_id` columns carry no
 * foreign key.
 *
 * Coverage reads the evidence chain over a window of days. Every gateway decision appends evidence, so no index is
 * added there: `evidence_first_seq_since` (the evidence module's, created here as the first migration that needs
 * it; evidence bundles use it too) finds the first record of a window by bisecting on `seq` (the unique index
 * `(org_id, seq)`), and "records of type T from there on" is a range of the existing `evidence_records_filter
 * (org_id, event_type, seq)`.
 */
export function governance(runtimeRole: string) {
  // The length checks below are upper bounds and "not empty": the API's own limits count UTF-16 code units, the
  // database counts characters, so a stricter lower bound here could refuse what the API accepted.
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table governance_control_mappings (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           control_id uuid not null,
           evidence_event_type text not null check (char_length(evidence_event_type) between 1 and 80),
           rationale text not null check (char_length(rationale) between 1 and 1000),
           condition jsonb check (condition is null or (jsonb_typeof(condition) = 'object' and condition <> '{}'::jsonb)),
           created_by uuid,
           created_at timestamptz not null
         )`,
        // One mapping per type and condition on a control (no condition is one value of its own).
        `create unique index governance_control_mappings_once
           on governance_control_mappings (org_id, control_id, evidence_event_type, coalesce(condition, '{}'::jsonb))`,
        `create table governance_exceptions (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           control_id uuid not null,
           agent_id uuid references agents (id),
           title text not null check (char_length(title) between 1 and 300),
           justification text not null check (char_length(justification) between 1 and 4000),
           compensating_controls text not null default '' check (char_length(compensating_controls) <= 4000),
           owner_email text not null check (char_length(owner_email) between 1 and 254),
           expires_at timestamptz not null,
           -- expired is not stored: an approved (or pending) exception is expired once expires_at has passed.
           status text not null default 'pending' check (status in ('pending', 'approved', 'rejected')),
           requested_by uuid,
           requested_by_type text not null check (requested_by_type in ('person', 'service_account')),
           created_at timestamptz not null,
           decided_by uuid,
           decided_at timestamptz,
           decision_note text check (char_length(decision_note) <= 2000),
           -- When the owner was told the exception is about to lapse: told once.
           expiry_notified_at timestamptz,
           version integer not null default 1,
           check ((status = 'pending') = (decided_at is null))
         )`,
        `create index governance_exceptions_page on governance_exceptions (org_id, created_at, id)`,
        `create index governance_exceptions_control on governance_exceptions (org_id, control_id) where status = 'approved'`,
        // The expiry job's question, across organisations: approved, not yet told, lapsing soon.
        `create index governance_exceptions_expiring on governance_exceptions (expires_at)
           where status = 'approved' and expiry_notified_at is null`,
        `create table governance_remediation_tasks (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           title text not null check (char_length(title) between 1 and 300),
           description text not null default '' check (char_length(description) <= 4000),
           control_id uuid,
           agent_id uuid references agents (id),
           finding_id uuid references findings (id),
           assignee_email text check (char_length(assignee_email) <= 254),
           due_at timestamptz,
           priority text not null default 'medium' check (priority in ('low', 'medium', 'high', 'critical')),
           status text not null default 'open' check (status in ('open', 'in_progress', 'done', 'cancelled')),
           source text not null default 'manual' check (source in ('manual', 'classification')),
           -- The gap of the agent's class a classification opened the task for (docs/governance.md).
           gap text check (char_length(gap) <= 80),
           created_by uuid,
           created_at timestamptz not null,
           updated_at timestamptz not null,
           closed_at timestamptz,
           version integer not null default 1,
           check ((status in ('done', 'cancelled')) = (closed_at is not null))
         )`,
        `create index governance_remediation_page on governance_remediation_tasks (org_id, created_at, id)`,
        `create index governance_remediation_open on governance_remediation_tasks (org_id, control_id, agent_id)
           where status in ('open', 'in_progress')`,
        // Classifying again never opens a second task for the same gap while one is open.
        `create unique index governance_remediation_gap_once on governance_remediation_tasks (org_id, agent_id, control_id)
           where source = 'classification' and status in ('open', 'in_progress')`,
        `create table governance_ai_systems (
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           classification text not null check (classification in ('unclassified', 'minimal', 'limited', 'high', 'prohibited')),
           rationale text not null check (char_length(rationale) between 1 and 4000),
           classified_by uuid,
           classified_by_type text not null check (classified_by_type in ('person', 'service_account')),
           classified_at timestamptz not null,
           version integer not null default 1,
           primary key (org_id, agent_id)
         )`,
        // The first evidence record of the organisation created at or after p_since, by bisection on seq: about
        // log2(records) probes of the unique index (org_id, seq), instead of an index on created_at that every
        // append would pay for. Records are appended under the chain head's lock with the app's clock, so
        // created_at follows seq (to within the clocks of the API processes). Answers head + 1 when none is that
        // recent. Runs as the caller: row-level security applies.
        `create function evidence_first_seq_since(p_org uuid, p_since timestamptz)
           returns bigint
           language plpgsql stable set search_path = public as $$
           declare
             lo bigint := 1;
             hi bigint;
             mid bigint;
             probe_seq bigint;
             probe_at timestamptz;
           begin
             select h.seq + 1 into hi from evidence_heads h where h.org_id = p_org;
             if hi is null then
               return 1;
             end if;
             while lo < hi loop
               mid := lo + (hi - lo) / 2;
               select r.seq, r.created_at into probe_seq, probe_at
                 from evidence_records r where r.org_id = p_org and r.seq >= mid order by r.seq limit 1;
               if probe_seq is null or probe_at >= p_since then
                 hi := mid;
               else
                 lo := probe_seq + 1;
               end if;
             end loop;
             -- lo may fall in a gap of the sequence: answer the record it starts at.
             select r.seq into probe_seq from evidence_records r where r.org_id = p_org and r.seq >= lo order by r.seq limit 1;
             return coalesce(probe_seq, lo);
           end
           $$`,
        `revoke all on function evidence_first_seq_since(uuid, timestamptz) from public`,
        // The expiry job runs across organisations, which the runtime role cannot see at once (row-level security):
        // this owner-defined function answers only which organisations have an approved exception, not yet
        // notified, that lapses between p_now and p_until. The job then works in each organisation's own scope.
        `create function governance_orgs_with_expiring_exceptions(p_now timestamptz, p_until timestamptz)
           returns setof uuid
           language sql stable security definer set search_path = public as $$
             select distinct org_id from governance_exceptions
             where status = 'approved' and expiry_notified_at is null and expires_at > p_now and expires_at <= p_until
           $$`,
        `revoke all on function governance_orgs_with_expiring_exceptions(timestamptz, timestamptz) from public`,
      ]);
      await sql`grant execute on function evidence_first_seq_since(uuid, timestamptz) to ${sql.id(runtimeRole)}`.execute(db);
      await sql`grant execute on function governance_orgs_with_expiring_exceptions(timestamptz, timestamptz) to ${sql.id(runtimeRole)}`.execute(db);
      const tables = ['governance_control_mappings', 'governance_exceptions', 'governance_remediation_tasks', 'governance_ai_systems'];
      await enableOrgIsolation(db, tables);
      // Mappings are added, never changed or removed; the others change state. Nothing is deleted.
      await grantRuntime(db, runtimeRole, {
        governance_control_mappings: 'select, insert',
        governance_exceptions: 'select, insert, update',
        governance_remediation_tasks: 'select, insert, update',
        governance_ai_systems: 'select, insert, update',
      });
      // Hourly; a missed run is made up by the next: one retry, no dead-letter handler.
      await createJobQueue(db, runtimeRole, { name: EXCEPTION_EXPIRY_QUEUE, expireInSeconds: 300, retryLimit: 1, retryDelay: 60 });
    },
  };
}
