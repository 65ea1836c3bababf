import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/**
 * The evidence chain: per organisation, append-only records numbered from 1, each holding the previous
 * record's hash, its own SHA-256 over canonical JSON (RFC 8785) and an Ed25519 signature of it.
 */
export function evidence(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table evidence_records (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           seq bigint not null,
           prev_hash text not null,
           hash text not null,
           signature text not null,
           kid text not null,
           event_type text not null,
           agent_id uuid,
           action_request_id uuid,
           control_ref text,
           correlation_id text not null,
           payload jsonb not null,
           created_at timestamptz not null,
           unique (org_id, seq)
         )`,
        `create index evidence_records_filter on evidence_records (org_id, event_type, seq)`,
        `create index evidence_records_agent on evidence_records (org_id, agent_id, seq)`,
        // The head of each chain: removing the newest records leaves the head pointing past the end.
        `create table evidence_heads (
           org_id uuid primary key references organisations (id),
           seq bigint not null,
           hash text not null
         )`,
      ]);
      await enableOrgIsolation(db, ['evidence_records', 'evidence_heads']);
      // Append-only: the API can add and read records, never change or remove one.
      await grantRuntime(db, runtimeRole, { evidence_records: 'select, insert', evidence_heads: 'select, insert, update' });
    },
  };
}
