import type { Updateable } from 'kysely';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { FindingsTable } from '../../db/schema.js';
import type { RequestContext } from '../../platform/context.js';
import type { Changes } from '../../platform/changes.js';
import { ApiError, notFound } from '../../platform/errors.js';
import { checkIfMatch } from '../../platform/if-match.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso, isUniqueViolation } from '../../platform/schemas.js';
import { auditWithEvidence } from '../evidence/index.js';
import { getFinding, listFindings, openWithKey, toFinding, updateFinding, type FindingRow } from './findings.repository.js';
import { CLOSED_STATUSES, type FindingFilters, type FindingPatch, type FindingStatus } from './findings.schemas.js';

async function findingOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<FindingRow> {
  const row = await getFinding(tx, orgId, id, lock);
  if (!row) throw notFound('No such finding.');
  return row;
}

/** One page of the organisation's findings, newest first; `query.cursor` continues a listing. */
export function listFindingsPage(db: Db, cursors: Cursors, orgId: string, query: FindingFilters & { limit: number; cursor?: string }) {
  const { limit, cursor, ...filters } = query;
  const scope = `findings:${orgId}`;
  const after = cursors.decode(scope, cursor);
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listFindings(tx, orgId, filters, after, limit);
    return cursors.page(scope, rows, limit, (f) => ({ t: iso(f.created_at), id: f.id }), toFinding);
  });
}

export async function readFinding(db: Db, orgId: string, findingId: string) {
  return toFinding(await inScope(db, { orgId }, (tx) => findingOr404(tx, orgId, findingId)));
}

/** What a triage patch changes: the columns to set and the audit's account of it (the note's text is not repeated). */
function triage(before: FindingRow, patch: FindingPatch, now: Date): { set: Updateable<FindingsTable>; changes: Changes; noteChanged: boolean } | undefined {
  const set: Updateable<FindingsTable> = {};
  const changes: Changes = {};
  if (patch.status != null && patch.status !== before.status) {
    set.status = patch.status;
    changes.status = { from: before.status, to: patch.status };
    // resolved_at says when it was closed: set on closing (again), cleared on reopening.
    if (CLOSED_STATUSES.has(patch.status)) set.resolved_at = now;
    else if (CLOSED_STATUSES.has(before.status as FindingStatus)) set.resolved_at = null;
  }
  // Empty text clears the field.
  const assignedTo = patch.assigned_to == null ? undefined : patch.assigned_to || null;
  if (assignedTo !== undefined && assignedTo !== before.assigned_to) {
    set.assigned_to = assignedTo;
    changes.assigned_to = { from: before.assigned_to, to: assignedTo };
  }
  const note = patch.note == null ? undefined : patch.note || null;
  const noteChanged = note !== undefined && note !== before.note;
  if (noteChanged) set.note = note;
  if (Object.keys(set).length === 0) return undefined;
  return { set, changes, noteChanged };
}

const reopenConflict = () =>
  new ApiError('conflict', 'Another finding about the same thing is open; work on that one instead.', { field: 'status' });

/**
 * Triage: status, assignee and note, honouring If-Match when sent. A change bumps the version, is
 * audited and recorded as evidence (finding_update) in the same transaction; a patch that changes
 * nothing writes nothing. Reopening a finding while another about the same thing (its dedupe key) is
 * open answers 409 conflict.
 */
export async function changeFinding(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  findingId: string,
  patch: FindingPatch,
  ifMatch: string | string[] | undefined,
) {
  try {
    return await inScope(db, { orgId }, async (tx) => {
      const before = await findingOr404(tx, orgId, findingId, true);
      checkIfMatch(ifMatch, before.version, false);
      const t = triage(before, patch, clock.now());
      if (!t) return toFinding(before);
      if (t.set.status && !CLOSED_STATUSES.has(t.set.status) && (await openWithKey(tx, orgId, before.dedupe_key, before.id))) {
        throw reopenConflict();
      }
      const after = await updateFinding(tx, orgId, before.id, { ...t.set, version: before.version + 1, updated_at: clock.now() });
      const details = { ...t.changes, ...(t.noteChanged ? { note_changed: true } : {}) };
      await auditWithEvidence(
        tx,
        req,
        orgId,
        { action: 'finding.updated', targetType: 'finding', targetId: before.id, details },
        {
          eventType: 'finding_update',
          agentId: before.agent_id,
          payload: { finding_id: before.id, category: before.category, severity: before.severity, ...details },
        },
      );
      return toFinding(after);
    });
  } catch (err) {
    // Two reopenings racing: the partial unique index lets only one hold the key.
    if (isUniqueViolation(err)) throw reopenConflict();
    throw err;
  }
}
