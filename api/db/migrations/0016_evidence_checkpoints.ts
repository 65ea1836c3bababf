import { sql, type Kysely } from 'kysely';
import { createJobQueue } from './0009_jobs.js';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** The queue of the checkpoint job (api/modules/evidence/checkpoints.jobs.ts). */
export const EVIDENCE_CHECKPOINT_QUEUE = 'evidence.checkpoint';

/**
 * Signed checkpoints of each organisation's evidence chain head (docs/evidence.md, Checkpoints): every 15
 * minutes, for each organisation whose chain grew since its last checkpoint, the head's seq (which is also the
 * number of records: seq counts from 1 without gaps) and hash, the time, and an Ed25519 signature by the
 * evidence key. An auditor who stores them elsewhere can later prove that the chain still passes through them.
 * One checkpoint per head position, so a job run twice writes it once.
 */
export function evidenceCheckpoints(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table evidence_checkpoints (
           org_id uuid not null references organisations (id),
           seq bigint not null check (seq > 0),
           hash text not null check (hash ~ '^[0-9a-f]{64}$'),
           created_at timestamptz not null,
           kid text not null,
           signature text not null,
           primary key (org_id, seq)
         )`,
        // The job runs across organisations, which the runtime role cannot see at once (row-level security):
        // this owner-defined function answers only which organisations' heads moved past their last
        // checkpoint. The job then reads and signs each head in that organisation's own scope.
        `create function evidence_checkpoints_due()
           returns setof uuid
           language sql stable security definer set search_path = public as $$
             select h.org_id from evidence_heads h
             where h.seq > coalesce((select max(c.seq) from evidence_checkpoints c where c.org_id = h.org_id), 0)
           $$`,
        `revoke all on function evidence_checkpoints_due() from public`,
      ]);
      await sql`grant execute on function evidence_checkpoints_due() to ${sql.id(runtimeRole)}`.execute(db);
      await enableOrgIsolation(db, ['evidence_checkpoints']);
      // Append-only, like the chain itself: a checkpoint, once signed, is never changed or removed.
      await grantRuntime(db, runtimeRole, { evidence_checkpoints: 'select, insert' });
      // A missed run is made up by the next (every 15 minutes): one retry, no dead-letter handler.
      await createJobQueue(db, runtimeRole, { name: EVIDENCE_CHECKPOINT_QUEUE, expireInSeconds: 300, retryLimit: 1, retryDelay: 60 });
    },
  };
}
