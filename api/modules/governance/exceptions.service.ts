import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { ActorPrincipal, PersonPrincipal, RequestContext } from '../../platform/context.js';
import { ApiError, notFound, validationFailed } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { notify } from '../notifications/index.js';
import { CATALOGUE } from './catalogue.js';
import {
  getException,
  insertException,
  isActiveMember,
  listExceptions,
  statusAt,
  toException,
  updateException,
  type ExceptionRow,
} from './exceptions.repository.js';
import type { DecisionIn, ExceptionIn, ExceptionOut, ExceptionStatus } from './exceptions.schemas.js';
import { agentExists } from './systems.repository.js';

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

async function exceptionOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<ExceptionRow> {
  const row = await getException(tx, orgId, id, lock);
  if (!row) throw notFound('No such exception.');
  return row;
}

/** One page of the organisation's exceptions, newest first, with their status as read now. */
export function listExceptionsPage(
  db: Db,
  clock: Clock,
  cursors: Cursors,
  orgId: string,
  query: { status?: ExceptionStatus; limit: number; cursor?: string },
) {
  // The filter is part of the list: a cursor of one status's list is refused for another's.
  const scope = `exceptions:${orgId}:${query.status ?? ''}`;
  const after = cursors.decode(scope, query.cursor);
  const now = clock.now();
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listExceptions(tx, orgId, query.status, now, after, query.limit);
    return cursors.page(scope, rows, query.limit, (r) => ({ t: iso(r.created_at), id: r.id }), (r) => toException(r, now));
  });
}

/**
 * Asks for an exception to a control, for the whole organisation or one agent: pending until a holder of
 * exception:approve other than the requester decides it. Audited.
 */
export function requestException(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, body: ExceptionIn): Promise<ExceptionOut> {
  const orgId = actor.orgId;
  const control = CATALOGUE.byId.get(body.control_id);
  if (!control) throw validationFailed([{ field: 'control_id', message: 'no such control' }]);
  return inScope(db, { orgId }, async (tx) => {
    const agentId = body.agent_id ?? null;
    if (agentId && !(await agentExists(tx, orgId, agentId))) throw validationFailed([{ field: 'agent_id', message: 'no such agent in this organisation' }]);
    const now = clock.now();
    const row = await insertException(tx, {
      id: randomUUID(),
      org_id: orgId,
      control_id: control.id,
      agent_id: agentId,
      title: body.title,
      justification: body.justification,
      compensating_controls: body.compensating_controls,
      owner_email: body.owner_email,
      expires_at: new Date(body.expires_at),
      requested_by: actor.userId,
      requested_by_type: actor.kind === 'service' ? 'service_account' : 'person',
      created_at: now,
    });
    await audit(tx, req, orgId, {
      action: 'exception.requested',
      targetType: 'exception',
      targetId: row.id,
      details: { control_id: control.id, control_key: control.key, agent_id: agentId, title: row.title, expires_at: iso(row.expires_at) },
    });
    return toException(row, now);
  });
}

/**
 * Approves or rejects a pending exception. The decider is a person holding exception:approve who did not ask for
 * it (403 self_approval_prohibited); an exception decided already, or lapsed while pending, answers 409 conflict.
 * Audited and recorded as evidence (exception_decision) in the decision's transaction, and the requester, when a
 * member, is told (exception.decided).
 */
export function decideException(db: Db, clock: Clock, req: RequestContext, person: PersonPrincipal, exceptionId: string, body: DecisionIn): Promise<ExceptionOut> {
  const orgId = person.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const now = clock.now();
    const before = await exceptionOr404(tx, orgId, exceptionId, true);
    const current = statusAt(before, now);
    if (current === 'expired') throw new ApiError('conflict', 'The exception lapsed before it was decided; ask for a new one.', { status: current });
    if (current !== 'pending') throw new ApiError('conflict', `The exception is already ${current}.`, { status: current });
    if (before.requested_by === person.userId) {
      throw new ApiError('self_approval_prohibited', 'You asked for this exception: another holder of exception:approve must decide it.');
    }
    const status = body.decision === 'approve' ? 'approved' : 'rejected';
    const after = await updateException(tx, orgId, before.id, {
      status,
      decided_by: person.userId,
      decided_at: now,
      decision_note: body.note,
      version: before.version + 1,
    });
    const control = CATALOGUE.byId.get(before.control_id);
    const controlKey = control?.key ?? before.control_id;
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: `exception.${status}`, targetType: 'exception', targetId: before.id, details: { note: body.note, status: { from: 'pending', to: status } } },
      {
        eventType: 'exception_decision',
        agentId: before.agent_id,
        controlRef: controlKey,
        payload: {
          exception_id: before.id,
          control_id: before.control_id,
          control_key: controlKey,
          decision: body.decision,
          note: body.note,
          status,
          expires_at: iso(before.expires_at),
          requested_by: before.requested_by,
        },
      },
    );
    if (before.requested_by && before.requested_by_type === 'person' && (await isActiveMember(tx, orgId, before.requested_by))) {
      const lapses = status === 'approved' ? ` It covers ${controlKey} until ${iso(before.expires_at)}.` : '';
      await notify(
        tx,
        orgId,
        before.requested_by,
        'exception.decided',
        clip(`Exception ${status}: ${before.title}`, 200),
        `Your exception "${before.title}" on ${controlKey} was ${status}. Note: ${body.note}${lapses}`,
        now,
      );
    }
    return toException(after, now);
  });
}
