import { sql, type Insertable, type Selectable, type Updateable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { GovernanceRemediationTasksTable } from '../../db/schema.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import { CATALOGUE } from './catalogue.js';
import { OPEN_TASK_STATUSES, type TaskFilters, type TaskOut, type TaskPriority, type TaskStatus } from './remediation.schemas.js';

export type TaskRow = Selectable<GovernanceRemediationTasksTable>;

export function insertTask(tx: Tx, t: Insertable<GovernanceRemediationTasksTable>): Promise<TaskRow> {
  return tx.insertInto('governance_remediation_tasks').values(t).returningAll().executeTakeFirstOrThrow();
}

/**
 * Opens a task for a gap of an agent's class unless one is open on the same agent and control: the partial unique
 * index governance_remediation_gap_once decides between classifications running at once. Undefined when not opened.
 */
export function insertGapTask(tx: Tx, t: Insertable<GovernanceRemediationTasksTable>): Promise<TaskRow | undefined> {
  return tx
    .insertInto('governance_remediation_tasks')
    .values({ ...t, source: 'classification' })
    .onConflict((oc) =>
      oc
        .columns(['org_id', 'agent_id', 'control_id'])
        .where(sql<boolean>`source = 'classification' and status in ('open', 'in_progress')`)
        .doNothing(),
    )
    .returningAll()
    .executeTakeFirst();
}

/** One page of the organisation's tasks, newest first. */
export function listTasks(tx: Tx, orgId: string, f: TaskFilters, after: Position | undefined, limit: number): Promise<TaskRow[]> {
  let q = tx.selectFrom('governance_remediation_tasks').selectAll().where('org_id', '=', orgId);
  if (f.status) q = q.where('status', '=', f.status);
  if (f.agent_id) q = q.where('agent_id', '=', f.agent_id);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit + 1).execute();
}

export function getTask(tx: Tx, orgId: string, id: string, lock = false): Promise<TaskRow | undefined> {
  const q = tx.selectFrom('governance_remediation_tasks').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

export function updateTask(tx: Tx, orgId: string, id: string, change: Updateable<GovernanceRemediationTasksTable>): Promise<TaskRow> {
  return tx
    .updateTable('governance_remediation_tasks')
    .set(change)
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Open or in-progress tasks of these agents that name a control, oldest first. */
export function openTasksOfAgents(tx: Tx, orgId: string, agentIds: string[]) {
  if (agentIds.length === 0) return Promise.resolve([]);
  return tx
    .selectFrom('governance_remediation_tasks')
    .select(['id', 'agent_id', 'control_id'])
    .where('org_id', '=', orgId)
    .where('agent_id', 'in', agentIds)
    .where('control_id', 'is not', null)
    .where('status', 'in', OPEN_TASK_STATUSES)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

/** Whether the organisation has the finding. */
export async function findingExists(tx: Tx, orgId: string, id: string): Promise<boolean> {
  return (await tx.selectFrom('findings').select('id').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) !== undefined;
}

export const toTask = (r: TaskRow): TaskOut => ({
  id: r.id,
  title: r.title,
  description: r.description,
  control_id: r.control_id,
  control_key: r.control_id ? (CATALOGUE.byId.get(r.control_id)?.key ?? null) : null,
  agent_id: r.agent_id,
  finding_id: r.finding_id,
  assignee_email: r.assignee_email,
  due_at: r.due_at ? iso(r.due_at) : null,
  priority: r.priority as TaskPriority,
  status: r.status as TaskStatus,
  source: r.source,
  gap: r.gap,
  created_by: r.created_by,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
  closed_at: r.closed_at ? iso(r.closed_at) : null,
  version: r.version,
});
