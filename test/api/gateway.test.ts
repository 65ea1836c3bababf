import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;

describe('gateway: actions, decisions and approvals', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Admin;
  let approverA: Awaited<ReturnType<typeof addMember>>;
  let approverB: Awaited<ReturnType<typeof addMember>>;
  let agentId: string;
  let token: string;
  let tools: Record<string, { id: string }>;
  let keyN = 0;
  const key = () => `key-${Date.now()}-${++keyN}`;

  const submit = (body: Record<string, unknown>, idempotencyKey = key(), bearer = token) =>
    t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${bearer}`, 'idempotency-key': idempotencyKey },
      payload: body,
    });
  const status = (actionId: string, bearer = token) =>
    t.app.inject({ url: api(`/actions/gateway/${actionId}`), headers: { authorization: `Bearer ${bearer}` } });

  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const payment = (amount = 120) => ({
    tool: 'payments.create_payment',
    target: 'payee://suppliers/acme',
    parameters: { amount, currency: 'EUR', payee: 'acme' },
  });

  async function agentToken(client: Admin['client'], name: string) {
    const agent = (await client.post(api('/agents'), { name })).json();
    const identity = (await client.post(api(`/agents/${agent.id}/identities`))).json();
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    return { agentId: agent.id as string, token: res.json().access_token as string };
  }

  async function bind(agent: string, toolKey: string, constraints: Record<string, unknown> = {}) {
    const res = await admin.client.post(api(`/agents/${agent}/permissions`), {
      target_kind: 'tool',
      target_id: tools[toolKey]!.id,
      actions: ['invoke'],
      constraints,
    });
    expect(res.statusCode).toBe(201);
  }

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    approverA = await addMember(t.app, admin.client, ['approver']);
    approverB = await addMember(t.app, admin.client, ['approver']);
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
    ({ agentId, token } = await agentToken(admin.client, 'Payments agent'));
    await bind(agentId, 'crm.lookup_customer');
    await bind(agentId, 'payments.create_payment', { max_amount: 500, currency: 'EUR' });
    await bind(agentId, 'storage.delete_object');
  });
  afterAll(async () => t.close());

  describe('POST /actions', () => {
    it('runs an allowed call, returns redacted output, and records the decision and execution as evidence', async () => {
      const res = await submit(lookup);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        action: { status: 'executed' },
        decision: { decision: 'allow', reason_codes: ['PERMISSION_GRANTED'] },
        execution: { status: 'succeeded', output_redacted: { customer_id: '42', email: '[redacted:email]' } },
        approval: null,
        replayed: false,
      });
      const evidence = (await admin.client.get(api(`/evidence?action_request_id=${body.action.id}`))).json().items;
      expect(evidence.map((e: { event_type: string }) => e.event_type).sort()).toEqual(['decision', 'execution']);
      const action = (await admin.client.get(api(`/actions/${body.action.id}`))).json();
      expect(action).toMatchObject({ agent_id: agentId, source: 'gateway', state: 'executed', tool: 'crm.lookup_customer' });
      expect((await admin.client.get(api('/decisions?decision=allow'))).json().items.map((d: { action_id: string }) => d.action_id)).toContain(body.action.id);
      expect((await admin.client.get(api('/executions'))).json().items.map((d: { action_id: string }) => d.action_id)).toContain(body.action.id);
    });

    it('gives actions, their approvals and evidence records time-ordered ids (UUID version 7), later ones greater (D41)', async () => {
      const version7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
      const first = (await submit(lookup)).json();
      const second = (await submit(payment())).json();
      const third = (await submit(lookup)).json();
      const actions = [first, second, third].map((b) => b.action.id as string);
      for (const id of [...actions, second.approval.id]) expect(id).toMatch(version7);
      expect([...actions].sort()).toEqual(actions);
      const evidence = [];
      for (const id of actions) evidence.push(...(await admin.client.get(api(`/evidence?action_request_id=${id}`))).json().items);
      const bySeq = evidence.sort((a: { seq: number }, b: { seq: number }) => a.seq - b.seq).map((e: { id: string }) => e.id);
      expect(bySeq.length).toBeGreaterThanOrEqual(5);
      for (const id of bySeq) expect(id).toMatch(version7);
      expect([...bySeq].sort()).toEqual(bySeq);
    });

    it('denies as a normal 200 result: unknown tool, no binding, constraint, secret', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ ...lookup, tool: 'crm.export_all' }, 'UNKNOWN_TOOL'],
        [{ tool: 'email.send_message', target: 'mailto://x', parameters: {} }, 'PERMISSION_NOT_GRANTED'],
        [payment(900), 'PERMISSION_CONSTRAINT_EXCEEDED'],
        [{ ...lookup, parameters: { customer_id: '42', note: 'AKIAQWERTYUIOPASDFGH' } }, 'SECRET_DETECTED'],
      ];
      for (const [body, reason] of cases) {
        const res = await submit(body);
        expect(res.statusCode).toBe(200);
        expect(res.json()).toMatchObject({ action: { status: 'denied' }, decision: { decision: 'deny' }, execution: null });
        expect(res.json().decision.reason_codes).toContain(reason);
      }
      const stored = (await admin.client.get(api('/actions?decision=deny&tool=crm.lookup_customer'))).json().items[0];
      expect(JSON.stringify(stored.parameters)).not.toContain('AKIAQWERTYUIOPASDFGH');
    });

    it('validates the Idempotency-Key header and the body', async () => {
      const noKey = await t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${token}` }, payload: lookup });
      expectValidation(noKey, 'header.idempotency-key');
      expectValidation(await submit(lookup, 'short'), 'header.idempotency-key');
      expectValidation(await submit(lookup, 'has spaces in it'), 'header.idempotency-key');
      expectValidation(await submit({ ...lookup, target: 'no-scheme' }), 'target');
      expectValidation(await submit({ ...lookup, tool: '' }), 'tool');
      expectValidation(await submit({ ...lookup, justification: 'x'.repeat(2001) }), 'justification');
      expect((await t.app.inject({ method: 'POST', url: api('/actions'), headers: { 'idempotency-key': key() }, payload: lookup })).statusCode).toBe(401);
    });
  });

  describe('idempotency', () => {
    it('replays the same key and body, refuses the same key with another body, and ignores approval_token', async () => {
      const k = key();
      const first = (await submit(lookup, k)).json();
      const again = (await submit(lookup, k)).json();
      expect(again).toEqual({ ...first, replayed: true });
      const tokenOnly = (await submit({ ...lookup, approval_token: 'tga_whatever' }, k)).json();
      expect(tokenOnly.action.id).toBe(first.action.id);
      const changed = await submit({ ...lookup, parameters: { customer_id: '43' } }, k);
      expect(changed.statusCode).toBe(409);
      expect(changed.json().error.code).toBe('idempotency_conflict');
    });

    it('group-commits concurrent submissions: every one answered, evidenced once, the chain unbroken', async () => {
      const keys = Array.from({ length: 24 }, () => key());
      const results = await Promise.all(keys.map((k, i) => submit(i % 3 === 0 ? payment() : lookup, k)));
      expect(results.map((r) => r.statusCode)).toEqual(Array(24).fill(200));
      const ids = results.map((r) => r.json().action.id as string);
      expect(new Set(ids).size).toBe(24);
      for (const id of ids.slice(0, 6)) {
        const kinds = (await admin.client.get(api(`/evidence?action_request_id=${id}`))).json().items.map((e: { event_type: string }) => e.event_type);
        expect(kinds).toContain('decision');
        expect(kinds.filter((k: string) => k === 'decision')).toHaveLength(1);
      }
      expect((await admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
    });

    it('makes one action of identical submissions racing', async () => {
      const k = key();
      const results = await Promise.all(Array.from({ length: 8 }, () => submit(lookup, k)));
      expect(results.map((r) => r.statusCode)).toEqual(Array(8).fill(200));
      const ids = new Set(results.map((r) => r.json().action.id));
      expect(ids.size).toBe(1);
      expect(results.filter((r) => r.json().replayed === false)).toHaveLength(1);
      const listed = (await admin.client.get(api(`/actions?agent_id=${agentId}&limit=200`))).json().items.filter(
        (a: { idempotency_key: string }) => a.idempotency_key === k,
      );
      expect(listed).toHaveLength(1);
    });

    it('answers a racing submission of the same key with another body 409, and the same body as a replay', async () => {
      const k = key();
      const other = { ...lookup, parameters: { customer_id: '43' } };
      const bodies = [lookup, other, lookup, other, lookup, lookup];
      const results = await Promise.all(bodies.map((b) => submit(b, k)));
      const winner = results.findIndex((r) => r.statusCode === 200 && r.json().replayed === false);
      expect(winner).toBeGreaterThanOrEqual(0);
      results.forEach((r, i) => {
        if (bodies[i] === bodies[winner]) {
          expect(r.statusCode).toBe(200);
          expect(r.json().action.id).toBe(results[winner]!.json().action.id);
        } else {
          expect(r.statusCode).toBe(409);
          expect(r.json().error.code).toBe('idempotency_conflict');
        }
      });
      expect(results.filter((r) => r.statusCode === 200 && r.json().replayed === false)).toHaveLength(1);
    });
  });

  describe('approvals', () => {
    it('opens an approval, hands the token out once approved, and runs the identical resubmission once', async () => {
      const k = key();
      const first = (await submit(payment(), k)).json();
      expect(first).toMatchObject({
        action: { status: 'approval_required' },
        decision: { decision: 'require_approval', reason_codes: ['TOOL_APPROVAL_REQUIRED'] },
        approval: { status: 'pending', approvals_required: 1 },
        execution: null,
      });
      const pending = (await admin.client.get(api('/approvals'))).json().items.map((a: { id: string }) => a.id);
      expect(pending).toContain(first.approval.id);
      const before = (await status(first.action.id)).json();
      expect(before.approval).not.toHaveProperty('approval_token');

      const decided = await approverA.client.post(api(`/approvals/${first.approval.id}/decision`), { decision: 'approve', reason: 'invoice checked' });
      expect(decided.json()).toMatchObject({ status: 'approved', votes: [{ approver_id: approverA.userId, decision: 'approve' }] });
      const view = (await status(first.action.id)).json();
      expect(view).toMatchObject({ id: first.action.id, state: 'approved', decision: 'require_approval', approval: { status: 'approved' } });
      const approvalToken = view.approval.approval_token as string;
      expect(approvalToken).toMatch(/^tga_/);

      // The token is bound to the exact request: another body on the key conflicts, another key does not run.
      expect((await submit({ ...payment(121), approval_token: approvalToken }, k)).statusCode).toBe(409);
      const elsewhere = (await submit({ ...payment(), approval_token: approvalToken })).json();
      expect(elsewhere.action.status).toBe('approval_required');

      const run = (await submit({ ...payment(), approval_token: approvalToken }, k)).json();
      expect(run).toMatchObject({
        action: { id: first.action.id, status: 'executed' },
        decision: { decision: 'allow', reason_codes: ['PERMISSION_GRANTED', 'APPROVAL_GRANTED'] },
        execution: { status: 'succeeded' },
        replayed: false,
      });
      expect(run.execution.output_redacted.payment_reference).toMatch(/^PAY-/);
      // Single use: the same resubmission replays, and the token is no longer shown.
      const replay = (await submit({ ...payment(), approval_token: approvalToken }, k)).json();
      expect(replay).toMatchObject({ replayed: true, action: { status: 'executed' } });
      expect(replay.execution.output_redacted.payment_reference).toBe(run.execution.output_redacted.payment_reference);
      expect((await status(first.action.id)).json().approval).not.toHaveProperty('approval_token');
      const kinds = (await admin.client.get(api(`/evidence?action_request_id=${first.action.id}`))).json().items.map((e: { event_type: string }) => e.event_type);
      expect(kinds.sort()).toEqual(['approval', 'approval_request', 'decision', 'decision', 'execution']);
    });

    it('needs two different approvers for a dual-approval tool', async () => {
      await admin.client.patch(api(`/tools/${tools['storage.delete_object']!.id}`), { approval_class: 'dual' });
      const first = (await submit({ tool: 'storage.delete_object', target: 'store://reports/old.csv', parameters: { path: 'reports/old.csv' } })).json();
      expect(first.approval.approvals_required).toBe(2);
      const url = api(`/approvals/${first.approval.id}/decision`);
      expect((await approverA.client.post(url, { decision: 'approve', reason: 'ok by me' })).json().status).toBe('pending');
      const twice = await approverA.client.post(url, { decision: 'approve', reason: 'really ok' });
      expect(twice.statusCode).toBe(409);
      expect(twice.json().error.code).toBe('duplicate_approver');
      expect((await approverB.client.post(url, { decision: 'approve', reason: 'second pair of eyes' })).json().status).toBe('approved');
    });

    it('refuses self-approval: the person acted for and the person who asked', async () => {
      await admin.client.post(api(`/agents/${agentId}/delegations`), { principal_ref: `user:${approverA.email}`, display_name: 'A', scopes: [] });
      const forA = (await submit({ ...payment(), on_behalf_of: `user:${approverA.email}` })).json();
      const self = await approverA.client.post(api(`/approvals/${forA.approval.id}/decision`), { decision: 'approve', reason: 'for me' });
      expect(self.statusCode).toBe(403);
      expect(self.json().error.code).toBe('self_approval_prohibited');
      expect((await approverB.client.post(api(`/approvals/${forA.approval.id}/decision`), { decision: 'approve', reason: 'for A' })).statusCode).toBe(200);

      const consoleAction = await admin.client.post(api('/actions/console'), { ...payment(), agent_id: agentId }, { 'idempotency-key': key() });
      expect(consoleAction.json()).toMatchObject({ action: { status: 'approval_required' } });
      const own = await admin.client.post(api(`/approvals/${consoleAction.json().approval.id}/decision`), { decision: 'approve', reason: 'mine' });
      expect(own.json().error.code).toBe('self_approval_prohibited');
    });

    it("counts the agent's owners as self where the organisation opts in", async () => {
      await admin.client.post(api(`/agents/${agentId}/owners`), { name: 'Owner B', email: approverB.email, owner_type: 'business' });
      const first = (await submit(payment())).json();
      const url = api(`/approvals/${first.approval.id}/decision`);
      await admin.client.patch(api('/settings'), { owners_count_as_self: true });
      const owner = await approverB.client.post(url, { decision: 'approve', reason: 'my own agent' });
      expect(owner.json().error.code).toBe('self_approval_prohibited');
      await admin.client.patch(api('/settings'), { owners_count_as_self: false });
      expect((await approverB.client.post(url, { decision: 'approve', reason: 'opt-in is off' })).json().status).toBe('approved');
    });

    it('rejects, and then no longer takes decisions', async () => {
      const first = (await submit(payment())).json();
      const url = api(`/approvals/${first.approval.id}/decision`);
      expect((await approverA.client.post(url, { decision: 'reject', reason: 'unknown payee' })).json().status).toBe('rejected');
      expect((await status(first.action.id)).json()).toMatchObject({ state: 'rejected', approval: { status: 'rejected' } });
      const late = await approverB.client.post(url, { decision: 'approve', reason: 'too late' });
      expect(late.statusCode).toBe(409);
      expect(late.json().error.code).toBe('approval_not_pending');
      expectValidation(await approverB.client.post(url, { decision: 'maybe', reason: 'hmm' }), 'decision');
      expectValidation(await approverB.client.post(url, { decision: 'approve', reason: 'no' }), 'reason');
    });

    it("expires with the organisation's approval lifetime", async () => {
      await admin.client.patch(api('/settings'), { approval_ttl_seconds: 60 });
      const first = (await submit(payment())).json();
      expect(Date.parse(first.approval.expires_at) - clock.now().getTime()).toBe(60_000);
      clock.advance(61);
      const url = api(`/approvals/${first.approval.id}/decision`);
      const res = await approverA.client.post(url, { decision: 'approve', reason: 'too slow' });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('approval_expired');
      expect((await status(first.action.id)).json()).toMatchObject({ state: 'expired', approval: { status: 'expired' } });
      expect((await admin.client.get(api('/approvals?status=expired'))).json().items.map((a: { id: string }) => a.id)).toContain(first.approval.id);
      await admin.client.patch(api('/settings'), { approval_ttl_seconds: 900 });
    });

    it('can be cancelled, and suspension cancels what is pending', async () => {
      const first = (await submit(payment())).json();
      const unconfirmed = await admin.client.post(api(`/actions/${first.action.id}/cancel`), { reason: 'not needed' });
      expect(unconfirmed.json().error.code).toBe('confirmation_required');
      const cancelled = await admin.client.post(api(`/actions/${first.action.id}/cancel`), { reason: 'not needed', confirm: true });
      expect(cancelled.json().state).toBe('cancelled');
      expect((await admin.client.post(api(`/actions/${first.action.id}/cancel`), { reason: 'again', confirm: true })).statusCode).toBe(409);

      const other = await agentToken(admin.client, 'Soon suspended');
      await bind(other.agentId, 'payments.create_payment');
      const waiting = (await submit(payment(), key(), other.token)).json();
      await admin.client.post(api(`/agents/${other.agentId}/suspend`), { reason: 'incident', confirm: true });
      const approval = (await admin.client.get(api(`/approvals/${waiting.approval.id}`))).json();
      expect(approval.status).toBe('cancelled');
      expect((await admin.client.get(api(`/actions/${waiting.action.id}`))).json().state).toBe('cancelled');
    });

    it("moves a revoked agent's open actions to revoked, approved ones included, and their tokens run nothing", async () => {
      const doomed = await agentToken(admin.client, 'Soon revoked');
      await bind(doomed.agentId, 'payments.create_payment');
      const pending = (await submit(payment(), key(), doomed.token)).json();
      const approvedKey = key();
      const approved = (await submit(payment(130), approvedKey, doomed.token)).json();
      expect(approved.action.status).toBe('approval_required');
      const vote = await approverA.client.post(api(`/approvals/${approved.approval.id}/decision`), { decision: 'approve', reason: 'Supplier invoice checked' });
      expect(vote.statusCode).toBe(200);
      const token = (await status(approved.action.id, doomed.token)).json().approval.approval_token as string;
      expect(token).toMatch(/^tga_/);

      await admin.client.post(api(`/agents/${doomed.agentId}/revoke`), { reason: 'compromised', confirm: true });
      for (const a of [pending, approved]) {
        expect((await admin.client.get(api(`/actions/${a.action.id}`))).json().state).toBe('revoked');
        expect((await admin.client.get(api(`/approvals/${a.approval.id}`))).json().status).toBe('cancelled');
      }
      expect((await admin.client.get(api('/actions?state=revoked'))).json().items.map((a: { id: string }) => a.id).sort()).toEqual(
        [pending.action.id, approved.action.id].sort(),
      );
      // The revoked agent's token no longer authenticates, so the approval token cannot be redeemed.
      const redeem = await submit({ ...payment(130), approval_token: token }, approvedKey, doomed.token);
      expect(redeem.statusCode).toBe(401);
      expect(redeem.json().error.code).toBe('identity_revoked');
    });
  });

  describe('deny-class rules', () => {
    it('deny a privilege class for every agent until lifted', async () => {
      const added = await admin.client.post(api('/actions/deny-class'), { reason: 'payments freeze', confirm: true, privilege_class: 'financial' });
      expect(added.json()).toMatchObject({ rule_id: expect.stringMatching(/^DC-/), agent_id: null, lifted_at: null });
      const denied = (await submit(payment())).json();
      expect(denied.decision).toEqual({ decision: 'deny', reason_codes: ['PRIVILEGE_CLASS_DENIED'] });
      const lifted = await admin.client.post(api('/actions/deny-class/lift'), { reason: 'freeze over', confirm: true, rule_id: added.json().rule_id });
      expect(lifted.json().lifted_at).toEqual(expect.any(String));
      expect((await submit(payment())).json().decision.decision).toBe('require_approval');
      expect((await admin.client.post(api('/actions/deny-class/lift'), { reason: 'again', confirm: true, rule_id: added.json().rule_id })).statusCode).toBe(409);
      expect((await admin.client.post(api('/actions/deny-class/lift'), { reason: 'none', confirm: true, rule_id: 'DC-NOPE' })).statusCode).toBe(404);
      expectValidation(await admin.client.post(api('/actions/deny-class'), { reason: 'x x x', confirm: true, privilege_class: 'cosmic' }), 'privilege_class');
    });

    it('deny a class for one agent only', async () => {
      const other = await agentToken(admin.client, 'Unaffected');
      await bind(other.agentId, 'crm.lookup_customer');
      const rule = (await admin.client.post(api('/actions/deny-class'), { reason: 'this one', confirm: true, privilege_class: 'read', agent_id: agentId })).json();
      expect((await submit(lookup)).json().decision.reason_codes).toEqual(['PRIVILEGE_CLASS_DENIED']);
      expect((await submit(lookup, key(), other.token)).json().decision.decision).toBe('allow');
      await admin.client.post(api('/actions/deny-class/lift'), { reason: 'done', confirm: true, rule_id: rule.rule_id });
    });
  });

  describe('published policies', () => {
    /** Stores a policy straight in the database, as published versions are stored, without the authoring operations. */
    async function policy(rulesByVersion: unknown[][], published: number | null, status = 'active') {
      const pg = (await import('pg')).default;
      const c = new pg.Client({ connectionString: t.ownerUrl });
      await c.connect();
      try {
        const id = crypto.randomUUID();
        await c.query(
          `insert into policies (id, org_id, key, name, status, latest_version, published_version) values ($1, $2, $3, 'Test policy', $4, $5, $6)`,
          [id, admin.tenant.id, `pol-${id.slice(0, 8)}`, status, rulesByVersion.length, published],
        );
        for (const [i, rules] of rulesByVersion.entries()) {
          await c.query(`insert into policy_versions (id, org_id, policy_id, number, rules) values ($1, $2, $3, $4, $5)`, [
            crypto.randomUUID(),
            admin.tenant.id,
            id,
            i + 1,
            JSON.stringify(rules),
          ]);
        }
        return {
          id,
          setStatus: async (s: string) => {
            const d = new pg.Client({ connectionString: t.ownerUrl });
            await d.connect();
            await d.query('update policies set status = $1 where id = $2', [s, id]);
            await d.end();
          },
        };
      } finally {
        await c.end();
      }
    }

    it('applies the published version of active policies only: not drafts, not inactive policies', async () => {
      const freeze = { id: 'R-1', effect: 'deny', reason_code: 'CRM_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' }] };
      const draftOnly = { id: 'R-2', effect: 'deny', reason_code: 'DRAFT_RULE', conditions: [] };
      const p = await policy([[freeze], [draftOnly]], 1);
      const res = (await submit(lookup)).json();
      expect(res.decision).toEqual({ decision: 'deny', reason_codes: ['CRM_FROZEN'] });
      await p.setStatus('inactive');
      expect((await submit(lookup)).json().decision.decision).toBe('allow');

      const unpublished = await policy([[draftOnly]], null);
      expect((await submit(lookup)).json().decision.decision).toBe('allow');
      await unpublished.setStatus('inactive');
    });

    it('asks for as many approvers as a published rule obliges', async () => {
      const twoPeople = {
        id: 'R-3',
        effect: 'require_approval',
        reason_code: 'CUSTOMER_DATA_REVIEW',
        conditions: [{ field: 'tool.privilege_class', op: 'eq', value: 'read' }],
        obligations: { approvals_required: 2 },
      };
      const p = await policy([[twoPeople]], 1);
      const res = (await submit(lookup)).json();
      expect(res).toMatchObject({ decision: { decision: 'require_approval', reason_codes: ['CUSTOMER_DATA_REVIEW'] }, approval: { approvals_required: 2 } });
      await p.setStatus('inactive');
    });
  });

  describe('isolation', () => {
    it("keeps one agent's and one organisation's actions from another", async () => {
      const mine = (await submit(lookup)).json();
      const other = await agentToken(admin.client, 'Nosy agent');
      expect((await status(mine.action.id, other.token)).statusCode).toBe(404);
      const b = await onboardAdmin(t.app);
      expect((await b.client.get(api(`/actions/${mine.action.id}`))).statusCode).toBe(404);
      expect((await b.client.get(api('/actions'))).json().items).toEqual([]);
      expect((await b.client.post(api(`/actions/${mine.action.id}/cancel`), { reason: 'not mine', confirm: true })).statusCode).toBe(404);
      const console = await b.client.post(api('/actions/console'), { ...lookup, agent_id: agentId }, { 'idempotency-key': key() });
      expect(console.statusCode).toBe(404);
    });
  });

  describe('gateway rate limit', () => {
    it('limits each agent per minute', async () => {
      const limited = await startTestApp({ env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '3' } });
      try {
        const a = await onboardAdmin(limited.app);
        const agent = (await a.client.post(api('/agents'), { name: 'Chatty' })).json();
        const identity = (await a.client.post(api(`/agents/${agent.id}/identities`))).json();
        const tok = (
          await limited.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', ...identity } })
        ).json().access_token;
        const codes = [];
        for (let i = 0; i < 4; i++) {
          const res = await limited.app.inject({
            method: 'POST',
            url: api('/actions'),
            headers: { authorization: `Bearer ${tok}`, 'idempotency-key': `limit-key-${i}` },
            payload: lookup,
          });
          codes.push(res.statusCode);
        }
        expect(codes).toEqual([200, 200, 200, 429]);
        const refused = await limited.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${tok}`, 'idempotency-key': 'limit-key-late' },
          payload: lookup,
        });
        expect(refused.json()).toMatchObject({ error: { code: 'rate_limited', details: { limit_per_minute: 3 } } });
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);

        // Submissions that arrive together are counted together, exactly: a second agent's six at once get three answers.
        const other = (await a.client.post(api('/agents'), { name: 'Bursty' })).json();
        const otherIdentity = (await a.client.post(api(`/agents/${other.id}/identities`))).json();
        const otherTok = (
          await limited.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', ...otherIdentity } })
        ).json().access_token;
        const burst = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            limited.app.inject({
              method: 'POST',
              url: api('/actions'),
              headers: { authorization: `Bearer ${otherTok}`, 'idempotency-key': `burst-key-${i}` },
              payload: lookup,
            }),
          ),
        );
        expect(burst.map((r) => r.statusCode).sort()).toEqual([200, 200, 200, 429, 429, 429]);
        // The status lookup draws on the same budget.
        const lookupStatus = await limited.app.inject({
          url: api(`/actions/gateway/${burst.find((r) => r.statusCode === 200)!.json().action.id}`),
          headers: { authorization: `Bearer ${otherTok}` },
        });
        expect(lookupStatus.statusCode).toBe(429);
      } finally {
        await limited.close();
      }
      expect(t.config.rateLimits.gatewayPerMinute).toBe(120);
    });
  });
});

