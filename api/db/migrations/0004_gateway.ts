import type { Kysely } from 'kysely';
import { enableOrgIsolation, grantRuntime, run } from './helpers.js';

/** Actions proposed by agents with their decisions and executions, approvals, and deny-class rules. */
export function gateway(runtimeRole: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [
        `create table action_requests (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           agent_id uuid not null references agents (id),
           identity_id uuid,
           source text not null,
           idempotency_key text not null,
           request_hash text not null,
           tool text not null,
           operation text not null,
           target text not null,
           parameters jsonb,
           environment text,
           on_behalf_of text,
           justification text,
           state text not null,
           decision text not null,
           reason_codes text[] not null,
           trace jsonb not null,
           approvals_required integer not null default 0,
           execution_status text,
           output_redacted jsonb,
           requested_by uuid,
           correlation_id text not null,
           created_at timestamptz not null,
           updated_at timestamptz not null,
           executed_at timestamptz,
           unique (org_id, agent_id, idempotency_key)
         )`,
        `create index action_requests_page on action_requests (org_id, created_at desc, id desc)`,
        `create table approvals (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           action_id uuid not null unique references action_requests (id),
           agent_id uuid not null references agents (id),
           status text not null,
           approvals_required integer not null,
           request_hash text not null,
           expires_at timestamptz not null,
           token_used_at timestamptz,
           created_at timestamptz not null,
           decided_at timestamptz
         )`,
        `create index approvals_page on approvals (org_id, status, created_at desc, id desc)`,
        `create table approval_votes (
           id uuid primary key,
           org_id uuid not null references organisations (id),
           approval_id uuid not null references approvals (id),
           approver_id uuid not null,
           decision text not null,
           reason text not null,
           created_at timestamptz not null,
           unique (approval_id, approver_id)
         )`,
        `create table deny_class_rules (
           id text primary key,
           org_id uuid not null references organisations (id),
           privilege_class text not null,
           agent_id uuid references agents (id),
           reason text not null,
           created_by uuid,
           created_at timestamptz not null,
           lifted_at timestamptz,
           lifted_by uuid,
           lift_reason text
         )`,
      ]);
      await enableOrgIsolation(db, ['action_requests', 'approvals', 'approval_votes', 'deny_class_rules']);
      await grantRuntime(db, runtimeRole, {
        action_requests: 'select, insert, update',
        approvals: 'select, insert, update',
        approval_votes: 'select, insert',
        deny_class_rules: 'select, insert, update',
      });
    },
  };
}
