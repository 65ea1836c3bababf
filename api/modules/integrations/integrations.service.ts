import { randomUUID } from 'node:crypto';
import type { Clock } from '../../../lib/clock.js';
import { inScope, type Db, type Tx } from '../../db/database.js';
import type { RequestContext } from '../../platform/context.js';
import { ApiError, validationFailed, type ValidationDetail } from '../../platform/errors.js';
import { requireConfirmation } from '../../platform/reason.js';
import { isUniqueViolation } from '../../platform/schemas.js';
import { audit } from '../audit/index.js';
import { auditWithEvidence } from '../evidence/index.js';
import { recordExists } from '../inventory/index.js';
import { FORBIDDEN_CONFIG_KEYS } from './adapters/contract.js';
import { adapterFor } from './adapters/index.js';
import { DISCOVERY_QUEUE } from './discovery.job.js';
import {
  connectorOr404,
  connectorsOf,
  insertIntegration,
  insertRun,
  integrationOr404,
  latestRuns,
  listIntegrationRows,
  recentRuns,
  runByIdempotencyKey,
  runningRun,
  setConnectorEnabledRow,
  setIntegrationStatusRow,
  toRun,
  touchConnector,
  type ConnectorRow,
  type IntegrationRow,
  type RunRow,
} from './integrations.repository.js';
import type { IntegrationIn } from './integrations.schemas.js';
import { iso } from '../../platform/schemas.js';

const FORBIDDEN = new Set<string>(FORBIDDEN_CONFIG_KEYS);

/**
 * Every key of a configuration, at any depth, whose name is one of the forbidden secret names (in any
 * letter case, with `-` read as `_`): a secret has no place in configuration, it lives in the secret
 * store and the integration names it by `credential_ref_id`.
 */
export function forbiddenConfigKeys(value: unknown, path = 'config'): ValidationDetail[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => forbiddenConfigKeys(v, `${path}.${i}`));
  if (!value || typeof value !== 'object') return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, v]) => {
    const here = `${path}.${key}`;
    const named = FORBIDDEN.has(key.toLowerCase().replace(/-/g, '_'));
    return [
      ...(named
        ? [{ field: here, message: `"${key}" may not be a configuration key: name the secret with credential_ref_id`, code: 'forbidden_config_key' }]
        : []),
      ...forbiddenConfigKeys(v, here),
    ];
  });
}

function toIntegration(i: IntegrationRow, c: ConnectorRow, last: RunRow | undefined) {
  return {
    id: i.id,
    kind: i.kind as IntegrationIn['kind'],
    name: i.name,
    mode: i.mode as IntegrationIn['mode'],
    config: i.config as Record<string, unknown>,
    credential_ref_id: i.credential_ref_id,
    status: i.status as 'active' | 'disabled',
    connector: {
      id: c.id,
      adapter_key: c.adapter_key,
      enabled: c.enabled,
      last_run_at: c.last_run_at ? iso(c.last_run_at) : null,
      last_run: last ? toRun(last, i.id) : null,
    },
    created_at: iso(i.created_at),
    updated_at: iso(i.updated_at),
  };
}

async function integrationWithConnector(tx: Tx, orgId: string, i: IntegrationRow) {
  const [c] = await connectorsOf(tx, orgId, [i.id]);
  const last = await latestRuns(tx, orgId, [c!.id]);
  return toIntegration(i, c!, last.get(c!.id));
}

/** The organisation's integrations, each with its connector and latest run, oldest first. */
export function listIntegrations(db: Db, orgId: string) {
  return inScope(db, { orgId }, async (tx) => {
    const rows = await listIntegrationRows(tx, orgId);
    const connectors = new Map((await connectorsOf(tx, orgId, rows.map((r) => r.id))).map((c) => [c.integration_id, c]));
    const last = await latestRuns(tx, orgId, [...connectors.values()].map((c) => c.id));
    return rows.map((r) => {
      const c = connectors.get(r.id)!;
      return toIntegration(r, c, last.get(c.id));
    });
  });
}

/**
 * Creates an integration and its connector. The configuration is checked before anything is written:
 * no secret-named key at any depth, the adapter's own rules (the live MCP adapter needs an endpoint, a
 * live vendor adapter an HTTPS base URL), and a credential reference of this organisation where the
 * live adapter authenticates.
 */
export async function createIntegration(db: Db, clock: Clock, req: RequestContext, orgId: string, body: IntegrationIn) {
  const secrets = forbiddenConfigKeys(body.config);
  if (secrets.length > 0) throw validationFailed(secrets, 'Integration configuration may not hold secrets; name them with credential_ref_id.');
  let adapterKey = 'webhook';
  if (body.kind !== 'webhook') {
    const adapter = adapterFor(body.kind, body.mode);
    if (!adapter) throw validationFailed([{ field: 'mode', message: `no ${body.mode} adapter for ${body.kind}` }]);
    const problems = adapter.validateConfig(body.config);
    if (problems.length > 0) throw validationFailed(problems.map((message) => ({ field: 'config', message })));
    if (adapter.needsSecret && !body.credential_ref_id) {
      throw validationFailed([{ field: 'credential_ref_id', message: `the ${adapter.key} adapter needs a credential reference` }]);
    }
    adapterKey = adapter.key;
  }
  const now = clock.now();
  try {
    return await inScope(db, { orgId }, async (tx) => {
      if (body.credential_ref_id && !(await recordExists(tx, orgId, 'credential_refs', body.credential_ref_id))) {
        throw validationFailed([{ field: 'credential_ref_id', message: 'no such credential reference in this organisation' }]);
      }
      const id = randomUUID();
      const { integration, connector } = await insertIntegration(
        tx,
        {
          id,
          org_id: orgId,
          kind: body.kind,
          name: body.name,
          mode: body.mode,
          config: JSON.stringify(body.config),
          credential_ref_id: body.credential_ref_id ?? null,
          created_by: req.principal?.userId ?? null,
          created_at: now,
          updated_at: now,
        },
        { id: randomUUID(), org_id: orgId, integration_id: id, adapter_key: adapterKey, created_at: now, updated_at: now },
      );
      await audit(tx, req, orgId, {
        action: 'integration.created',
        targetType: 'integration',
        targetId: id,
        details: { kind: body.kind, mode: body.mode, adapter: adapterKey, config_keys: Object.keys(body.config) },
      });
      return toIntegration(integration, connector, undefined);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ApiError('conflict', 'An integration with this name exists already.', { field: 'name' });
    throw err;
  }
}

/** Activates or disables an integration (a disabled one runs no discovery); reason and confirm; audited with evidence. */
export function setIntegrationStatus(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  integrationId: string,
  body: { status: 'active' | 'disabled'; reason: string; confirm: boolean },
) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await integrationOr404(tx, orgId, integrationId, true);
    requireConfirmation(body);
    if (before.status === body.status) return integrationWithConnector(tx, orgId, before);
    const after = await setIntegrationStatusRow(tx, orgId, before.id, body.status, clock.now());
    const status = { from: before.status, to: after.status };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: 'integration.status_changed', targetType: 'integration', targetId: before.id, details: { reason: body.reason, status } },
      { eventType: 'integration_status', payload: { integration_id: before.id, reason: body.reason, status } },
    );
    return integrationWithConnector(tx, orgId, after);
  });
}

/** Enables or disables a connector (a containment operation, spec core rule 12); reason and confirm; audited with evidence. */
export function setConnectorEnabled(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  connectorId: string,
  body: { enabled: boolean; reason: string; confirm: boolean },
) {
  return inScope(db, { orgId }, async (tx) => {
    const before = await connectorOr404(tx, orgId, connectorId, true);
    requireConfirmation(body);
    const integration = await integrationOr404(tx, orgId, before.integration_id);
    if (before.enabled === body.enabled) return integrationWithConnector(tx, orgId, integration);
    await setConnectorEnabledRow(tx, orgId, before.id, body.enabled, clock.now());
    const enabled = { from: before.enabled, to: body.enabled };
    await auditWithEvidence(
      tx,
      req,
      orgId,
      { action: body.enabled ? 'connector.enabled' : 'connector.disabled', targetType: 'connector', targetId: before.id, details: { reason: body.reason, enabled } },
      { eventType: 'connector_enabled', payload: { connector_id: before.id, integration_id: integration.id, reason: body.reason, enabled } },
    );
    return integrationWithConnector(tx, orgId, integration);
  });
}

/**
 * Starts a discovery run: records it `running` and queues its job in the same transaction, so a run
 * never exists without its job nor a job without its run. Answers at once; the worker finishes it.
 * With an idempotency key already used on this connector, answers that run (whatever its state).
 * One run per connector at a time: another while one is running answers 409 naming it.
 */
export async function startRun(
  db: Db,
  clock: Clock,
  req: RequestContext,
  orgId: string,
  connectorId: string,
  body: { idempotency_key?: string | null },
) {
  const key = body.idempotency_key ?? null;
  return inScope(db, { orgId }, async (tx) => {
    // Locking the connector serialises run requests for it: the idempotency and one-at-a-time checks hold.
    const connector = await connectorOr404(tx, orgId, connectorId, true);
    const integration = await integrationOr404(tx, orgId, connector.integration_id);
    if (key) {
      const earlier = await runByIdempotencyKey(tx, orgId, connector.id, key);
      if (earlier) return toRun(earlier, integration.id);
    }
    if (integration.kind === 'webhook') throw new ApiError('conflict', 'A webhook integration receives events; it has no discovery to run.');
    if (integration.status !== 'active') throw new ApiError('conflict', 'The integration is disabled; activate it first.');
    if (!connector.enabled) throw new ApiError('conflict', 'The connector is disabled; enable it first.');
    const running = await runningRun(tx, orgId, connector.id);
    if (running) throw new ApiError('conflict', 'A run of this connector is still running.', { run_id: running.id });
    const now = clock.now();
    const run = await insertRun(tx, {
      id: randomUUID(),
      org_id: orgId,
      connector_id: connector.id,
      idempotency_key: key,
      started_by: req.principal?.userId ?? null,
      started_at: now,
      correlation_id: req.id,
    });
    await touchConnector(tx, orgId, connector.id, now);
    await req.server.deps.jobs.send(DISCOVERY_QUEUE, { org_id: orgId, run_id: run.id }, { tx });
    await audit(tx, req, orgId, {
      action: 'discovery.run_started',
      targetType: 'connector',
      targetId: connector.id,
      details: { run_id: run.id, integration_id: integration.id, adapter: connector.adapter_key },
    });
    return toRun(run, integration.id);
  });
}

/** The connector's last 50 runs, newest first. */
export function listRuns(db: Db, orgId: string, connectorId: string) {
  return inScope(db, { orgId }, async (tx) => {
    const connector = await connectorOr404(tx, orgId, connectorId);
    return (await recentRuns(tx, orgId, connector.id)).map((r) => toRun(r, connector.integration_id));
  });
}
