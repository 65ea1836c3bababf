import { sql, type Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ActionRequestsTable } from '../../db/schema.js';
import { notFound } from '../../platform/errors.js';
import type { Position } from '../../platform/pagination.js';
import { iso } from '../../platform/schemas.js';
import type { STATES } from './actions.schemas.js';

export type ActionRow = Selectable<ActionRequestsTable>;

export const toAction = (a: ActionRow) => ({
  id: a.id,
  agent_id: a.agent_id,
  source: a.source as 'gateway' | 'console',
  idempotency_key: a.idempotency_key,
  tool: a.tool,
  operation: a.operation,
  target: a.target,
  parameters: a.parameters,
  environment: a.environment,
  on_behalf_of: a.on_behalf_of,
  justification: a.justification,
  state: a.state as (typeof STATES)[number],
  decision: a.decision as 'allow' | 'deny' | 'require_approval',
  reason_codes: a.reason_codes,
  trace: a.trace,
  approvals_required: a.approvals_required,
  execution_status: a.execution_status,
  output_redacted: a.output_redacted,
  correlation_id: a.correlation_id,
  created_at: iso(a.created_at),
  updated_at: iso(a.updated_at),
  executed_at: a.executed_at ? iso(a.executed_at) : null,
});

export async function actionOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<ActionRow> {
  const q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound('No such action.');
  return row;
}

export interface ActionFilters {
  agent_id?: string;
  state?: string;
  decision?: string;
  tool?: string;
}

/** A page of actions (`limit` rows), newest first, after `after`. */
export function listActions(tx: Tx, orgId: string, filters: ActionFilters, after: Position | undefined, limit: number): Promise<ActionRow[]> {
  let q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', orgId);
  if (filters.agent_id) q = q.where('agent_id', '=', filters.agent_id);
  if (filters.state) q = q.where('state', '=', filters.state);
  if (filters.decision) q = q.where('decision', '=', filters.decision);
  if (filters.tool) q = q.where('tool', '=', filters.tool);
  if (after) q = q.where(sql<boolean>`(created_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}

/** A page of executed actions (`limit` rows), most recently updated first, after `after`. */
export function listExecutions(tx: Tx, orgId: string, after: Position | undefined, limit: number): Promise<ActionRow[]> {
  let q = tx.selectFrom('action_requests').selectAll().where('org_id', '=', orgId).where('execution_status', 'is not', null);
  if (after) q = q.where(sql<boolean>`(updated_at, id) < (${after.t}::timestamptz, ${after.id}::uuid)`);
  return q.orderBy('updated_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}
