import { sql, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import type { SubmissionKind, SubmissionOut } from './public.schemas.js';

/**
 * The row of `public_submissions` (migration 0019). It is declared here rather than in api/db/schema.ts because
 * only this module reads the table; `submissions(tx)` adds it to the transaction's tables.
 */
export interface PublicSubmissionsTable {
  id: string;
  kind: SubmissionKind;
  name: string;
  email: string;
  company: string;
  payload: unknown;
  consent_given: boolean;
  consented_at: Date | null;
  client_address_hash: string;
  user_agent: string | null;
  created_at: Date;
}
export type SubmissionRow = Selectable<PublicSubmissionsTable>;

const submissions = (tx: Tx) => tx.withTables<{ public_submissions: PublicSubmissionsTable }>();

export interface NewSubmission {
  id: string;
  kind: SubmissionKind;
  name: string;
  email: string;
  company: string;
  payload: Record<string, unknown>;
  consentedAt: Date | null;
  clientAddressHash: string;
  userAgent: string | null;
  createdAt: Date;
}

export async function insertSubmission(tx: Tx, s: NewSubmission): Promise<void> {
  await submissions(tx)
    .insertInto('public_submissions')
    .values({
      id: s.id,
      kind: s.kind,
      name: s.name,
      email: s.email,
      company: s.company,
      payload: JSON.stringify(s.payload),
      consent_given: s.consentedAt !== null,
      consented_at: s.consentedAt,
      client_address_hash: s.clientAddressHash,
      user_agent: s.userAgent,
      created_at: s.createdAt,
    })
    .execute();
}

/** Deletes submissions kept since before `cutoff` (the retention); answers how many went. */
export async function deleteSubmissionsBefore(tx: Tx, cutoff: Date): Promise<number> {
  const r = await submissions(tx).deleteFrom('public_submissions').where('created_at', '<', cutoff).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * Submissions received since `since`, newest first, of one kind or both: one row more than `limit` (to tell
 * whether more follow), after the keyset position `after` when given.
 */
export function listSubmissions(tx: Tx, since: Date, kind: SubmissionKind | undefined, after: Position | undefined, limit: number) {
  let q = submissions(tx).selectFrom('public_submissions').selectAll().where('created_at', '>=', since);
  if (kind) q = q.where('kind', '=', kind);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

export function toSubmission(r: SubmissionRow): SubmissionOut {
  return {
    id: r.id,
    kind: r.kind,
    name: r.name,
    email: r.email,
    company: r.company,
    details: (r.payload ?? {}) as Record<string, unknown>,
    consent_given: r.consent_given,
    consented_at: r.consented_at ? iso(r.consented_at) : null,
    client_address_hash: r.client_address_hash,
    user_agent: r.user_agent,
    created_at: iso(r.created_at),
  };
}
