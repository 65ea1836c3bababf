import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Member = Awaited<ReturnType<typeof addMember>>;

describe('policies: versions, four-eyes publishing, operators and simulation', () => {
  let t: TestApp;
  const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
  let admin: Admin;
  let security: Member;
  let developer: Member;
  let viewer: Member;
  let agentId: string;
  let token: string;
  let keyN = 0;

  const payment = (amount: number) => ({ tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount, currency: 'EUR', payee: 'acme' } });
  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const submit = async (body: Record<string, unknown>) => {
    const res = await t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${token}`, 'idempotency-key': `policy-${Date.now()}-${++keyN}` },
      payload: body,
    });
    expect(res.statusCode).toBe(200);
    return res.json().decision as { decision: string; reason_codes: string[] };
  };
  const denyLookups = [
    { id: 'no-lookups', effect: 'deny', reason_code: 'LOOKUPS_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' }] },
  ];
  const ifMatch = (v: number) => ({ 'if-match': `"${v}"` });

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app);
    security = await addMember(t.app, admin.client, ['security_admin']);
    developer = await addMember(t.app, admin.client, ['agent_developer']);
    viewer = await addMember(t.app, admin.client, ['viewer']);
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const agent = (await admin.client.post(api('/agents'), { name: 'Policy subject' })).json();
    agentId = agent.id;
    for (const key of ['crm.lookup_customer', 'payments.create_payment']) {
      const res = await admin.client.post(api(`/agents/${agentId}/permissions`), {
        target_kind: 'tool',
        target_id: tools.find((x) => x.tool_key === key)!.id,
        actions: ['invoke'],
      });
      expect(res.statusCode).toBe(201);
    }
    const identity = (await admin.client.post(api(`/agents/${agentId}/identities`))).json();
    token = (
      await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      })
    ).json().access_token;
  });
  afterAll(async () => t.close());

  describe('life cycle', () => {
    it('keeps a draft out of live decisions, needs a second person to publish, and then applies it at once', async () => {
      const created = await developer.client.post(api('/policies'), { key: 'freeze-lookups', name: 'Freeze lookups', rules: denyLookups });
      expect(created.statusCode).toBe(201);
      const policy = created.json();
      expect(policy).toMatchObject({ key: 'freeze-lookups', status: 'active', version: 1, latest_version: 1, published_version: null, critical: false });
      expect(policy.versions).toEqual([expect.objectContaining({ number: 1, state: 'draft', change_note: 'Initial draft', author_id: developer.userId })]);
      expect(created.headers.etag).toBe('"1"');
      expect((await submit(lookup)).decision).toBe('allow');

      // The author cannot publish, even holding policy:publish; nor can someone without it.
      const byAuthor = await admin.client.post(api('/policies'), { key: 'admin-own', name: 'Admin own', rules: denyLookups });
      const own = await admin.client.post(api(`/policies/${byAuthor.json().id}/versions/1/publish`), undefined, ifMatch(1));
      expect(own.statusCode).toBe(403);
      expect(own.json().error.code).toBe('four_eyes_required');
      const noRight = await developer.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, ifMatch(1));
      expect(noRight.statusCode).toBe(403);
      expect(noRight.json().error.code).toBe('forbidden');

      const missing = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`));
      expect(missing.statusCode).toBe(428);
      expect(missing.json().error.code).toBe('precondition_required');
      const stale = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, ifMatch(7));
      expect(stale.statusCode).toBe(409);
      expect(stale.json().error).toMatchObject({ code: 'version_conflict', details: { current_version: 1 } });

      const published = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, ifMatch(1));
      expect(published.statusCode).toBe(200);
      expect(published.json()).toMatchObject({ version: 2, published_version: 1, versions: [{ number: 1, state: 'published', published_by: security.userId }] });
      expect(await submit(lookup)).toMatchObject({ decision: 'deny', reason_codes: ['LOOKUPS_FROZEN'] });
      const again = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, ifMatch(2));
      expect(again.json().error.code).toBe('conflict');

      // A second version is a draft: the live decision stays until it is published.
      const noHeader = await developer.client.post(api(`/policies/${policy.id}/versions`), { rules: denyLookups, change_note: 'again' });
      expect(noHeader.statusCode).toBe(428);
      const thaw = [{ id: 'thaw', effect: 'allow', reason_code: 'LOOKUPS_THAWED', conditions: [{ field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' }] }];
      const v2 = await developer.client.post(api(`/policies/${policy.id}/versions`), { rules: thaw, change_note: 'Thaw after the audit' }, ifMatch(2));
      expect(v2.statusCode).toBe(201);
      expect(v2.json()).toMatchObject({ version: 3, latest_version: 2, published_version: 1 });
      expect(v2.json().versions.map((v: { number: number; state: string }) => [v.number, v.state])).toEqual([
        [2, 'draft'],
        [1, 'published'],
      ]);
      expect((await submit(lookup)).decision).toBe('deny');
      expect((await admin.client.post(api(`/policies/${policy.id}/versions/2/publish`), undefined, ifMatch(3))).statusCode).toBe(200);
      expect(await submit(lookup)).toMatchObject({ decision: 'allow', reason_codes: ['PERMISSION_GRANTED', 'LOOKUPS_THAWED'] });

      // Rolling back is publishing an earlier version.
      const back = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, ifMatch(4));
      expect(back.json().versions.map((v: { number: number; state: string }) => [v.number, v.state])).toEqual([
        [2, 'superseded'],
        [1, 'published'],
      ]);
      expect((await submit(lookup)).decision).toBe('deny');

      // Inactive policies are not read.
      const off = await security.client.post(api(`/policies/${policy.id}/status`), { status: 'inactive' }, ifMatch(5));
      expect(off.json()).toMatchObject({ status: 'inactive', version: 6 });
      expect((await submit(lookup)).decision).toBe('allow');
      expect((await developer.client.post(api(`/policies/${policy.id}/status`), { status: 'active' }, ifMatch(6))).statusCode).toBe(403);

      // Every change is in the audit log and the evidence chain.
      const evidence = (await admin.client.get(api(`/evidence?event_type=policy_change&control_ref=policy:freeze-lookups`))).json().items;
      expect(evidence.map((e: { payload: { change: string } }) => e.payload.change).sort()).toEqual(
        ['created', 'published', 'published', 'published', 'status_changed', 'version_created'].sort(),
      );
      const audit = (await admin.client.get(api(`/audit?target_id=${policy.id}`))).json().items;
      expect(audit.map((a: { action: string }) => a.action)).toContain('policy.published');
      expect((await admin.client.get(api('/evidence/verify'))).json().valid).toBe(true);
    });

    it('deactivates a critical policy only with confirm and a reason', async () => {
      const p = (await developer.client.post(api('/policies'), { key: 'crit-1', name: 'Critical one', critical: true, rules: denyLookups })).json();
      const bare = await security.client.post(api(`/policies/${p.id}/status`), { status: 'inactive' }, ifMatch(1));
      expect(bare.json().error.code).toBe('confirmation_required');
      const noReason = await security.client.post(api(`/policies/${p.id}/status`), { status: 'inactive', confirm: true }, ifMatch(1));
      expect(noReason.json().error).toMatchObject({ code: 'validation_failed', details: [{ field: 'reason' }] });
      const ok = await security.client.post(api(`/policies/${p.id}/status`), { status: 'inactive', confirm: true, reason: 'Replaced by crit-2' }, ifMatch(1));
      expect(ok.json()).toMatchObject({ status: 'inactive', version: 2 });
      const trail = (await admin.client.get(api(`/evidence?event_type=policy_change&control_ref=policy:crit-1`))).json().items;
      expect(trail.find((e: { payload: { change: string } }) => e.payload.change === 'status_changed').payload).toMatchObject({ reason: 'Replaced by crit-2', from: 'active', to: 'inactive' });
    });

    it('lists by key with cursors, refuses a duplicate key, and answers 404 for another organisation', async () => {
      const dup = await developer.client.post(api('/policies'), { key: 'freeze-lookups', name: 'Again', rules: denyLookups });
      expect(dup.statusCode).toBe(409);
      const first = (await admin.client.get(api('/policies?limit=1'))).json();
      expect(first.items).toHaveLength(1);
      const second = (await admin.client.get(api(`/policies?limit=50&cursor=${first.next_cursor}`))).json();
      const keys = [first.items[0].key, ...second.items.map((x: { key: string }) => x.key)];
      expect(keys).toEqual([...keys].sort());
      expect(keys).toContain('freeze-lookups');
      expect((await viewer.client.get(api('/policies'))).statusCode).toBe(200);
      expect((await viewer.client.post(api('/policies'), { key: 'nope', name: 'Nope', rules: denyLookups })).statusCode).toBe(403);

      const other = await onboardAdmin(t.app, 'Other Org');
      const mine = first.items[0].id;
      expect((await other.client.get(api(`/policies/${mine}`))).statusCode).toBe(404);
      expect((await other.client.post(api(`/policies/${mine}/status`), { status: 'inactive' }, ifMatch(1))).statusCode).toBe(404);
      expect(
        (await other.client.post(api('/policies/simulate'), { agent_id: agentId, tool: 'crm.lookup_customer' })).statusCode,
      ).toBe(404);
    });
  });

  describe('rules', () => {
    it.each([
      ['an unknown field', { field: 'tool.colour', op: 'eq', value: 'red' }, /unknown field/],
      ['an unknown operator', { field: 'tool.key', op: 'like', value: 'x' }, /unknown operator/],
      ['a wrong operand type', { field: 'action.amount', op: 'gt', value: '100' }, /needs a number/],
      ['a string field compared with a number', { field: 'tool.key', op: 'eq', value: 5 }, /string field/],
      ['a regular expression RE2 refuses', { field: 'action.target', op: 'matches', value: '(a)\\1' }, /RE2/],
      ['CEL that does not parse', { op: 'cel', value: 'action.amount >' }, /does not parse/],
      ['CEL naming an unknown variable', { op: 'cel', value: 'user.age > 3' }, /type-check/],
      ['CEL that is not a boolean', { op: 'cel', value: '1 + 2' }, /not bool/],
    ])('answers 422 invalid_policy naming the rule and condition for %s', async (_name, cond, message) => {
      const rules = [
        { id: 'fine', effect: 'deny', reason_code: 'FINE', conditions: [{ field: 'tool.key', op: 'eq', value: 'x' }] },
        { id: 'broken', effect: 'deny', reason_code: 'BROKEN', conditions: [{ field: 'tool.key', op: 'exists' }, cond] },
      ];
      const res = await developer.client.post(api('/policies'), { key: `bad-${++keyN}`, name: 'Bad rules', rules });
      expect(res.statusCode).toBe(422);
      const error = res.json().error;
      expect(error.code).toBe('invalid_policy');
      expect(error.details).toEqual([expect.objectContaining({ rule: 'broken', rule_index: 1, condition_index: 1, message: expect.stringMatching(message) })]);
      const sim = await developer.client.post(api('/policies/simulate'), { agent_id: agentId, tool: 'crm.lookup_customer', draft_rules: rules });
      expect(sim.json().error.code).toBe('invalid_policy');
    });

    it('refuses a malformed rule as a validation failure naming the field', async () => {
      const res = await developer.client.post(api('/policies'), {
        key: 'malformed',
        name: 'Malformed',
        rules: [{ id: 'r', effect: 'maybe', reason_code: 'lower', conditions: [] }],
      });
      expect(res.statusCode).toBe(422);
      const fields = res.json().error.details.map((d: { field: string }) => d.field);
      expect(fields).toEqual(expect.arrayContaining(['rules.0.effect', 'rules.0.reason_code']));
    });

    it('serves the operators with operand types, the fields and the precedence', async () => {
      const res = (await viewer.client.get(api('/policies/operators'))).json();
      expect(res.operators.map((o: { op: string }) => o.op)).toEqual(
        expect.arrayContaining(['eq', 'neq', 'in', 'not_in', 'gt', 'gte', 'lt', 'lte', 'contains', 'starts_with', 'matches', 'exists', 'cel']),
      );
      expect(res.operators.find((o: { op: string }) => o.op === 'gt')).toMatchObject({ operand: 'number', field_types: ['number', 'any'] });
      expect(res.fields.map((f: { field: string }) => f.field)).toEqual(
        expect.arrayContaining(['tool.privilege_class', 'action.amount', 'tool.target_type', 'tool.mcp_trust_state', 'time.hour', 'action.parameters.<name>']),
      );
      expect(res.precedence).toMatch(/deny wins/);
    });
  });

  describe('simulation', () => {
    it('runs draft rules through the engine with a trace, stores and runs nothing', async () => {
      const countActions = async () => (await admin.client.get(api(`/actions?agent_id=${agentId}&limit=200`))).json().items.length;
      const before = await countActions();
      const drafts = [
        {
          id: 'big',
          effect: 'require_approval',
          reason_code: 'BIG_PAYMENT',
          conditions: [{ field: 'action.amount', op: 'gt', value: 100 }, { op: 'cel', value: 'action.currency in ["EUR", "USD"]' }],
          obligations: { approvals_required: 2 },
        },
        { id: 'weekend', effect: 'deny', reason_code: 'WEEKEND', conditions: [{ field: 'time.weekday', op: 'in', value: [0, 6] }] },
      ];
      const sim = await developer.client.post(api('/policies/simulate'), { agent_id: agentId, ...payment(250), draft_rules: drafts });
      expect(sim.statusCode).toBe(200);
      expect(sim.json()).toMatchObject({ decision: 'require_approval', reason_codes: ['BIG_PAYMENT', 'TOOL_APPROVAL_REQUIRED'], approvals_required: 2, rules_evaluated: 'draft' });
      const policySteps = sim.json().trace.filter((s: { step: string }) => s.step === 'policy');
      expect(policySteps).toEqual([
        expect.objectContaining({ outcome: 'require_approval', detail: { rule_id: 'big', conditions: [{ field: 'action.amount', op: 'gt', matched: true }, { op: 'cel', expression: 'action.currency in ["EUR", "USD"]', matched: true }] } }),
        expect.objectContaining({ outcome: 'skip', detail: { rule_id: 'weekend', conditions: [{ field: 'time.weekday', op: 'in', matched: false }] } }),
      ]);
      const approved = await developer.client.post(api('/policies/simulate'), { agent_id: agentId, ...payment(250), draft_rules: drafts, approval_present: true });
      expect(approved.json()).toMatchObject({ decision: 'allow', reason_codes: ['PERMISSION_GRANTED', 'APPROVAL_GRANTED'] });
      const published = await developer.client.post(api('/policies/simulate'), { agent_id: agentId, tool: 'crm.lookup_customer' });
      expect(published.json()).toMatchObject({ rules_evaluated: 'published' });
      expect(await countActions()).toBe(before);
      expect((await viewer.client.post(api('/policies/simulate'), { agent_id: agentId, tool: 'crm.lookup_customer' })).statusCode).toBe(403);
    });
  });
});

describe('policies across API processes', () => {
  it('applies a version published through one process to the next decision on the other', async () => {
    const one = await startTestApp();
    const two = await startTestApp({ share: one });
    try {
      const admin = await onboardAdmin(one.app);
      const security = await addMember(one.app, admin.client, ['security_admin']);
      const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
      const agent = (await admin.client.post(api('/agents'), { name: 'Two replicas' })).json();
      await admin.client.post(api(`/agents/${agent.id}/permissions`), {
        target_kind: 'tool',
        target_id: tools.find((x) => x.tool_key === 'crm.lookup_customer')!.id,
        actions: ['invoke'],
      });
      const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
      const token = (
        await one.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret } })
      ).json().access_token;
      let n = 0;
      const decideOnTwo = async () =>
        (
          await two.app.inject({
            method: 'POST',
            url: api('/actions'),
            headers: { authorization: `Bearer ${token}`, 'idempotency-key': `replica-policy-${++n}` },
            payload: { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } },
          })
        ).json().decision;
      expect((await decideOnTwo()).decision).toBe('allow');

      const policy = (
        await admin.client.post(api('/policies'), {
          key: 'freeze',
          name: 'Freeze',
          rules: [{ id: 'r1', effect: 'deny', reason_code: 'FROZEN', conditions: [{ field: 'action.target', op: 'matches', value: '^crm://customers/[0-9]+$' }] }],
        })
      ).json();
      expect((await decideOnTwo()).decision).toBe('allow');
      const res = await security.client.post(api(`/policies/${policy.id}/versions/1/publish`), undefined, { 'if-match': '"1"' });
      expect(res.statusCode).toBe(200);
      expect(await decideOnTwo()).toMatchObject({ decision: 'deny', reason_codes: ['FROZEN'] });
    } finally {
      await two.close();
      await one.close();
    }
  });
});
