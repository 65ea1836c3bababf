import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

describe('delegations and permission bindings', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let agentId: string;
  let paymentTool: { id: string };

  beforeAll(async () => {
    t = await startTestApp({ clock });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    agentId = (await admin.client.post(api('/agents'), { name: 'Payments agent' })).json().id;
    const tools = (await admin.client.get(api('/tools'))).json().items;
    paymentTool = tools.find((x: { tool_key: string }) => x.tool_key === 'payments.create_payment');
  });
  afterAll(async () => t.close());

  describe('POST /agents/{id}/delegations', () => {
    it('records who the agent may act for, with scopes and an optional expiry', async () => {
      const res = await admin.client.post(api(`/agents/${agentId}/delegations`), {
        principal_ref: 'user:ada@example.com',
        display_name: 'Ada',
        scopes: ['payments:create'],
        expires_at: '2027-01-01T00:00:00Z',
      });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({
        agent_id: agentId,
        principal_type: 'user',
        scopes: ['payments:create'],
        expires_at: '2027-01-01T00:00:00.000Z',
      });
      const audit = (await admin.client.get(api(`/audit?action=agent.delegation_added&target_id=${agentId}`))).json().items;
      expect(audit).toHaveLength(1);
    });

    it.each([
      ['principal_ref', { principal_ref: 'ab' }],
      ['principal_ref', { principal_ref: 'x'.repeat(321) }],
      ['display_name', { display_name: '' }],
      ['principal_type', { principal_type: 'robot' }],
      ['scopes', { scopes: undefined }],
      ['expires_at', { expires_at: 'tomorrow' }],
      ['expires_at', { expires_at: '2020-01-01T00:00:00Z' }],
      ['expires_at', { expires_at: '9999-12-31T23:59:59-23:59' }],
    ])('answers 422 naming %s', async (field, over) => {
      const body = { principal_ref: 'user:a@example.com', display_name: 'A', scopes: [], ...over };
      expectValidation(await admin.client.post(api(`/agents/${agentId}/delegations`), body), field);
    });

    it("answers 404 for another organisation's agent", async () => {
      const b = await onboardAdmin(t.app);
      const res = await b.client.post(api(`/agents/${agentId}/delegations`), { principal_ref: 'user:x', display_name: 'X', scopes: [] });
      expect(res.statusCode).toBe(404);
    });
  });

  describe('POST /agents/{id}/permissions', () => {
    it('binds actions on a target with constraints, an expiry and one identity', async () => {
      const identity = (await admin.client.post(api(`/agents/${agentId}/identities`))).json();
      const res = await admin.client.post(api(`/agents/${agentId}/permissions`), {
        target_kind: 'tool',
        target_id: paymentTool.id,
        actions: ['invoke', 'invoke'],
        constraints: { max_amount: 500, currency: 'EUR', allowed_targets: ['payee://suppliers/*'] },
        expires_at: '2027-06-30T00:00:00Z',
        identity_id: identity.id,
      });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({
        target_kind: 'tool',
        target_id: paymentTool.id,
        actions: ['invoke'],
        delegated: false,
        constraints: { max_amount: 500, currency: 'EUR', allowed_targets: ['payee://suppliers/*'] },
        identity_id: identity.id,
      });
    });

    it.each([
      ['constraints', { constraints: { max_amount: 5, max_amuont: 10 } }],
      ['constraints.max_amount', { constraints: { max_amount: -1 } }],
      ['constraints.currency', { constraints: { currency: 'euro' } }],
      ['constraints.allowed_targets', { constraints: { allowed_targets: [] } }],
      ['actions', { actions: [] }],
      ['target_kind', { target_kind: 'planet' }],
      ['target_id', { target_id: 'nope' }],
      ['expires_at', { expires_at: '2001-01-01T00:00:00Z' }],
      ['expires_at', { expires_at: '9999-12-31T23:59:59-23:59' }],
    ])('answers 422 naming %s', async (field, over) => {
      const body = { target_kind: 'tool', target_id: paymentTool.id, actions: ['invoke'], ...over };
      expectValidation(await admin.client.post(api(`/agents/${agentId}/permissions`), body), field);
    });

    it("refuses a target or identity that is not the organisation's or the agent's", async () => {
      const b = await onboardAdmin(t.app);
      const foreignTool = (await b.client.get(api('/tools'))).json().items[0];
      const res = await admin.client.post(api(`/agents/${agentId}/permissions`), {
        target_kind: 'tool',
        target_id: foreignTool.id,
        actions: ['invoke'],
      });
      expect(res.statusCode).toBe(404);
      // A tool's id named as another kind of target does not exist as that kind.
      const wrongKind = await admin.client.post(api(`/agents/${agentId}/permissions`), {
        target_kind: 'data_resource',
        target_id: paymentTool.id,
        actions: ['read'],
      });
      expect(wrongKind.statusCode).toBe(404);
      const other = (await admin.client.post(api('/agents'), { name: 'Other agent' })).json();
      const otherIdentity = (await admin.client.post(api(`/agents/${other.id}/identities`))).json();
      expectValidation(
        await admin.client.post(api(`/agents/${agentId}/permissions`), {
          target_kind: 'tool',
          target_id: paymentTool.id,
          actions: ['invoke'],
          identity_id: otherIdentity.id,
        }),
        'identity_id',
      );
    });

    it('binds API and data resources and MCP servers as targets', async () => {
      const apiRes = (await admin.client.post(api('/resources/apis'), { name: 'Ledger API', system: 'ledger', base_url: 'https://ledger.example.com' })).json();
      const data = (await admin.client.post(api('/resources/data'), { name: 'Customers', system: 'crm' })).json();
      const mcp = (await admin.client.post(api('/mcp-servers'), { name: 'Files', endpoint: 'https://mcp.example.com/files' })).json();
      for (const [kind, id] of [['api_resource', apiRes.id], ['data_resource', data.id], ['mcp_server', mcp.id]]) {
        const res = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: kind, target_id: id, actions: ['read'] });
        expect(res.statusCode, kind).toBe(201);
      }
    });
  });

  describe('DELETE /agents/{id}/permissions/{binding_id}', () => {
    it('removes a binding, audits it with the reason, and answers 404 afterwards and across organisations', async () => {
      const binding = (
        await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: paymentTool.id, actions: ['invoke'] })
      ).json();
      const b = await onboardAdmin(t.app);
      expect((await b.client.delete(api(`/agents/${agentId}/permissions/${binding.id}`))).statusCode).toBe(404);
      const res = await admin.client.delete(api(`/agents/${agentId}/permissions/${binding.id}?reason=${encodeURIComponent('no longer pays')}`));
      expect(res.statusCode).toBe(204);
      expect((await admin.client.delete(api(`/agents/${agentId}/permissions/${binding.id}`))).statusCode).toBe(404);
      const audit = (await admin.client.get(api(`/audit?action=agent.permission_removed&target_id=${agentId}`))).json().items;
      expect(audit[0].details).toMatchObject({ reason: 'no longer pays', binding: { id: binding.id } });
      expectValidation(await admin.client.delete(api(`/agents/${agentId}/permissions/x`)), 'path.binding_id');
      expectValidation(
        await admin.client.delete(api(`/agents/${agentId}/permissions/${binding.id}?reason=${'x'.repeat(2001)}`)),
        'query.reason',
      );
    });
  });

  describe('GET /agents/{id}/permissions and GET /agents/{id}/delegations', () => {
    it("lists the agent's bindings and delegations oldest first, expired ones included, and nothing of other agents", async () => {
      const agent = (await admin.client.post(api('/agents'), { name: 'Listed agent' })).json();
      const other = (await admin.client.post(api('/agents'), { name: 'Unlisted agent' })).json();
      const soon = new Date(clock.now().getTime() + 60_000).toISOString();
      const bindings = [];
      for (const body of [
        { target_kind: 'tool', target_id: paymentTool.id, actions: ['invoke'], constraints: { max_amount: 10 }, expires_at: soon },
        { target_kind: 'tool', target_id: paymentTool.id, actions: ['read'] },
      ]) {
        bindings.push((await admin.client.post(api(`/agents/${agent.id}/permissions`), body)).json());
        clock.advance(1);
      }
      const delegations = [];
      for (const body of [
        { principal_ref: 'user:first@example.com', display_name: 'First', scopes: ['a'], expires_at: soon },
        { principal_ref: 'group:second', display_name: 'Second', principal_type: 'group', scopes: [] },
      ]) {
        delegations.push((await admin.client.post(api(`/agents/${agent.id}/delegations`), body)).json());
        clock.advance(1);
      }
      await admin.client.post(api(`/agents/${other.id}/permissions`), { target_kind: 'tool', target_id: paymentTool.id, actions: ['invoke'] });
      await admin.client.post(api(`/agents/${other.id}/delegations`), { principal_ref: 'user:other@example.com', display_name: 'O', scopes: [] });

      clock.advance(120);
      const perms = await admin.client.get(api(`/agents/${agent.id}/permissions`));
      expect(perms.statusCode).toBe(200);
      // The same shape POST answers, expired binding first (it is the older).
      expect(perms.json()).toEqual({ items: bindings });
      expect(perms.json().items[0]).toMatchObject({ expires_at: soon, constraints: { max_amount: 10 } });
      const dels = await admin.client.get(api(`/agents/${agent.id}/delegations`));
      expect(dels.statusCode).toBe(200);
      expect(dels.json()).toEqual({ items: delegations });

      const empty = (await admin.client.post(api('/agents'), { name: 'Bare agent' })).json();
      expect((await admin.client.get(api(`/agents/${empty.id}/permissions`))).json()).toEqual({ items: [] });
      expect((await admin.client.get(api(`/agents/${empty.id}/delegations`))).json()).toEqual({ items: [] });
    });

    it("answers 404 for another organisation's agent and 422 for a malformed id", async () => {
      const b = await onboardAdmin(t.app);
      for (const path of ['permissions', 'delegations']) {
        const res = await b.client.get(api(`/agents/${agentId}/${path}`));
        expect(res.statusCode, path).toBe(404);
        expect(res.json().error.code).toBe('not_found');
        expectValidation(await admin.client.get(api(`/agents/nope/${path}`)), 'path.agent_id');
      }
    });
  });

  describe('DELETE /agents/{id}/delegations/{delegation_id}', () => {
    it('removes a delegation, audits it with the reason, and answers 404 afterwards, for another agent and across organisations', async () => {
      const delegation = (
        await admin.client.post(api(`/agents/${agentId}/delegations`), { principal_ref: 'user:gone@example.com', display_name: 'Gone', scopes: ['x'] })
      ).json();
      const b = await onboardAdmin(t.app);
      expect((await b.client.delete(api(`/agents/${agentId}/delegations/${delegation.id}`))).statusCode).toBe(404);
      const otherAgent = (await admin.client.post(api('/agents'), { name: 'Not the delegate' })).json();
      expect((await admin.client.delete(api(`/agents/${otherAgent.id}/delegations/${delegation.id}`))).statusCode).toBe(404);

      const res = await admin.client.delete(api(`/agents/${agentId}/delegations/${delegation.id}?reason=${encodeURIComponent('left the company')}`));
      expect(res.statusCode).toBe(204);
      expect(res.body).toBe('');
      expect((await admin.client.get(api(`/agents/${agentId}/delegations`))).json().items.map((d: { id: string }) => d.id)).not.toContain(delegation.id);
      expect((await admin.client.delete(api(`/agents/${agentId}/delegations/${delegation.id}`))).statusCode).toBe(404);
      const audit = (await admin.client.get(api(`/audit?action=agent.delegation_removed&target_id=${agentId}`))).json().items;
      expect(audit).toHaveLength(1);
      expect(audit[0].details).toMatchObject({
        reason: 'left the company',
        delegation: { id: delegation.id, principal_ref: 'user:gone@example.com', scopes: ['x'] },
      });
      expectValidation(await admin.client.delete(api(`/agents/${agentId}/delegations/x`)), 'path.delegation_id');
    });

    it('takes effect on the next decision: the gateway no longer lets the agent act for that principal', async () => {
      const agent = (await admin.client.post(api('/agents'), { name: 'Acting agent' })).json();
      const lookupTool = (await admin.client.get(api('/tools'))).json().items.find((x: { tool_key: string }) => x.tool_key === 'crm.lookup_customer');
      await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: lookupTool.id, actions: ['invoke'] });
      const delegation = (
        await admin.client.post(api(`/agents/${agent.id}/delegations`), { principal_ref: 'user:grace@example.com', display_name: 'Grace', scopes: [] })
      ).json();
      const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
      const token = (
        await t.app.inject({
          method: 'POST',
          url: api('/identities/token'),
          payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
        })
      ).json().access_token;
      let n = 0;
      const submit = () =>
        t.app.inject({
          method: 'POST',
          url: api('/actions'),
          headers: { authorization: `Bearer ${token}`, 'idempotency-key': `delegation-${Date.now()}-${++n}` },
          payload: { tool: 'crm.lookup_customer', target: 'crm://customers/7', parameters: { customer_id: '7' }, on_behalf_of: 'user:grace@example.com' },
        });
      expect((await submit()).json().decision).toMatchObject({ decision: 'allow' });
      expect((await admin.client.delete(api(`/agents/${agent.id}/delegations/${delegation.id}`))).statusCode).toBe(204);
      const after = (await submit()).json().decision;
      expect(after.decision).toBe('deny');
      expect(after.reason_codes).toContain('DELEGATION_MISSING');
    });
  });
});
