import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../scripts/openapi-document.js';
import { addMember, api, Client, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * Every operation of the document, checked for who may call it: without credentials a
 * non-public operation answers 401; a signed-in person without the operation's permission gets
 * 403 forbidden naming it, and the denial lands in the audit log. Adding an operation adds a row.
 */
const doc = await openApiDocument();
const operations = Object.entries(doc.paths as Record<string, Record<string, { 'x-tollgate-caller': string }>>).flatMap(
  ([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      method: method.toUpperCase() as 'GET' | 'POST' | 'PATCH' | 'DELETE',
      // Any well-formed id: authentication and permission come before the record is looked up.
      url: api(path.replace(/\{[a-z_]+\}/g, '00000000-0000-4000-8000-000000000000')),
      caller: op['x-tollgate-caller'],
      name: `${method.toUpperCase()} ${path}`,
    })),
);

describe('who may call each operation', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let nobody: Client;
  let nobodyId: string;

  beforeAll(async () => {
    t = await startTestApp();
    admin = await onboardAdmin(t.app);
    // A member holding no role: every permission is missing.
    const m = await addMember(t.app, admin.client, []);
    nobody = m.client;
    nobodyId = m.userId;
  });
  afterAll(async () => t.close());

  // Client credentials travel in the token request's body: tested with the token exchange.
  const guarded = operations.filter((o) => o.caller !== 'public' && o.caller !== 'client');
  const permissioned = operations.filter((o) => o.caller.includes(':'));

  it('covers operations of every caller kind', () => {
    expect(permissioned.length).toBeGreaterThanOrEqual(10);
    expect(guarded.some((o) => o.caller === 'signed in')).toBe(true);
    expect(guarded.some((o) => o.caller === 'onboarding')).toBe(true);
  });

  it.each(guarded)('$name answers 401 unauthenticated without credentials', async ({ method, url }) => {
    const res = await new Client(t.app).request(method, url, method === 'GET' ? undefined : {});
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toMatchObject({ code: 'unauthenticated', correlation_id: expect.any(String) });
  });

  it.each(permissioned)('$name answers 403 forbidden naming $caller, and audits it', async ({ method, url, caller, name }) => {
    const correlation = `access-${Math.random().toString(36).slice(2, 12)}`;
    const res = await nobody.request(method, url, method === 'GET' ? undefined : {}, { 'x-correlation-id': correlation });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toMatchObject({
      code: 'forbidden',
      correlation_id: correlation,
      details: { required_permission: caller },
    });
    const audit = await admin.client.get(api(`/audit?action=permission.denied&actor_id=${nobodyId}&limit=200`));
    const entry = audit.json().items.find((e: { correlation_id: string }) => e.correlation_id === correlation);
    expect(entry, name).toMatchObject({
      outcome: 'denied',
      target_type: 'operation',
      details: { required_permission: caller },
      actor: { type: 'person', id: nobodyId },
    });
  });
});
