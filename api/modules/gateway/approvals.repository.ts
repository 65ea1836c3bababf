import type { Tx } from '../../db/database.js';
import type { ApprovalRow } from './actions.service.js';

/** Cancels open approvals and their actions (an explicit cancel, or an agent's suspension). */
export async function cancelApprovals(tx: Tx, approvals: ApprovalRow[], now: Date): Promise<void> {
  if (approvals.length === 0) return;
  const ids = approvals.map((a) => a.id);
  await tx.updateTable('approvals').set({ status: 'cancelled', decided_at: now }).where('id', 'in', ids).execute();
  await tx
    .updateTable('action_requests')
    .set({ state: 'cancelled', updated_at: now })
    .where('id', 'in', approvals.map((a) => a.action_id))
    .execute();
}

