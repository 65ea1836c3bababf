import type { Kysely } from 'kysely';
import { run } from './helpers.js';

/**
 * The gateway's pipelined append (docs/decisions.md, D36) moves the chain head only if it is still the
 * head its records were chained after, and otherwise sets the head's number to -1; this trigger refuses
 * that, failing the statement (SQLSTATE TGHM1), so the `commit` sent behind it in the same round trip
 * ends the transaction as a rollback instead of committing records chained after a stale head. A BEFORE
 * trigger, not a check constraint: the trigger runs after the row's lock is taken and the new row is
 * worked out again from the row as committed, where a check constraint would judge the row as the
 * statement's snapshot saw it, before waiting for the append ahead of it.
 */
export function evidenceHeadTrigger() {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create function evidence_head_not_moved() returns trigger
           language plpgsql set search_path = public as $$
         begin
           if new.seq < 0 then
             raise exception 'the evidence chain head moved' using errcode = 'TGHM1';
           end if;
           return new;
         end $$`,
        `create trigger evidence_head_not_moved before update on evidence_heads
           for each row execute function evidence_head_not_moved()`,
      ]);
    },
  };
}
