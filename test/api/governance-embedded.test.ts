import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../api/db/database.js';
import { CATALOGUE } from '../../api/modules/governance/index.js';
import { addMember, api, onboardAdmin, startEmbeddedApp } from '../support/harness.js';

/**
 * Governance on the embedded database (PGlite), as `make run` runs it: migration 0014's functions (the window's
 * bisection in plpgsql, the expiry job's owner-defined function), coverage, classification and the expiry job in
 * the API's in-process worker, with no PostgreSQL server.
 */
describe('governance on the embedded database', () => {
  let app: FastifyInstance;
  let database: Database;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let sec: Awaited<ReturnType<typeof addMember>>;
  const control = (key: string) => CATALOGUE.byKey.get(key)!;

  beforeAll(async () => {
    ({ app, database } = await startEmbeddedApp());
    admin = await onboardAdmin(app, 'Embedded Governance Org');
    sec = await addMember(app, admin.client, ['security_admin']);
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    await database?.close();
  });

  const statusOf = async (key: string) => {
    const c = control(key);
    const f = (await admin.client.get(api('/governance/frameworks'))).json().items.find((x: { key: string }) => x.key === c.framework);
    return f.controls.find((x: { id: string }) => x.id === c.id).status as string;
  };

  it('computes coverage from the chain, takes mappings, classifies, and tells an owner of an exception about to lapse', async () => {
    const agent = (await admin.client.post(api('/agents'), { name: 'Embedded agent' })).json().id;
    const tool = (await admin.client.get(api('/tools'))).json().items.find((x: { tool_key: string }) => x.tool_key === 'crm.lookup_customer');
    await admin.client.post(api(`/agents/${agent}/permissions`), { target_kind: 'tool', target_id: tool.id, actions: ['invoke'], constraints: {} });
    expect(await statusOf('eu-ai-act:Art.12')).toBe('not_met');
    const submitted = await admin.client.post(api('/actions/console'), { tool: 'crm.lookup_customer', target: 'crm://customers/1', agent_id: agent }, { 'idempotency-key': 'embedded-gov-0001' });
    expect(submitted.statusCode, submitted.body).toBe(200);
    expect(await statusOf('eu-ai-act:Art.12')).toBe('met');

    const mapped = await admin.client.post(api(`/controls/${control('nist-ai-rmf:GOVERN-3').id}/mappings`), {
      evidence_event_type: 'decision',
      rationale: 'Console reviews by a mixed panel.',
      condition: { source: 'console' },
    });
    expect(mapped.statusCode, mapped.body).toBe(201);
    expect(await statusOf('nist-ai-rmf:GOVERN-3')).toBe('met');

    const classified = (await admin.client.post(api(`/governance/systems/${agent}/classify`), { classification: 'high', rationale: 'Reads customer records.' })).json();
    expect(classified.remediation_tasks.map((t: { gap: string }) => t.gap)).toContain('human_oversight');
    expect((await admin.client.post(api(`/governance/systems/${agent}/classify`), { classification: 'high', rationale: 'Reads customer records.' })).json().remediation_tasks).toEqual([]);

    const e = (
      await admin.client.post(api('/exceptions'), {
        control_id: control('eu-ai-act:Art.10').id,
        title: 'Data inventory next month',
        justification: 'Discovery of the data estate is scheduled for next month.',
        owner_email: sec.email,
        expires_at: new Date(Date.now() + 3 * 86_400_000).toISOString(),
      })
    ).json();
    expect((await sec.client.post(api(`/exceptions/${e.id}/decision`), { decision: 'approve', note: 'Accepted until then.' })).statusCode).toBe(200);
    expect(await statusOf('eu-ai-act:Art.10')).toBe('excepted');
    await app.deps.jobs.send('governance.exception_expiry', {});
    const deadline = Date.now() + 20_000;
    for (;;) {
      const kinds = (await sec.client.get(api('/notifications'))).json().items.map((n: { kind: string }) => n.kind);
      if (kinds.includes('exception.expiring')) break;
      if (Date.now() > deadline) throw new Error('no exception.expiring notice in 20 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  });
});
