import type { Kysely } from 'kysely';
import { createJobQueue } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue reports are generated from (api/modules/reports/reports.jobs.ts uses the same name). */
export const REPORTS_QUEUE = 'reports.generate';

/**
 * Reports (docs/reports.md): one row per report asked for, with the parameters it was asked with (defaults
 * filled in, so that every attempt of its job builds the same thing), its state and, once `ready`, the file
 * itself. `POST /reports` inserts the row `queued` and sends its `reports.generate` job in the same
 * transaction; the job moves it to `running`, then to `ready` with the content or to `failed` with a message
 * for people. The content lives here rather than in an object store: reports are at most 50 MB (the module
 * refuses larger ones) and this keeps them under the organisation's row-level security and its backups.
 */
export function reports(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table reports (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           kind text not null check (kind in ('executive_summary', 'agent_inventory', 'risk_register', 'governance_readiness', 'evidence_bundle')),
           parameters jsonb not null default '{}',
           format text not null check (format in ('pdf', 'csv', 'tar.gz')),
           status text not null default 'queued' check (status in ('queued', 'running', 'ready', 'failed')),
           content bytea,
           content_type text,
           file_name text check (char_length(file_name) <= 255),
           size integer check (size >= 0),
           error text check (char_length(error) <= 1000),
           attempts integer not null default 0,
           created_by uuid,
           created_by_type text not null default 'person' check (created_by_type in ('person', 'service_account')),
           correlation_id text not null default '',
           created_at timestamptz not null,
           started_at timestamptz,
           completed_at timestamptz,
           -- A ready report has its file; no other state has one.
           check ((status = 'ready') = (content is not null and content_type is not null and file_name is not null and size is not null)),
           check ((status = 'failed') = (error is not null)),
           check ((status in ('ready', 'failed')) = (completed_at is not null))
         )`,
        // The listing: the organisation's reports, newest first.
        `create index reports_page on reports (org_id, created_at desc, id desc)`,
      ]);
      await enableOrgIsolation(db, ['reports']);
      // Reports are created and finished, never deleted by the API.
      await grantRuntime(db, runtimeRole, { reports: 'select, insert, update' });
      // A report is worth two more tries (the database was away, the worker died); then the dead letter marks it failed.
      await createJobQueue(db, runtimeRole, { name: REPORTS_QUEUE, expireInSeconds: 300, retryLimit: 2, retryDelay: 10 });
    },
  };
}
