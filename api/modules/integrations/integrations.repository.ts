import type { Insertable, Selectable } from 'kysely';
import type { Tx } from '../../db/database.js';
import type { ConnectorsTable, DiscoveryRunsTable, IntegrationsTable } from '../../db/schema.js';
import { notFound } from '../../platform/errors.js';
import { iso } from '../../platform/schemas.js';
import type { Counters, RunOut } from './integrations.schemas.js';

export type IntegrationRow = Selectable<IntegrationsTable>;
export type ConnectorRow = Selectable<ConnectorsTable>;
export type RunRow = Selectable<DiscoveryRunsTable>;

/** How many runs a connector's history keeps answering (spec: last 50). */
export const RUN_HISTORY = 50;

export const NO_COUNTS: Counters = {
  agents_added: 0,
  models_added: 0,
  mcp_servers_added: 0,
  tools_added: 0,
  resources_added: 0,
  identities_added: 0,
  tools_changed: 0,
  findings_opened: 0,
};

export async function insertIntegration(tx: Tx, row: Insertable<IntegrationsTable>, connector: Insertable<ConnectorsTable>) {
  const integration = await tx.insertInto('integrations').values(row).returningAll().executeTakeFirstOrThrow();
  const c = await tx.insertInto('connectors').values(connector).returningAll().executeTakeFirstOrThrow();
  return { integration, connector: c };
}

export function listIntegrationRows(tx: Tx, orgId: string) {
  return tx.selectFrom('integrations').selectAll().where('org_id', '=', orgId).orderBy('created_at').orderBy('id').execute();
}

export async function integrationOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<IntegrationRow> {
  const q = tx.selectFrom('integrations').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound('No such integration.');
  return row;
}

export function setIntegrationStatusRow(tx: Tx, orgId: string, id: string, status: string, now: Date) {
  return tx
    .updateTable('integrations')
    .set({ status, updated_at: now })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function connectorOr404(tx: Tx, orgId: string, id: string, lock = false): Promise<ConnectorRow> {
  const q = tx.selectFrom('connectors').selectAll().where('org_id', '=', orgId).where('id', '=', id);
  const row = await (lock ? q.forUpdate() : q).executeTakeFirst();
  if (!row) throw notFound('No such connector.');
  return row;
}

export function connectorsOf(tx: Tx, orgId: string, integrationIds: string[]) {
  if (integrationIds.length === 0) return Promise.resolve([] as ConnectorRow[]);
  return tx.selectFrom('connectors').selectAll().where('org_id', '=', orgId).where('integration_id', 'in', integrationIds).execute();
}

export function setConnectorEnabledRow(tx: Tx, orgId: string, id: string, enabled: boolean, now: Date) {
  return tx
    .updateTable('connectors')
    .set({ enabled, updated_at: now })
    .where('org_id', '=', orgId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function touchConnector(tx: Tx, orgId: string, id: string, now: Date) {
  return tx.updateTable('connectors').set({ last_run_at: now, updated_at: now }).where('org_id', '=', orgId).where('id', '=', id).execute();
}

export function insertRun(tx: Tx, row: Insertable<DiscoveryRunsTable>) {
  return tx.insertInto('discovery_runs').values(row).returningAll().executeTakeFirstOrThrow();
}

export function runByIdempotencyKey(tx: Tx, orgId: string, connectorId: string, key: string) {
  return tx
    .selectFrom('discovery_runs')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('connector_id', '=', connectorId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
}

export function runningRun(tx: Tx, orgId: string, connectorId: string) {
  return tx
    .selectFrom('discovery_runs')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('connector_id', '=', connectorId)
    .where('status', '=', 'running')
    .executeTakeFirst();
}

/** A run, locked when `lock` (the job's final transaction holds it while it decides the outcome). */
export async function runById(tx: Tx, orgId: string, runId: string, lock = false): Promise<RunRow | undefined> {
  const q = tx.selectFrom('discovery_runs').selectAll().where('org_id', '=', orgId).where('id', '=', runId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** The connector's latest runs, newest first. */
export function recentRuns(tx: Tx, orgId: string, connectorId: string, limit = RUN_HISTORY) {
  return tx
    .selectFrom('discovery_runs')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('connector_id', '=', connectorId)
    .orderBy('started_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

/** The latest run of each of these connectors. */
export async function latestRuns(tx: Tx, orgId: string, connectorIds: string[]): Promise<Map<string, RunRow>> {
  if (connectorIds.length === 0) return new Map();
  const rows = await tx
    .selectFrom('discovery_runs')
    .selectAll()
    .distinctOn('connector_id')
    .where('org_id', '=', orgId)
    .where('connector_id', 'in', connectorIds)
    .orderBy('connector_id')
    .orderBy('started_at', 'desc')
    .orderBy('id', 'desc')
    .execute();
  return new Map(rows.map((r) => [r.connector_id, r]));
}

export function countAttempt(tx: Tx, orgId: string, runId: string) {
  return tx
    .updateTable('discovery_runs')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('org_id', '=', orgId)
    .where('id', '=', runId)
    .execute();
}

export function finishRunRow(
  tx: Tx,
  orgId: string,
  runId: string,
  outcome: { status: 'succeeded' | 'failed'; counters: Counters; warnings: string[]; error_message: string | null; finished_at: Date },
) {
  return tx
    .updateTable('discovery_runs')
    .set({ ...outcome, counters: JSON.stringify(outcome.counters) })
    .where('org_id', '=', orgId)
    .where('id', '=', runId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** A run as the API answers it. */
export function toRun(r: RunRow, integrationId: string): RunOut {
  return {
    id: r.id,
    connector_id: r.connector_id,
    integration_id: integrationId,
    status: r.status,
    idempotency_key: r.idempotency_key,
    started_by: r.started_by,
    started_at: iso(r.started_at),
    finished_at: r.finished_at ? iso(r.finished_at) : null,
    counters: { ...NO_COUNTS, ...(r.counters as Partial<Counters>) },
    warnings: r.warnings,
    error_message: r.error_message,
    correlation_id: r.correlation_id,
  };
}
