import type { Kysely } from 'kysely';
import { run } from './helpers.js';

/**
 * A decision's telemetry from its action row (docs/telemetry.md, D26): `decision_ms` is the latency of
 * the action's first decision, set in the same insert as the action. An action with it set is read as
 * its `gateway.decision` event; the gateway writes no telemetry row of its own for a first decision, so
 * telemetry costs a decision eight bytes and no index entry. Redemption (a resubmission with an approval
 * token) rewrites the action's decision: it first copies the first decision's event into
 * telemetry_events and sets `decision_ms` null, so the first decision is never read from changed columns.
 * Actions decided before this migration keep null here: their events are the rows already written.
 */
export function decisionTelemetry() {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await run(db, [`alter table action_requests add column decision_ms double precision check (decision_ms >= 0)`]);
    },
  };
}
