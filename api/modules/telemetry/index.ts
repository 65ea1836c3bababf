/**
 * The telemetry module's public face: the event catalogue and its builders, and the insert the writers
 * (gateway, identities, agents, inventory, integrations, policies) run in their own transaction or
 * statement; the retention job for api/jobs.ts.
 */
export {
  CATALOGUE,
  DECISION_OUTCOMES,
  TELEMETRY_EVENT_TYPES,
  TELEMETRY_SEVERITY,
  telemetryEvents,
  type DecisionOutcome,
  type TelemetryEvent,
} from './telemetry.catalogue.js';
export { insertTelemetry, recordTelemetry } from './telemetry.repository.js';
export { sweepTelemetry, telemetryRetentionJob } from './telemetry.jobs.js';
