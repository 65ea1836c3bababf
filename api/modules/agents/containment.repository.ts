import type { Insertable, Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ContainmentEventsTable } from '../../db/schema.js';

export type ContainmentEventRow = Selectable<ContainmentEventsTable>;

/** Revokes the agent's active workload identities at `now`; returns their ids. */
export async function revokeIdentitiesOf(tx: Tx, orgId: string, agentId: string, now: Date): Promise<string[]> {
  const revoked = await tx
    .updateTable('workload_identities')
    .set({ status: 'revoked', revoked_at: now })
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .where('status', '=', 'active')
    .returning('id')
    .execute();
  return revoked.map((r) => r.id);
}

export async function insertContainmentEvent(tx: Tx, event: Insertable<ContainmentEventsTable>): Promise<void> {
  await tx.insertInto('containment_events').values(event).execute();
}

/** The agent's containment events in the order they happened. */
export function containmentEventsOf(tx: Tx, orgId: string, agentId: string): Promise<ContainmentEventRow[]> {
  return tx
    .selectFrom('containment_events')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('agent_id', '=', agentId)
    .orderBy('seq')
    .execute();
}
