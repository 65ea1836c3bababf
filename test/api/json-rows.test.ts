import { randomUUID } from 'node:crypto';
import type { Insertable } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { insertAsJson } from '../../api/db/json-rows.js';
import type { ActionRequestsTable } from '../../api/db/schema.js';
import { api, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * insertAsJson (api/db/json-rows.ts), the gateway's inserts as one JSON parameter: a row reads back exactly
 * as the same row inserted as values, whatever its text holds, and rows that do not all set the same columns
 * are left to values.
 */
describe('rows inserted as one JSON parameter', () => {
  let t: TestApp;
  let orgId: string;
  let agentId: string;

  beforeAll(async () => {
    t = await startTestApp();
    const admin = await onboardAdmin(t.app, 'Json rows');
    orgId = admin.tenant.id;
    agentId = (await admin.client.post(api('/agents'), { name: 'Json agent' })).json().id;
  });
  afterAll(async () => {
    await t?.close();
  });

  const action = (key: string, over: Partial<Insertable<ActionRequestsTable>> = {}): Insertable<ActionRequestsTable> => ({
    id: randomUUID(),
    org_id: orgId,
    agent_id: agentId,
    identity_id: null,
    source: 'gateway',
    idempotency_key: key,
    request_hash: 'sha256:abc',
    tool: 'crm.lookup_customer',
    operation: 'read',
    target: 'crm://customers/"42"\\,{x}',
    parameters: JSON.stringify({ q: 'naïve "quote" \\ back\nline 🚀', nested: { list: [1, 2.5, null, true], empty: {} } }),
    environment: null,
    on_behalf_of: 'Zoë, {O\'Brien}',
    justification: null,
    state: 'executed',
    decision: 'allow',
    reason_codes: ['PERMISSION_GRANTED', 'has,comma', 'has "quote"', 'has\\backslash'],
    trace: JSON.stringify([{ rule: 'r1', matched: true }]),
    approvals_required: 0,
    execution_status: 'succeeded',
    output_redacted: JSON.stringify('a string as JSON'),
    requested_by: null,
    correlation_id: 'corr-1',
    created_at: new Date('2026-11-26T07:01:02.345Z'),
    updated_at: new Date('2026-11-26T07:01:02.345Z'),
    executed_at: null,
    decision_ms: 1.234567,
    ...over,
  });

  it('reads back what the same rows read back as values', async () => {
    // The second row: SQL nulls, an empty array, and JSON's own null as JSON text.
    const second = { reason_codes: [], parameters: null, decision_ms: null, output_redacted: JSON.stringify(null) };
    const asJson = [action('json-1'), action('json-2', second)];
    const asValues = [action('values-1'), action('values-2', second)];
    const rows = await inScope(t.database.db, { orgId }, async (tx) => {
      await insertAsJson(tx, 'action_requests', asJson, ['parameters', 'trace', 'output_redacted'])!.execute();
      await tx.insertInto('action_requests').values(asValues).execute();
      return tx.selectFrom('action_requests').selectAll().where('idempotency_key', 'in', ['json-1', 'json-2', 'values-1', 'values-2']).orderBy('idempotency_key').execute();
    });
    const strip = ({ id: _id, idempotency_key: _key, ...rest }: (typeof rows)[number]) => rest;
    expect(rows).toHaveLength(4);
    expect(strip(rows[0]!)).toEqual(strip(rows[2]!));
    expect(strip(rows[1]!)).toEqual(strip(rows[3]!));
    expect(rows[0]!.reason_codes).toEqual(asJson[0]!.reason_codes);
    expect(rows[0]!.parameters).toEqual(JSON.parse(asJson[0]!.parameters as string));
    expect(rows[0]!.created_at).toEqual(asJson[0]!.created_at);
    expect(rows[1]!.parameters).toBeNull();
    expect(rows[1]!.output_redacted).toBeNull();
  });

  it('leaves rows that do not all set the same columns to values', () => {
    const db = t.database.db;
    const { decision_ms: _left, ...without } = action('x');
    expect(insertAsJson(db, 'action_requests', [action('a'), without])).toBeUndefined();
    expect(insertAsJson(db, 'action_requests', [action('a'), action('b', { decision_ms: undefined })])).toBeUndefined();
    expect(insertAsJson(db, 'action_requests', [])).toBeUndefined();
    // The same statement text for one row and for many: what lets PostgreSQL keep it planned.
    const text = (n: number) => insertAsJson(db, 'action_requests', Array.from({ length: n }, (_, i) => action(`k${i}`)))!.compile().sql;
    expect(text(1)).toBe(text(7));
  });
});
