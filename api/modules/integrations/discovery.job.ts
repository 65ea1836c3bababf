import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../../../lib/clock.js';
import type { Config } from '../../config.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import { isDatabaseUnavailable } from '../../platform/errors.js';
import type { JobHandler } from '../../platform/jobs.js';
import { OutboundError, OutboundHttp } from '../../platform/outbound.js';
import { recordAudit } from '../audit/index.js';
import { appendEvidence, type EvidenceSigner } from '../evidence/index.js';
import { recordTelemetry, telemetryEvents } from '../telemetry/index.js';
import { ConnectorError, type IntegrationKind, type IntegrationMode } from './adapters/contract.js';
import { resolveSecret } from './adapters/credentials.js';
import { adapterFor } from './adapters/index.js';
import { countAttempt, finishRunRow, NO_COUNTS, runById, type RunRow } from './integrations.repository.js';
import type { Counters } from './integrations.schemas.js';
import { reconcile } from './reconcile.js';

/** The queue of discovery runs (created by migration 0009_jobs). */
export const DISCOVERY_QUEUE = 'discovery.run';

/** What a discovery job carries: which run of which organisation. */
export const discoveryJob = z.object({ org_id: z.uuid(), run_id: z.uuid() });
export type DiscoveryJob = z.infer<typeof discoveryJob>;

/** What running discovery needs from the process it runs in (the worker, or the API in process). */
export interface DiscoveryDeps {
  db: Db;
  clock: Clock;
  config: Config;
  evidence: EvidenceSigner;
  log: FastifyBaseLogger;
  /** Aborted when the job's time is up or its process stops without waiting: the attempt writes nothing more. */
  signal?: AbortSignal;
}

/** Called after a run has landed: risk scores and the graph are recalculated (filled in by their modules). */
export type AfterDiscovery = (orgId: string, runId: string) => Promise<void>;
const afterDiscovery: AfterDiscovery[] = [];
export function onDiscoveryFinished(hook: AfterDiscovery): void {
  afterDiscovery.push(hook);
}

interface Loaded {
  run: RunRow;
  integrationId: string;
  kind: IntegrationKind;
  mode: IntegrationMode;
  config: Record<string, unknown>;
  adapterKey: string;
  credential: { provider: string; secret_path: string; status: string } | null;
}

async function load(tx: Tx, orgId: string, runId: string, attempt = false): Promise<Loaded | null> {
  const run = await runById(tx, orgId, runId);
  if (!run || run.status !== 'running') return null;
  if (attempt) await countAttempt(tx, orgId, runId);
  const row = await tx
    .selectFrom('connectors as c')
    .innerJoin('integrations as i', 'i.id', 'c.integration_id')
    .leftJoin('credential_refs as r', 'r.id', 'i.credential_ref_id')
    .select(['i.id as integration_id', 'i.kind', 'i.mode', 'i.config', 'c.adapter_key', 'r.provider', 'r.secret_path', 'r.status as credential_status'])
    .where('c.org_id', '=', orgId)
    .where('c.id', '=', run.connector_id)
    .executeTakeFirstOrThrow();
  return {
    run,
    integrationId: row.integration_id,
    kind: row.kind as IntegrationKind,
    mode: row.mode as IntegrationMode,
    config: row.config as Record<string, unknown>,
    adapterKey: row.adapter_key,
    credential: row.provider && row.secret_path ? { provider: row.provider, secret_path: row.secret_path, status: row.credential_status ?? 'active' } : null,
  };
}

/** Reads the source: the adapter with the resolved secret, over the guarded transport. Expected failures throw ConnectorError. */
async function discover(deps: DiscoveryDeps, l: Loaded) {
  const adapter = adapterFor(l.kind, l.mode);
  if (!adapter || l.kind === 'webhook') throw new ConnectorError(`No ${l.mode} adapter for ${l.kind}.`);
  const problems = adapter.validateConfig(l.config);
  if (problems.length > 0) throw new ConnectorError(`The configuration is not valid: ${problems.join('; ')}`);
  let secret: string | null = null;
  if (l.mode === 'live' && l.credential) {
    if (l.credential.status !== 'active') throw new ConnectorError('The credential reference is revoked.');
    secret = await resolveSecret(l.credential, deps.config);
  }
  if (adapter.needsSecret && !secret) throw new ConnectorError('This connector needs a credential reference.');
  // The job's signal stops the request in flight when the attempt's time is up (its retry may already run).
  const http = OutboundHttp.fromConfig(deps.config, { signal: deps.signal });
  try {
    return await adapter.discover({ http, config: l.config, secret, now: deps.clock.now() });
  } finally {
    await http.close();
  }
}

/**
 * Runs one discovery run to its end. At-least-once: a run that is no longer `running` (finished by an
 * earlier delivery) is left alone, and the outcome is written in one transaction that holds the run row
 * and checks it is still running, so a run completes once. The source is read outside any transaction;
 * reconciliation is one transaction (all of it lands, or none). Expected failures (ConnectorError, a
 * refused host) finish the run `failed` with their message; a lost database throws, so the job is retried.
 */
export async function runDiscovery(deps: DiscoveryDeps, data: unknown): Promise<void> {
  const { org_id: orgId, run_id: runId } = discoveryJob.parse(data);
  const loaded = await inScope(deps.db, { orgId }, (tx) => load(tx, orgId, runId, true));
  if (!loaded) return;
  const log = deps.log.child({ run_id: runId, correlation_id: loaded.run.correlation_id });
  let outcome: { failure: string } | { result: Awaited<ReturnType<typeof discover>> };
  try {
    outcome = { result: await discover(deps, loaded) };
  } catch (err) {
    if (!(err instanceof ConnectorError || err instanceof OutboundError)) throw err;
    outcome = { failure: err.message };
  }
  // An attempt whose time is up leaves the outcome to the retry that replaces it.
  deps.signal?.throwIfAborted();
  try {
    await inScope(deps.db, { orgId }, async (tx) => {
      const run = await runById(tx, orgId, runId, true);
      if (!run || run.status !== 'running') return;
      if ('failure' in outcome) return finish(deps, tx, loaded, { status: 'failed', counters: NO_COUNTS, warnings: [], error: outcome.failure });
      const now = deps.clock.now();
      const done = await reconcile({ tx, orgId, runId, integrationId: loaded.integrationId, adapterKey: loaded.adapterKey, now }, outcome.result);
      await finish(deps, tx, loaded, { status: 'succeeded', counters: done.counters, warnings: done.warnings, error: null }, done.evidence);
    });
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err;
    // A fault of ours while reconciling: nothing of it landed (one transaction). Say so on the run.
    log.error({ err }, 'discovery reconciliation failed');
    await failRun(deps, orgId, runId, `Reconciliation failed on our side; nothing was recorded. Quote the correlation ID ${loaded.run.correlation_id}.`);
    return;
  }
  log.info({ outcome: 'failure' in outcome ? 'failed' : 'succeeded' }, 'discovery run finished');
  if (!('failure' in outcome)) {
    for (const hook of afterDiscovery) {
      await hook(orgId, runId).catch((err: unknown) => log.error({ err }, 'after-discovery hook failed'));
    }
  }
}

async function finish(
  deps: DiscoveryDeps,
  tx: Tx,
  l: Loaded,
  o: { status: 'succeeded' | 'failed'; counters: Counters; warnings: string[]; error: string | null },
  evidence: Parameters<typeof appendEvidence>[3] extends (infer E)[] ? Omit<E, 'correlationId'>[] : never = [],
): Promise<void> {
  const now = deps.clock.now();
  const orgId = l.run.org_id;
  // Warnings are for people: bounded in number and length.
  const warnings = o.warnings.slice(0, 200).map((w) => w.slice(0, 500));
  await finishRunRow(tx, orgId, l.run.id, { status: o.status, counters: o.counters, warnings, error_message: o.error, finished_at: now });
  const details = { run_id: l.run.id, integration_id: l.integrationId, adapter: l.adapterKey, status: o.status, counters: o.counters, error_message: o.error };
  await recordAudit(
    tx,
    orgId,
    {
      actorType: 'system',
      actorId: null,
      action: o.status === 'succeeded' ? 'discovery.run_succeeded' : 'discovery.run_failed',
      targetType: 'connector',
      targetId: l.run.connector_id,
      outcome: o.status === 'succeeded' ? 'success' : 'failure',
      correlationId: l.run.correlation_id,
      details,
    },
    now,
  );
  await appendEvidence(
    tx,
    deps.evidence,
    orgId,
    [...evidence, { eventType: 'discovery_run', payload: details }].map((e) => ({ ...e, correlationId: l.run.correlation_id })),
    now,
  );
  // The run's end, and the trust states it moved (an approved server whose tool set changed), as telemetry.
  const at = { at: now, correlationId: l.run.correlation_id };
  await recordTelemetry(tx, orgId, [
    ...evidence
      .filter((e) => e.eventType === 'mcp_trust_change')
      .map((e) => {
        const p = e.payload as { mcp_server_id: string; reason: string; trust_state: { from: string; to: string } };
        return telemetryEvents.trustChanged({
          ...at,
          mcpServerId: p.mcp_server_id,
          serverName: p.mcp_server_id,
          from: p.trust_state.from,
          to: p.trust_state.to,
          reason: p.reason,
          source: 'discovery',
          runId: l.run.id,
        });
      }),
    telemetryEvents.discoveryRun({
      ...at,
      runId: l.run.id,
      integrationId: l.integrationId,
      adapter: l.adapterKey,
      status: o.status,
      counters: o.counters,
      errorMessage: o.error,
    }),
  ]);
}

/** Marks a run failed with a message, when it is still running (the dead-letter path and reconciliation faults). */
export async function failRun(deps: DiscoveryDeps, orgId: string, runId: string, message: string): Promise<void> {
  await inScope(deps.db, { orgId }, async (tx) => {
    const run = await runById(tx, orgId, runId, true);
    if (!run || run.status !== 'running') return;
    const l = await load(tx, orgId, runId);
    if (!l) return;
    await finish(deps, tx, l, { status: 'failed', counters: NO_COUNTS, warnings: [], error: message });
  });
}

/** A discovery job whose retries are spent (its worker died each time, or the database stayed away). */
export async function abandonDiscovery(deps: DiscoveryDeps, data: unknown): Promise<void> {
  const { org_id: orgId, run_id: runId } = discoveryJob.parse(data);
  await failRun(deps, orgId, runId, 'The run did not finish: its worker stopped or could not reach the database, and the retries are spent. Start a new run.');
}

/** The discovery queue's handler, as api/jobs.ts lists it. */
export const discoveryJobHandler: JobHandler = {
  queue: DISCOVERY_QUEUE,
  handler: (data, ctx) => runDiscovery({ ...ctx.deps, log: ctx.log, signal: ctx.signal }, data),
  deadLetter: (data, ctx) => abandonDiscovery({ ...ctx.deps, log: ctx.log }, data),
};
