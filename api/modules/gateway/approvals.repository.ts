import type { Tx } from '../../db/database.js';
import type { ApprovalRow } from './actions.service.js';

/**
 * Cancels open approvals and moves their actions to `cancelled` (an explicit cancel, an agent's
 * suspension) or `revoked` (the agent's revocation: nothing it asked for can run, ever).
 */
export async function cancelApprovals(
  tx: Tx,
  approvals: ApprovalRow[],
  now: Date,
  actionState: 'cancelled' | 'revoked' = 'cancelled',
): Promise<void> {
  if (approvals.length === 0) return;
  const ids = approvals.map((a) => a.id);
  await tx.updateTable('approvals').set({ status: 'cancelled', decided_at: now }).where('id', 'in', ids).execute();
  await tx
    .updateTable('action_requests')
    .set({ state: actionState, updated_at: now })
    .where('id', 'in', approvals.map((a) => a.action_id))
    .execute();
}

