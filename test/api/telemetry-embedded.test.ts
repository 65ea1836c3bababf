import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope, type Database } from '../../api/db/database.js';
import { recordTelemetry, telemetryEvents } from '../../api/modules/telemetry/index.js';
import { agentToken, api, onboardAdmin, startEmbeddedApp } from '../support/harness.js';

/**
 * The embedded database (`make run`): the same telemetry statements on PGlite (the batch's insert, the list,
 * the stats' percentiles, the dashboard's one statement), and retention run by the API's in-process worker.
 */
describe('telemetry on the embedded database', () => {
  let app: FastifyInstance;
  let database: Database;

  beforeAll(async () => {
    ({ app, database } = await startEmbeddedApp());
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  it('records, lists and counts decisions; the dashboard answers; the in-process worker deletes old events', async () => {
    const admin = await onboardAdmin(app, 'Embedded Org');
    const agent = (await admin.client.post(api('/agents'), { name: 'Embedded agent' })).json();
    const token = await agentToken(app, admin.client, agent.id);
    const results = await Promise.all(
      ['a', 'b', 'c'].map((k) =>
        app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${token}`, 'idempotency-key': `embedded-${k}-0001` },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/1', parameters: {} },
        }),
      ),
    );
    expect(results.map((r) => r.json().decision.decision)).toEqual(['deny', 'deny', 'deny']);

    const listed = (await admin.client.get(api('/telemetry?event_type=gateway.decision'))).json().items;
    expect(listed).toHaveLength(3);
    expect(listed[0].attributes.reason_codes).toEqual(['PERMISSION_NOT_GRANTED']);
    const stats = (await admin.client.get(api('/telemetry/stats?hours=2'))).json();
    expect(stats.totals).toMatchObject({ events: 4, decisions: { deny: 3 }, by_type: { 'identity.token_issued': 1, 'gateway.decision': 3 } });
    expect(stats.totals.decision_latency_ms.p95).toBeGreaterThan(0);
    const dashboard = await admin.client.get(api('/dashboard?days=7'));
    expect(dashboard.statusCode, dashboard.body).toBe(200);
    expect(dashboard.json()).toMatchObject({ agents: { total: 1 }, decisions: { total: { deny: 3 } }, top_deny_reasons: [{ reason_code: 'PERMISSION_NOT_GRANTED', count: 3 }] });

    // Two events from before the retention window, planted as the writers write them.
    const old = new Date(Date.now() - 31 * 86_400_000);
    await inScope(database.db, { orgId: admin.tenant.id }, (tx) =>
      recordTelemetry(tx, admin.tenant.id, [
        telemetryEvents.policyPublished({ at: old, correlationId: 'old-event-1', policyId: agent.id, key: 'old', number: 1, previous: null, actorId: admin.userId }),
        telemetryEvents.policyPublished({ at: old, correlationId: 'old-event-2', policyId: agent.id, key: 'old', number: 2, previous: 1, actorId: admin.userId }),
      ]),
    );
    const count = async () => (await admin.client.get(api('/telemetry?limit=200'))).json().items.length as number;
    expect(await count()).toBe(6);
    expect(await app.deps.jobs.send('telemetry.retention', {})).toEqual(expect.any(String));
    const deadline = Date.now() + 20_000;
    while ((await count()) !== 4) {
      if (Date.now() > deadline) throw new Error('the retention job did not run within 20 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    const { rows } = await sql<{ cron: string }>`select cron from pgboss.schedule where name = 'telemetry.retention'`.execute(database.db);
    expect(rows).toEqual([{ cron: '*/10 * * * *' }]);
  });
});
