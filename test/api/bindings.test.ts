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
});
