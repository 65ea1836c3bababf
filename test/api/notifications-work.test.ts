import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { openFinding } from '../../api/modules/findings/index.js';
import { addMember, api, onboardAdmin, setPlan, startTestApp, TestClock, type Client, type TestApp } from '../support/harness.js';

/**
 * The notifications that tell people about work waiting for them (docs/decisions.md, D11): a pending approval
 * reaches every member who may decide it, through the gateway's batch and its one-by-one path alike; a high or
 * critical finding reaches every member who may triage findings. Nobody else, and no other organisation.
 */
describe('notifications of work', () => {
  const clock = new TestClock(new Date('2026-11-25T10:00:00.000Z'));
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;
  let approver: Client;
  let security: Client;
  let viewer: Client;
  let token: string;
  let n = 0;

  type Note = { id: string; kind: string; title: string; body: string; read_at: string | null };
  const notes = async (c: Client, kind: string): Promise<Note[]> => {
    const res = await c.get(api('/notifications?limit=200'));
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().items as Note[]).filter((x) => x.kind === kind);
  };
  const submit = (body: Record<string, unknown>) =>
    t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${token}`, 'idempotency-key': `nw-${++n}-${Date.now()}` }, payload: body });
  const payment = (amount: number) => ({ tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount, currency: 'EUR' } });

  beforeAll(async () => {
    t = await startTestApp({ clock });
    admin = await onboardAdmin(t.app, 'Work Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    other = await onboardAdmin(t.app, 'Elsewhere Org');
    approver = (await addMember(t.app, admin.client, ['approver'])).client;
    security = (await addMember(t.app, admin.client, ['security_admin'])).client;
    viewer = (await addMember(t.app, admin.client, ['viewer'])).client;
    const agent = (await admin.client.post(api('/agents'), { name: 'Paying agent' })).json();
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const pay = tools.find((x) => x.tool_key === 'payments.create_payment')!;
    const bound = await admin.client.post(api(`/agents/${agent.id}/permissions`), {
      target_kind: 'tool',
      target_id: pay.id,
      actions: ['invoke'],
      constraints: { max_amount: 500, currency: 'EUR' },
    });
    expect(bound.statusCode, bound.body).toBe(201);
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    token = (
      await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      })
    ).json().access_token;
  }, 60_000);
  afterAll(async () => t?.close());

  it('approval.pending: every member who may decide approvals is told of each new one, with what is asked; nobody else', async () => {
    const held = await submit(payment(120));
    expect(held.json().decision.decision, held.body).toBe('require_approval');
    const approval = held.json().approval;
    for (const c of [admin.client, approver, security]) {
      const [note, ...more] = await notes(c, 'approval.pending');
      expect(more).toEqual([]);
      expect(note).toMatchObject({ title: 'Approval needed: payments.create_payment (invoke)', read_at: null });
      expect(note!.body).toContain(`Approval ${approval.id}, open until ${approval.expires_at}`);
      expect(note!.body).toContain('asks to invoke payments.create_payment on payee://acme: ');
    }
    expect(await notes(viewer, 'approval.pending')).toEqual([]);
    expect(await notes(other.client, 'approval.pending')).toEqual([]);
    // A denied decision asks nobody.
    expect((await submit(payment(900))).json().decision.decision).toBe('deny');
    expect(await notes(approver, 'approval.pending')).toHaveLength(1);
  });

  it('approval.pending: concurrent submissions, group-committed in one batch, each notify once per approver', async () => {
    const before = (await notes(approver, 'approval.pending')).length;
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => submit(payment(100 + i))));
    const ids = results.map((r) => r.json().approval.id as string);
    const after = await notes(approver, 'approval.pending');
    expect(after).toHaveLength(before + 8);
    for (const id of ids) expect(after.filter((x) => x.body.includes(id))).toHaveLength(1);
  });

  it('finding.high_severity: a high or critical finding tells every member who may triage findings; a medium one nobody', async () => {
    const open = (severity: 'medium' | 'high' | 'critical', key: string) =>
      inScope(t.database.db, { orgId: admin.tenant.id }, (tx) =>
        openFinding(tx, admin.tenant.id, {
          category: 'tool_poisoning',
          severity,
          title: `Tool mail.send hides instructions (${key})`,
          description: 'It tells the model to forward every message.',
          evidence: {},
          dedupe_key: key,
          now: clock.now(),
        }),
      );
    const critical = await open('critical', 'nw-critical');
    await open('medium', 'nw-medium');
    // Opened once: the same key while open opens nothing, and tells nobody again.
    expect((await open('critical', 'nw-critical')).opened).toBe(false);
    for (const c of [admin.client, security]) {
      const found = await notes(c, 'finding.high_severity');
      expect(found.map((x) => x.title)).toEqual(['Critical finding: Tool mail.send hides instructions (nw-critical)']);
      expect(found[0]!.body).toContain(`finding ${critical.id}`);
    }
    for (const c of [approver, viewer, other.client]) expect(await notes(c, 'finding.high_severity')).toEqual([]);
  });
});
