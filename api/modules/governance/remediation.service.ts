import { randomUUID } from 'node:crypto';
import type { Updateable } from 'kysely';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { GovernanceRemediationTasksTable } from '../../db/schema.js';
import type { Changes } from '../../platform/changes.js';
import type { ActorPrincipal, RequestContext } from '../../platform/context.js';
import { ApiError, notFound, validationFailed, type ValidationDetail } from '../../platform/errors.js';
import type { Cursors } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { CATALOGUE } from './catalogue.js';
import { findingExists, getTask, insertTask, listTasks, toTask, updateTask, type TaskRow } from './remediation.repository.js';
import { TASK_MOVES, type TaskFilters, type TaskIn, type TaskOut, type TaskPatch, type TaskStatus } from './remediation.schemas.js';
import { agentExists } from './systems.repository.js';

const FINAL: ReadonlySet<TaskStatus> = new Set(['done', 'cancelled']);

async function taskOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<TaskRow> {
  const row = await getTask(tx, orgId, id, lock);
  if (!row) throw notFound('No such remediation task.');
  return row;
}

/** One page of the organisation's remediation tasks, newest first. */
export function listTasksPage(db: Db, cursors: Cursors, orgId: string, query: TaskFilters & { limit: number; cursor?: string }) {
  const { limit, cursor, ...filters } = query;
  const scope = `remediation:${orgId}:${filters.status ?? ''}:${filters.agent_id ?? ''}`;
  const after = cursors.decode(scope, cursor);
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listTasks(tx, orgId, filters, after, limit);
    return cursors.page(scope, rows, limit, (r) => ({ t: iso(r.created_at), id: r.id }), toTask);
  });
}

/** The references of a new task that the organisation does not have (422, each named). */
async function badReferences(tx: Tx, orgId: string, body: TaskIn): Promise<ValidationDetail[]> {
  const problems: ValidationDetail[] = [];
  if (body.control_id && !CATALOGUE.byId.has(body.control_id)) problems.push({ field: 'control_id', message: 'no such control' });
  if (body.agent_id && !(await agentExists(tx, orgId, body.agent_id))) problems.push({ field: 'agent_id', message: 'no such agent in this organisation' });
  if (body.finding_id && !(await findingExists(tx, orgId, body.finding_id))) {
    problems.push({ field: 'finding_id', message: 'no such finding in this organisation' });
  }
  return problems;
}

/** Opens a remediation task by hand; audited. */
export function createTask(db: Db, clock: Clock, req: RequestContext, actor: ActorPrincipal, body: TaskIn): Promise<TaskOut> {
  const orgId = actor.orgId;
  return inScope(db, { orgId }, async (tx) => {
    const problems = await badReferences(tx, orgId, body);
    if (problems.length > 0) throw validationFailed(problems);
    const now = clock.now();
    const row = await insertTask(tx, {
      id: randomUUID(),
      org_id: orgId,
      title: body.title,
      description: body.description,
      control_id: body.control_id ?? null,
      agent_id: body.agent_id ?? null,
      finding_id: body.finding_id ?? null,
      assignee_email: body.assignee_email ?? null,
      due_at: body.due_at ? new Date(body.due_at) : null,
      priority: body.priority,
      source: 'manual',
      gap: null,
      created_by: actor.userId,
      created_at: now,
      updated_at: now,
      closed_at: null,
    });
    await audit(tx, req, orgId, {
      action: 'remediation.created',
      targetType: 'remediation_task',
      targetId: row.id,
      details: { title: row.title, control_id: row.control_id, agent_id: row.agent_id, finding_id: row.finding_id, priority: row.priority },
    });
    return toTask(row);
  });
}

/** A move the task's status may not make: 409 conflict naming where it may go. */
function refusedMove(from: TaskStatus, to: TaskStatus): ApiError {
  const allowed = TASK_MOVES[from];
  const message = FINAL.has(from)
    ? `The task is ${from}, which is final.`
    : `A task that is ${from} can move only to ${allowed.join(' or ')}, not ${to}.`;
  return new ApiError('conflict', message, { field: 'status', from, to, allowed });
}

/**
 * Changes a task's status and/or assignee. Status moves: open → in_progress → done, open or in_progress →
 * cancelled; done and cancelled are final, and a closed task changes no more (409 conflict). A patch that changes
 * nothing writes nothing; a change is audited.
 */
export function changeTask(db: Db, clock: Clock, req: RequestContext, orgId: string, taskId: string, patch: TaskPatch): Promise<TaskOut> {
  return inScope(db, { orgId }, async (tx) => {
    const before = await taskOr404(tx, orgId, taskId, true);
    const from = before.status as TaskStatus;
    const set: Updateable<GovernanceRemediationTasksTable> = {};
    const changes: Changes = {};
    if (patch.status != null && patch.status !== from) {
      if (!TASK_MOVES[from].includes(patch.status)) throw refusedMove(from, patch.status);
      set.status = patch.status;
      changes.status = { from, to: patch.status };
    }
    // Empty text clears the assignee.
    const assignee = patch.assignee_email == null ? undefined : patch.assignee_email || null;
    if (assignee !== undefined && assignee !== before.assignee_email) {
      if (FINAL.has(from)) throw new ApiError('conflict', `The task is ${from}, which is final.`, { field: 'assignee_email', status: from });
      set.assignee_email = assignee;
      changes.assignee_email = { from: before.assignee_email, to: assignee };
    }
    if (Object.keys(set).length === 0) return toTask(before);
    const now = clock.now();
    if (set.status && FINAL.has(set.status as TaskStatus)) set.closed_at = now;
    const after = await updateTask(tx, orgId, before.id, { ...set, updated_at: now, version: before.version + 1 });
    await audit(tx, req, orgId, { action: 'remediation.updated', targetType: 'remediation_task', targetId: before.id, details: changes });
    return toTask(after);
  });
}
