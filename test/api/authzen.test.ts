import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, asOwner, onboardAdmin, publishRulesAsOwner, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Json = Record<string, any>;

/**
 * AuthZEN's HTTPS binding answers a malformed request with 400: `bad_request` in Tollgate's envelope, the
 * details naming each field as `validation_failed` details do, and a message naming the first problem.
 */
function expectMalformed(res: { statusCode: number; json(): any }, field: string): void {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(400);
  const { error } = res.json();
  expect(error.code).toBe('bad_request');
  expect(error.details.map((d: { field: string }) => d.field)).toContain(field);
  expect(error.message).toMatch(/^The request is malformed: \S+: /);
  expect(error.message).toContain(error.details[0].field);
}

/** test/fixtures/authzen: AuthZEN interop and certification requests adapted to agents and tools (README there). */
const FIXTURES = new URL('../fixtures/authzen/', import.meta.url);
interface Fixture {
  file: string;
  source: string;
  adapted: string;
  endpoint: 'evaluation' | 'evaluations';
  request: Json;
  /** The status the answer must have: 200 unless the case is a malformed request (400). */
  status?: number;
  expect: Json;
}
const fixtures: Fixture[] = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((file) => ({ file, ...(JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Omit<Fixture, 'file'>) }));

const EVALUATION = api('/access/v1/evaluation');
const EVALUATIONS = api('/access/v1/evaluations');

describe('AuthZEN evaluation endpoints', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Admin;
  let approver: Awaited<ReturnType<typeof addMember>>;
  let tools: Record<string, { id: string }>;
  let me: { agentId: string; token: string; uri: string };
  let keyN = 0;
  const key = () => `authzen-test-${Date.now()}-${++keyN}`;

  const post = (url: string, body: unknown, bearer = me.token, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${bearer}`, ...headers }, payload: body as object });

  const lookup = (extra: Json = {}) => ({
    subject: { type: 'agent', id: me.agentId },
    action: { name: 'invoke', properties: { parameters: { customer_id: '42' } } },
    resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/42' } },
    ...extra,
  });
  const payment = (amount = 120, context: Json = {}) => ({
    subject: { type: 'agent', id: me.agentId },
    action: { name: 'invoke', properties: { parameters: { amount, currency: 'EUR', payee: 'acme' } } },
    resource: { type: 'tool', id: 'payments.create_payment', properties: { target: 'payee://suppliers/acme' } },
    context,
  });

  async function agentToken(client: Admin['client'], name: string) {
    const agent = (await client.post(api('/agents'), { name })).json();
    const identity = (await client.post(api(`/agents/${agent.id}/identities`))).json();
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    return { agentId: agent.id as string, token: res.json().access_token as string, uri: res.json().agent_uri as string };
  }

  async function bind(client: Admin['client'], agent: string, toolKey: string, toolId = tools[toolKey]!.id, constraints: Json = {}) {
    const res = await client.post(api(`/agents/${agent}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'], constraints });
    expect(res.statusCode).toBe(201);
  }

  /** The agent's actions as the registry holds them, counted in the database: what was decided and recorded. */
  const actionCount = (agentId: string) =>
    asOwner(t, async (c) => Number((await c.query('select count(*) from action_requests where agent_id = $1', [agentId])).rows[0].count));

  const fill = (value: unknown): unknown => JSON.parse(JSON.stringify(value).replaceAll('{{agent_id}}', me.agentId).replaceAll('{{agent_uri}}', me.uri));

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_REVOCATION_CACHE_SECONDS: '0', RATE_LIMIT_GATEWAY_PER_MINUTE: '10000' } });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    approver = await addMember(t.app, admin.client, ['approver']);
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
    me = await agentToken(admin.client, 'AuthZEN agent');
    await bind(admin.client, me.agentId, 'crm.lookup_customer');
    await bind(admin.client, me.agentId, 'payments.create_payment', undefined, { max_amount: 500, currency: 'EUR' });
  });
  afterAll(async () => t.close());

  describe('interop and certification fixtures', () => {
    it('has fixtures of both endpoints, and of the malformed requests the certification expects 400 for', () => {
      expect(fixtures.filter((f) => f.status === 400).length).toBeGreaterThanOrEqual(4);
      expect(fixtures.filter((f) => f.endpoint === 'evaluation').length).toBeGreaterThanOrEqual(3);
      expect(fixtures.filter((f) => f.endpoint === 'evaluations').length).toBeGreaterThanOrEqual(3);
    });

    for (const fixture of fixtures) {
      it(`${fixture.file}: ${fixture.adapted}`, async () => {
        const before = await actionCount(me.agentId);
        const res = await post(fixture.endpoint === 'evaluation' ? EVALUATION : EVALUATIONS, fill(fixture.request));
        expect(res.statusCode, res.body).toBe(fixture.status ?? 200);
        const body = res.json();
        expect(body).toMatchObject(fixture.expect);
        if (res.statusCode !== 200) {
          // Refused whole: nothing decided, no decision member for a PEP to misread.
          expect(body).not.toHaveProperty('decision');
          expect(await actionCount(me.agentId)).toBe(before);
          return;
        }
        const answers: Json[] = fixture.expect.evaluations ? body.evaluations : [body];
        if (fixture.expect.evaluations) {
          // In order, and exactly as many as were decided: semantics that stop early answer fewer.
          expect(body.evaluations).toHaveLength(fixture.expect.evaluations.length);
          expect(body).not.toHaveProperty('decision');
        }
        // Every answer that names an action is a gateway decision on record, with its evidence; nothing else was decided.
        const decided = answers.filter((a) => a.context.action);
        expect(await actionCount(me.agentId)).toBe(before + decided.length);
        for (const a of decided) {
          expect(a.decision).toBe(a.context.decision === 'allow');
          const action = (await admin.client.get(api(`/actions/${a.context.action.id}`))).json();
          expect(action).toMatchObject({ agent_id: me.agentId, source: 'gateway', decision: a.context.decision, reason_codes: a.context.reason_codes });
          const events = (await admin.client.get(api(`/evidence?action_request_id=${a.context.action.id}`))).json().items;
          expect(events.map((e: { event_type: string }) => e.event_type)).toContain('decision');
        }
      });
    }
  });

  describe('an evaluation is a gateway decision', () => {
    it('records the mapped call as POST /actions does: tool, operation, target, parameters, context fields, evidence', async () => {
      // Acting for a person needs the person's delegation, as on POST /actions.
      await admin.client.post(api(`/agents/${me.agentId}/delegations`), { principal_ref: 'user:ann@example.com', display_name: 'Ann', scopes: [] });
      const res = await post(EVALUATION, lookup({ context: { justification: 'ticket 7', on_behalf_of: 'user:ann@example.com', environment: 'staging', time: 'now' } }));
      expect(res.statusCode).toBe(200);
      const { decision, context } = res.json();
      expect(decision).toBe(true);
      expect(context).toMatchObject({ decision: 'allow', reason_codes: ['PERMISSION_GRANTED'], replayed: false, execution: { status: 'succeeded' } });
      expect(context.idempotency_key).toMatch(/^authzen-/);
      const action = (await admin.client.get(api(`/actions/${context.action.id}`))).json();
      expect(action).toMatchObject({
        tool: 'crm.lookup_customer',
        operation: 'invoke',
        target: 'crm://customers/42',
        parameters: { customer_id: '42' },
        justification: 'ticket 7',
        on_behalf_of: 'user:ann@example.com',
        environment: 'staging',
        state: 'executed',
        idempotency_key: context.idempotency_key,
      });
      const kinds = (await admin.client.get(api(`/evidence?action_request_id=${context.action.id}`))).json().items.map((e: { event_type: string }) => e.event_type);
      expect(kinds.sort()).toEqual(['decision', 'execution']);
      expect((await admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
    });

    it('decides require_approval with the approval, and the same evaluation with the approval token is allowed and runs once', async () => {
      const k = key();
      const first = (await post(EVALUATION, payment(200, { idempotency_key: k }))).json();
      expect(first).toMatchObject({ decision: false, context: { decision: 'require_approval', approval: { status: 'pending', approvals_required: 1 } } });
      expect(new Date(first.context.approval.expires_at).getTime()).toBeGreaterThan(clock.now().getTime());
      const decided = await approver.client.post(api(`/approvals/${first.context.approval.id}/decision`), { decision: 'approve', reason: 'invoice checked' });
      expect(decided.json().status).toBe('approved');
      const view = (await t.app.inject({ url: api(`/actions/gateway/${first.context.action.id}`), headers: { authorization: `Bearer ${me.token}` } })).json();
      const approvalToken = view.approval.approval_token as string;

      const run = (await post(EVALUATION, payment(200, { idempotency_key: k, approval_token: approvalToken }))).json();
      expect(run).toMatchObject({
        decision: true,
        context: { decision: 'allow', reason_codes: ['PERMISSION_GRANTED', 'APPROVAL_GRANTED'], action: { id: first.context.action.id, status: 'executed' } },
      });
      expect(run.context.execution.output_redacted.payment_reference).toMatch(/^PAY-/);
      // The token is spent: asking again replays the executed decision, it does not pay twice.
      const again = (await post(EVALUATION, payment(200, { idempotency_key: k, approval_token: approvalToken }))).json();
      expect(again).toMatchObject({ decision: true, context: { replayed: true, action: { id: first.context.action.id } } });
      expect(again.context.execution.output_redacted.payment_reference).toBe(run.context.execution.output_redacted.payment_reference);
    });

    it('replays a context.idempotency_key with the same decision, refuses it with another call, and decides afresh without one', async () => {
      const k = key();
      const first = (await post(EVALUATION, lookup({ context: { idempotency_key: k } }))).json();
      const replay = (await post(EVALUATION, lookup({ context: { idempotency_key: k } }))).json();
      expect(replay.decision).toBe(first.decision);
      expect(replay.context).toEqual({ ...first.context, replayed: true });

      const other = await post(EVALUATION, lookup({ resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/43' } }, context: { idempotency_key: k } }));
      expect(other.statusCode).toBe(409);
      expect(other.json().error.code).toBe('idempotency_conflict');

      const a = (await post(EVALUATION, lookup())).json();
      const b = (await post(EVALUATION, lookup())).json();
      expect(a.context.action.id).not.toBe(b.context.action.id);
      expect(a.context.idempotency_key).not.toBe(b.context.idempotency_key);
    });

    it('closes a batch item the gateway refuses (an idempotency conflict) and decides the others', async () => {
      const k = key();
      await post(EVALUATION, lookup({ context: { idempotency_key: k } }));
      const res = await post(EVALUATIONS, {
        subject: { type: 'agent', id: me.agentId },
        action: { name: 'invoke' },
        evaluations: [
          { resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/99' } }, context: { idempotency_key: k } },
          { resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/98' } } },
        ],
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().evaluations).toMatchObject([
        { decision: false, context: { error: { status: 409, code: 'idempotency_conflict' } } },
        { decision: true, context: { decision: 'allow' } },
      ]);
    });

    it('puts evaluations with context.session_id in that session, the one POST /actions names with Tollgate-Session', async () => {
      // A published rule that stops a third lookup in one session (flow rules, docs/policies.md).
      const rule = { id: 'R-1', effect: 'deny', reason_code: 'LOOKUPS_PER_SESSION', conditions: [{ field: 'session.same_tool_calls', op: 'gte', value: 2 }] };
      const policy = await publishRulesAsOwner(t, admin.tenant.id, 'pol-session', [rule]);
      try {
        const inSession = (id: string) => lookup({ context: { session_id: id } });
        const session = `s-${key()}`;
        expect((await post(EVALUATION, inSession(session))).json().decision).toBe(true);
        // The second call of the session goes through POST /actions: the same session.
        const viaActions = await t.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${me.token}`, 'idempotency-key': key(), 'tollgate-session': session },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/42' },
        });
        expect(viaActions.json().decision.decision).toBe('allow');
        const third = (await post(EVALUATION, inSession(session))).json();
        expect(third).toMatchObject({ decision: false, context: { decision: 'deny', reason_codes: ['LOOKUPS_PER_SESSION'] } });
        // Another session starts afresh.
        expect((await post(EVALUATION, inSession(`s-${key()}`))).json().decision).toBe(true);
      } finally {
        await policy.retire();
      }
    });

    it('decides every evaluation of execute_all (the default), in the order asked', async () => {
      const before = await actionCount(me.agentId);
      const targets = ['crm://customers/a1', 'crm://customers/a2', 'crm://customers/a3', 'crm://customers/a4'];
      const res = await post(EVALUATIONS, {
        subject: { type: 'agent', id: me.uri },
        action: { name: 'invoke' },
        evaluations: targets.map((target) => ({ resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target } } })),
      });
      expect(res.statusCode).toBe(200);
      const answers = res.json().evaluations as Json[];
      expect(answers.map((a) => a.decision)).toEqual([true, true, true, true]);
      expect(await actionCount(me.agentId)).toBe(before + 4);
      for (const [i, a] of answers.entries()) {
        expect((await admin.client.get(api(`/actions/${a.context.action.id}`))).json().target).toBe(targets[i]);
      }
    });
  });

  describe('who may ask', () => {
    it('refuses another subject with 403 in the error envelope and decides nothing', async () => {
      const other = await agentToken(admin.client, 'Another agent');
      const before = await actionCount(me.agentId);
      const subjects = [
        { type: 'agent', id: other.agentId },
        { type: 'agent', id: other.uri },
        { type: 'user', id: me.agentId },
        { type: 'identity', id: me.uri },
      ];
      for (const subject of subjects) {
        const res = await post(EVALUATION, lookup({ subject }));
        expect(res.statusCode, JSON.stringify(subject)).toBe(403);
        expect(res.json().error).toMatchObject({ code: 'forbidden', details: [{ field: 'subject' }] });
        expect(res.json().error.correlation_id).toEqual(expect.any(String));
      }
      // One foreign subject among the evaluations refuses the whole batch, before anything is decided.
      const batch = await post(EVALUATIONS, {
        action: { name: 'invoke' },
        resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'crm://customers/1' } },
        evaluations: [{ subject: { type: 'agent', id: me.agentId } }, { subject: { type: 'agent', id: other.agentId } }],
      });
      expect(batch.statusCode).toBe(403);
      expect(batch.json().error.details).toEqual([{ field: 'evaluations.1.subject', message: expect.any(String) }]);
      expect(await actionCount(me.agentId)).toBe(before);
      expect(await actionCount(other.agentId)).toBe(0);
    });

    it("keeps organisations apart: an agent of another organisation cannot name this one's agent", async () => {
      const otherAdmin = await onboardAdmin(t.app, 'Other Org');
      const otherTools = Object.fromEntries((await otherAdmin.client.get(api('/tools'))).json().items.map((x: { tool_key: string; id: string }) => [x.tool_key, x]));
      const outsider = await agentToken(otherAdmin.client, 'Outsider');
      await bind(otherAdmin.client, outsider.agentId, 'crm.lookup_customer', otherTools['crm.lookup_customer']!.id);
      const before = await actionCount(me.agentId);
      for (const id of [me.agentId, me.uri]) {
        const res = await post(EVALUATION, lookup({ subject: { type: 'agent', id } }), outsider.token);
        expect(res.statusCode).toBe(403);
        expect(res.json().error.code).toBe('forbidden');
      }
      expect(await actionCount(me.agentId)).toBe(before);
      // Its own evaluation is decided in its own organisation, on its own registry.
      const own = (await post(EVALUATION, lookup({ subject: { type: 'agent', id: outsider.uri } }), outsider.token)).json();
      expect(own.decision).toBe(true);
      expect((await admin.client.get(api(`/actions/${own.context.action.id}`))).statusCode).toBe(404);
      expect((await otherAdmin.client.get(api(`/actions/${own.context.action.id}`))).json().agent_id).toBe(outsider.agentId);
    });

    it('answers 401 without the agent token or with an invalid one, and echoes X-Request-ID', async () => {
      const none = await t.app.inject({ method: 'POST', url: EVALUATION, payload: lookup(), headers: { 'x-request-id': 'req-401-a' } });
      expect(none.statusCode).toBe(401);
      expect(none.json().error.code).toEqual(expect.any(String));
      expect(none.headers['x-request-id']).toBe('req-401-a');
      const forged = await post(EVALUATIONS, { evaluations: [lookup()] }, `${me.token.slice(0, -4)}AAAA`);
      expect(forged.statusCode).toBe(401);
      // A person's session is not an agent: the operation is the agent's.
      const person = await admin.client.post(EVALUATION, lookup());
      expect(person.statusCode).toBe(401);
      const ok = await post(EVALUATION, lookup(), me.token, { 'x-request-id': 'bfe9eb29-ab87-4ca3-be83-a1d5d8305716' });
      expect(ok.headers['x-request-id']).toBe('bfe9eb29-ab87-4ca3-be83-a1d5d8305716');
    });

    it("counts evaluations on the agent's gateway budget, shared with POST /actions", async () => {
      // A second API process on the same database with a budget of 3 a minute; the clock stands still.
      const small = await startTestApp({ share: t, clock, env: { RATE_LIMIT_GATEWAY_PER_MINUTE: '3', TOKEN_REVOCATION_CACHE_SECONDS: '0' } });
      try {
        const agent = await agentToken(admin.client, 'Budgeted agent');
        await bind(admin.client, agent.agentId, 'crm.lookup_customer');
        const ask = (body: unknown, url = EVALUATION) =>
          small.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${agent.token}` }, payload: body as object });
        const mine = lookup({ subject: { type: 'agent', id: agent.agentId } });
        expect((await ask(mine)).statusCode).toBe(200);
        const batch = await ask({ ...mine, evaluations: [{}, {}] }, EVALUATIONS);
        expect(batch.json().evaluations.map((e: Json) => e.decision)).toEqual([true, true]);
        const over = await ask(mine);
        expect(over.statusCode).toBe(429);
        expect(over.json().error.code).toBe('rate_limited');
        const action = await small.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${agent.token}`, 'idempotency-key': key() },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/1' },
        });
        expect(action.statusCode).toBe(429);
        const overInBatch = await ask({ ...mine, evaluations: [{}] }, EVALUATIONS);
        expect(overInBatch.json().evaluations).toMatchObject([{ decision: false, context: { error: { status: 429, code: 'rate_limited' } } }]);
      } finally {
        await small.close();
      }
    });
  });

  describe('bad input', () => {
    it('answers 400 bad_request naming the AuthZEN field, as the HTTPS binding asks', async () => {
      const cases: Array<[unknown, string]> = [
        [{ action: { name: 'invoke' }, resource: lookup().resource }, 'subject'],
        [lookup({ action: {} }), 'action.name'],
        [lookup({ action: { name: 123 } }), 'action.name'],
        [lookup({ subject: 'me' }), 'subject'],
        [lookup({ resource: { type: 'tool' } }), 'resource.id'],
        [lookup({ resource: { type: 'route', id: '/todos', properties: { target: 'crm://x' } } }), 'resource.type'],
        [lookup({ resource: { type: 'tool', id: 'crm.lookup_customer' } }), 'resource.properties.target'],
        [lookup({ resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'no-scheme' } } }), 'resource.properties.target'],
        [lookup({ action: { name: 'invoke', properties: { parameters: 'all of them' } } }), 'action.properties.parameters'],
        [lookup({ context: { environment: 'moon' } }), 'context.environment'],
        [lookup({ context: { idempotency_key: 'short' } }), 'context.idempotency_key'],
        [lookup({ context: { justification: 'x'.repeat(2001) } }), 'context.justification'],
        [lookup({ context: { session_id: 'has spaces' } }), 'context.session_id'],
        [lookup({ context: 'now' }), 'context'],
      ];
      const before = await actionCount(me.agentId);
      for (const [body, field] of cases) expectMalformed(await post(EVALUATION, body), field);
      expect(await actionCount(me.agentId)).toBe(before);
    });

    it('answers 400 for a body that is not JSON, nests too deep or holds unstorable text; every other operation keeps its 422', async () => {
      const raw = (payload: string) =>
        t.app.inject({ method: 'POST', url: EVALUATION, headers: { authorization: `Bearer ${me.token}`, 'content-type': 'application/json' }, payload });
      // The certification's 2.4.3 to 2.4.5: a body not sent as application/json, not JSON, or empty: 400.
      for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
        const res = await t.app.inject({ method: 'POST', url: EVALUATION, headers: { authorization: `Bearer ${me.token}`, 'content-type': type }, payload: JSON.stringify(lookup()) });
        expectMalformed(res, 'header.content-type');
      }
      expectMalformed(await raw(''), 'body');
      const notJson = await raw('{"subject": ');
      expect(notJson.statusCode).toBe(400);
      expect(notJson.json().error.code).toBe('bad_request');
      expectMalformed(await raw('[]'), 'body');
      expectMalformed(await raw('null'), 'body');
      expectMalformed(await raw('{"x":'.repeat(70) + '1' + '}'.repeat(70)), 'body');
      expectMalformed(await post(EVALUATION, lookup({ context: { justification: 'nul \u0000 here' } })), 'context.justification');
      // Scoped to the AuthZEN plugin: POST /actions, beside it, still answers 422 validation_failed.
      const actions = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${me.token}`, 'idempotency-key': key() },
        payload: { tool: 'crm.lookup_customer', target: 'no-scheme' },
      });
      expect(actions.statusCode).toBe(422);
      expect(actions.json().error.code).toBe('validation_failed');
    });

    it('validates the batch as a whole, and closes an incomplete evaluation without deciding it', async () => {
      const many = Array.from({ length: 51 }, () => ({}));
      expectMalformed(await post(EVALUATIONS, { ...lookup(), evaluations: many }), 'evaluations');
      expectMalformed(await post(EVALUATIONS, { ...lookup(), evaluations: [{}], options: { evaluations_semantic: 'sometimes' } }), 'options.evaluations_semantic');
      expectMalformed(await post(EVALUATIONS, { ...lookup(), evaluations: {} }), 'evaluations');
      expectMalformed(await post(EVALUATIONS, { evaluations: [] }), 'subject');
      const before = await actionCount(me.agentId);
      const res = await post(EVALUATIONS, {
        subject: { type: 'agent', id: me.agentId },
        action: { name: 'invoke' },
        evaluations: [{ resource: { type: 'tool', id: 'crm.lookup_customer', properties: { target: 'bad' } } }, { resource: { type: 'tool' } }],
      });
      expect(res.statusCode).toBe(200);
      expect(res.json().evaluations).toMatchObject([
        { decision: false, context: { error: { status: 400, code: 'bad_request', details: [{ field: 'evaluations.0.resource.properties.target' }] } } },
        { decision: false, context: { error: { status: 400, details: [{ field: 'evaluations.1.resource.id' }] } } },
      ]);
      expect(await actionCount(me.agentId)).toBe(before);
    });

    it(`takes up to 50 evaluations in one batch`, async () => {
      const before = await actionCount(me.agentId);
      const res = await post(EVALUATIONS, { ...lookup(), evaluations: Array.from({ length: 50 }, () => ({})) });
      expect(res.statusCode).toBe(200);
      expect(res.json().evaluations).toHaveLength(50);
      expect(await actionCount(me.agentId)).toBe(before + 50);
    });
  });

  describe('integration requests (docs/integrations.md): exactly what each configured PEP sends', () => {
    const raw = (url: string, body: string, headers: Record<string, string>) =>
      t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload: body });

    it("the gRPC ext_authz adapter's request: the agent's header, X-Request-ID as idempotency key, OK only for decision true", async () => {
      const requestId = crypto.randomUUID();
      const body = (tool: string, target: string) =>
        JSON.stringify({
          subject: { type: 'agent', id: me.uri },
          action: { name: 'invoke', properties: { parameters: { customer_id: '42' } } },
          resource: { type: 'tool', id: tool, properties: { target } },
          context: { idempotency_key: requestId },
        });
      const headers = { authorization: `Bearer ${me.token}`, 'x-request-id': requestId };
      const allowed = await raw(EVALUATION, body('crm.lookup_customer', 'mcp://crm/lookup_customer'), headers);
      expect(allowed.statusCode).toBe(200);
      expect(allowed.headers['x-request-id']).toBe(requestId);
      expect(allowed.json()).toMatchObject({ decision: true, context: { idempotency_key: requestId, replayed: false } });
      // Envoy retries a check that timed out: the same x-request-id replays the decision, no second action.
      const before = await actionCount(me.agentId);
      const retried = await raw(EVALUATION, body('crm.lookup_customer', 'mcp://crm/lookup_customer'), headers);
      expect(retried.json()).toMatchObject({ decision: true, context: { replayed: true, action: { id: allowed.json().context.action.id } } });
      expect(await actionCount(me.agentId)).toBe(before);
      // A denial is 200 with decision false: the adapter must answer PERMISSION_DENIED on the body, not the status.
      const otherId = crypto.randomUUID();
      const denied = await raw(
        EVALUATION,
        body('email.send_message', 'mailto://x@example.com').replace(requestId, otherId),
        { ...headers, 'x-request-id': otherId },
      );
      expect(denied.statusCode).toBe(200);
      expect(denied.json()).toMatchObject({ decision: false, context: { reason_codes: ['PERMISSION_NOT_GRANTED'] } });
    });

    it("Authorino's metadata call: the body its expression builds; decision is the boolean its pattern reads", async () => {
      // The AuthConfig's body expression, with the x-agent-uri header the agent sends.
      const body = (agentUri: string) =>
        '{"subject":{"type":"agent","id":"' +
        agentUri +
        '"},' +
        '"action":{"name":"invoke"},' +
        '"resource":{"type":"tool","id":"crm.lookup_customer","properties":{"target":"crm://customers"}}}';
      const allowed = await raw(EVALUATION, body(me.uri), { authorization: `Bearer ${me.token}` });
      expect(allowed.statusCode).toBe(200);
      expect(allowed.json().decision).toBe(true);
      const unbound = await agentToken(admin.client, 'Unbound agent');
      const denied = await raw(EVALUATION, body(unbound.uri), { authorization: `Bearer ${unbound.token}` });
      expect(denied.json().decision).toBe(false);
      // A spoofed x-agent-uri, or one that breaks the JSON: no decision member, so the pattern denies.
      const spoofed = await raw(EVALUATION, body(me.uri), { authorization: `Bearer ${unbound.token}` });
      expect(spoofed.statusCode).toBe(403);
      expect(spoofed.json()).not.toHaveProperty('decision');
      const broken = await raw(EVALUATION, body('agent://x"}}'), { authorization: `Bearer ${me.token}` });
      expect(broken.statusCode).toBeGreaterThanOrEqual(400);
      expect(broken.json()).not.toHaveProperty('decision');
    });
  });

  describe('PDP metadata', () => {
    it('publishes /.well-known/authzen-configuration with absolute endpoint URLs that answer', async () => {
      const res = await t.app.inject({ url: '/.well-known/authzen-configuration', headers: { host: 'pdp.example.com:8443' } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const meta = res.json();
      expect(meta).toEqual({
        policy_decision_point: 'http://pdp.example.com:8443',
        access_evaluation_endpoint: 'http://pdp.example.com:8443/api/v1/access/v1/evaluation',
        access_evaluations_endpoint: 'http://pdp.example.com:8443/api/v1/access/v1/evaluations',
      });
      // A PEP posts where the metadata says: those paths are the routes.
      const single = await post(new URL(meta.access_evaluation_endpoint).pathname, lookup());
      expect(single.json().decision).toBe(true);
      const batch = await post(new URL(meta.access_evaluations_endpoint).pathname, { ...lookup(), evaluations: [{}] });
      expect(batch.json().evaluations[0].decision).toBe(true);
    });
  });
});
