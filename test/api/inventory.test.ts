import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, expectValidation, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

describe('inventory', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;
  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app);
    other = await onboardAdmin(t.app);
  });
  afterAll(async () => t.close());

  describe('built-in sample tools', () => {
    it('every new organisation starts with a payment, a read-only lookup, a write and a destructive tool', async () => {
      const tools = (await admin.client.get(api('/tools'))).json().items;
      const byKey = Object.fromEntries(tools.map((x: { tool_key: string }) => [x.tool_key, x]));
      expect(byKey['payments.create_payment']).toMatchObject({ privilege_class: 'financial', approval_class: 'single', builtin: true, blocked: false });
      expect(byKey['crm.lookup_customer']).toMatchObject({ privilege_class: 'read', builtin: true });
      expect(byKey['email.send_message']).toMatchObject({ privilege_class: 'write' });
      expect(byKey['storage.delete_object']).toMatchObject({ privilege_class: 'destructive' });
      const theirs = (await other.client.get(api('/tools'))).json().items;
      expect(theirs.map((x: { id: string }) => x.id)).not.toContain(byKey['crm.lookup_customer'].id);
    });
  });

  describe('MCP servers', () => {
    it('registers a server as unknown, lists it, and changes its trust state with a reason, audited', async () => {
      const res = await admin.client.post(api('/mcp-servers'), { name: 'Docs server', endpoint: 'https://mcp.example.com/docs' });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ trust_state: 'unknown', transport: 'streamable_http', auth_type: 'oauth', publisher: null, tool_count: 0 });
      const dup = await admin.client.post(api('/mcp-servers'), { name: 'Again', endpoint: 'https://mcp.example.com/docs' });
      expect(dup.json().error).toMatchObject({ code: 'conflict', details: { field: 'endpoint' } });

      const security = await addMember(t.app, admin.client, ['security_admin']);
      const patched = await security.client.patch(api(`/mcp-servers/${res.json().id}`), { trust_state: 'approved', reason: 'reviewed the publisher' });
      expect(patched.json()).toMatchObject({ trust_state: 'approved', version: 2 });
      const audit = (await admin.client.get(api(`/audit?action=mcp_server.trust_changed&target_id=${res.json().id}`))).json().items;
      expect(audit[0].details).toMatchObject({ reason: 'reviewed the publisher', trust_state: { from: 'unknown', to: 'approved' } });

      const developer = await addMember(t.app, admin.client, ['agent_developer']);
      const denied = await developer.client.patch(api(`/mcp-servers/${res.json().id}`), { trust_state: 'approved', reason: 'trust me' });
      expect(denied.json().error.details).toEqual({ required_permission: 'inventory:control' });
      expect((await other.client.patch(api(`/mcp-servers/${res.json().id}`), { trust_state: 'quarantined', reason: 'not mine' })).statusCode).toBe(404);
      expect((await other.client.get(api('/mcp-servers'))).json().items).toEqual([]);
    });

    it.each([
      ['name', { name: 'x' }],
      ['endpoint', { endpoint: 'short' }],
      ['endpoint', { endpoint: 'ftp://files.example.com/x' }],
      ['transport', { transport: 'carrier-pigeon' }],
      ['auth_type', { auth_type: 'magic' }],
    ])('POST answers 422 naming %s', async (field, over) => {
      expectValidation(await admin.client.post(api('/mcp-servers'), { name: 'Valid', endpoint: 'https://mcp.example.com/v', ...over }), field);
    });

    // Endpoints Tollgate's connectors would call from inside the deployment's network.
    it.each([
      ['http://127.0.0.1:8080/mcp', 'loopback'],
      ['https://localhost/mcp', 'loopback'],
      ['https://tools.localhost/mcp', 'loopback'],
      ['http://2130706433/mcp', 'loopback'],
      ['http://0x7f.1/mcp', 'loopback'],
      ['http://[::1]/mcp', 'loopback'],
      ['http://[::ffff:127.0.0.1]/mcp', 'loopback'],
      ['http://10.1.2.3/mcp', 'private-network'],
      ['http://172.20.0.1/mcp', 'private-network'],
      ['http://192.168.1.1/mcp', 'private-network'],
      ['http://[fd00::1]/mcp', 'private-network'],
      ['http://169.254.169.254/latest/meta-data/', 'metadata'],
      ['http://metadata.google.internal/computeMetadata/v1/', 'metadata'],
      ['http://[fd00:ec2::254]/', 'metadata'],
      ['http://169.254.1.1/mcp', 'link-local'],
      ['http://[fe80::1]/mcp', 'link-local'],
      ['http://0.0.0.0/mcp', 'unspecified'],
    ])('POST refuses the endpoint %s (%s) with 422 naming endpoint, and registers nothing', async (endpoint, kind) => {
      const res = await admin.client.post(api('/mcp-servers'), { name: 'Inside', endpoint });
      expectValidation(res, 'endpoint');
      expect(res.json().error.details[0].message).toContain(kind);
      const listed = (await admin.client.get(api('/mcp-servers'))).json().items as { endpoint: string }[];
      expect(listed.map((s) => s.endpoint)).not.toContain(endpoint);
    });

    it('accepts public and stdio endpoints', async () => {
      for (const endpoint of ['https://8.8.8.8/mcp', 'https://127.0.0.1.example.com/mcp', 'stdio://npx/mcp-server-files']) {
        const res = await admin.client.post(api('/mcp-servers'), { name: `Public ${endpoint.length}`, endpoint });
        expect(res.statusCode, res.body).toBe(201);
      }
    });

    it.each([
      ['trust_state', { trust_state: 'blessed', reason: 'because' }],
      ['reason', { trust_state: 'approved', reason: 'ok' }],
      ['reason', { trust_state: 'approved', reason: 'x'.repeat(2001) }],
    ])('PATCH answers 422 naming %s', async (field, body) => {
      const s = (await admin.client.post(api('/mcp-servers'), { name: 'Server', endpoint: `https://mcp.example.com/${Math.random()}` })).json();
      expectValidation(await admin.client.patch(api(`/mcp-servers/${s.id}`), body), field);
    });
  });

  describe('models', () => {
    it('registers, approves and caps a model', async () => {
      const res = await admin.client.post(api('/models'), { provider: 'vendor-a', model_name: 'large', model_version: '2026-10' });
      expect(res.json()).toMatchObject({ hosting: 'saas', data_policy: 'unknown', approved: false, max_data_classification: null });
      const patched = await admin.client.patch(api(`/models/${res.json().id}`), { approved: true, max_data_classification: 'confidential', data_policy: 'zero_retention' });
      expect(patched.json()).toMatchObject({ approved: true, max_data_classification: 'confidential', data_policy: 'zero_retention', version: 2 });
      expect((await admin.client.get(api('/models'))).json().items.map((m: { id: string }) => m.id)).toContain(res.json().id);
      expect((await other.client.patch(api(`/models/${res.json().id}`), { approved: false })).statusCode).toBe(404);
      expectValidation(await admin.client.post(api('/models'), { provider: 'v', model_name: 'm' }), 'provider');
      expectValidation(await admin.client.post(api('/models'), { provider: 'vendor', model_name: '' }), 'model_name');
      expectValidation(await admin.client.post(api('/models'), { provider: 'vendor', model_name: 'm', hosting: 'cloud' }), 'hosting');
      expectValidation(await admin.client.patch(api(`/models/${res.json().id}`), { max_data_classification: 'top' }), 'max_data_classification');
    });
  });

  describe('resources and credential references', () => {
    it('registers API and data resources, listed together', async () => {
      const a = await admin.client.post(api('/resources/apis'), { name: 'Billing API', system: 'billing', base_url: 'https://billing.example.com/v1' });
      expect(a.json()).toMatchObject({ resource_type: 'api', auth_type: 'oauth_client_credentials', criticality: 'medium' });
      const d = await admin.client.post(api('/resources/data'), { name: 'Orders', system: 'erp', contains_personal_data: true, region: 'eu-west' });
      expect(d.json()).toMatchObject({ resource_type: 'data', kind: 'database', classification: 'internal', contains_personal_data: true });
      const ids = (await admin.client.get(api('/resources'))).json().items.map((r: { id: string }) => r.id);
      expect(ids).toEqual(expect.arrayContaining([a.json().id, d.json().id]));
      expect((await other.client.get(api('/resources'))).json().items).toEqual([]);
      expectValidation(await admin.client.post(api('/resources/apis'), { name: 'B', system: 'billing', base_url: 'https://b.example.com' }), 'name');
      expectValidation(await admin.client.post(api('/resources/apis'), { name: 'Bill', system: 'billing', base_url: 'not a url' }), 'base_url');
      for (const base_url of ['http://127.0.0.1:9000/v1', 'http://10.0.0.8/v1', 'http://169.254.169.254/', 'http://017700000001/']) {
        expectValidation(await admin.client.post(api('/resources/apis'), { name: 'Inside', system: 'billing', base_url }), 'base_url');
      }
      expectValidation(await admin.client.post(api('/resources/data'), { name: 'Data', system: 'x' }), 'system');
      expectValidation(await admin.client.post(api('/resources/data'), { name: 'Data', system: 'xx', kind: 'spreadsheet' }), 'kind');
    });

    it('keeps a reference to a secret, never the secret, and revokes or rotates it with confirmation', async () => {
      const res = await admin.client.post(api('/resources/credentials'), {
        name: 'Payments key',
        provider: 'vault',
        secret_path: 'secret/data/payments/provider-key',
        rotation_interval_days: 90,
      });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ credential_type: 'api_key', scope: '', shared: false, status: 'active', last_rotated_at: null });
      for (const secret of ['AKIAABCDEFGHIJKLMNOP', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc', 'ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789', 'Zx8vQ2mN7pL4kR9sT1wY6uB3cF5hJ0gD']) {
        expectValidation(await admin.client.post(api('/resources/credentials'), { name: 'Pasted', provider: 'env', secret_path: secret }), 'secret_path');
      }
      expectValidation(
        await admin.client.post(api('/resources/credentials'), { name: 'K', provider: 'vault', secret_path: 'a', rotation_interval_days: 731 }),
        'name',
      );
      expectValidation(
        await admin.client.post(api('/resources/credentials'), { name: 'Key', provider: 'vault', secret_path: 'a/b', rotation_interval_days: 0 }),
        'rotation_interval_days',
      );
      expectValidation(await admin.client.post(api('/resources/credentials'), { name: 'Key', provider: 'safe', secret_path: 'a/b' }), 'provider');

      const id = res.json().id;
      const unconfirmed = await admin.client.post(api(`/resources/credentials/${id}/action`), { reason: 'rotation day', action: 'rotate' });
      expect(unconfirmed.json().error.code).toBe('confirmation_required');
      const rotated = await admin.client.post(api(`/resources/credentials/${id}/action`), { reason: 'rotation day', action: 'rotate', confirm: true });
      expect(rotated.json()).toMatchObject({ status: 'active', last_rotated_at: expect.any(String) });
      const revoked = await admin.client.post(api(`/resources/credentials/${id}/action`), { reason: 'leaked', action: 'revoke', confirm: true });
      expect(revoked.json().status).toBe('revoked');
      expect((await admin.client.post(api(`/resources/credentials/${id}/action`), { reason: 'again', action: 'rotate', confirm: true })).statusCode).toBe(409);
      expect((await other.client.post(api(`/resources/credentials/${id}/action`), { reason: 'x x x', action: 'revoke', confirm: true })).statusCode).toBe(404);
      expectValidation(await admin.client.post(api(`/resources/credentials/${id}/action`), { reason: 'xxx', action: 'burn', confirm: true }), 'action');
      const audit = (await admin.client.get(api(`/audit?target_id=${id}`))).json().items.map((e: { action: string }) => e.action);
      expect(audit).toEqual(['credential.revoke', 'credential.rotate', 'credential.created']);

      const developer = await addMember(t.app, admin.client, ['agent_developer']);
      const denied = await developer.client.post(api('/resources/credentials'), { name: 'Key', provider: 'vault', secret_path: 'a/b' });
      expect(denied.json().error.details).toEqual({ required_permission: 'integration:manage' });
    });
  });

  describe('tools', () => {
    it('registers a tool with every field, filters, reclassifies, rate-limits and blocks it', async () => {
      const server = (await admin.client.post(api('/mcp-servers'), { name: 'Files', endpoint: 'https://mcp.example.com/files-tools' })).json();
      const cred = (await admin.client.post(api('/resources/credentials'), { name: 'Files key', provider: 'vault', secret_path: 'kv/files' })).json();
      const data = (await admin.client.post(api('/resources/data'), { name: 'Files store', system: 'objects', kind: 'bucket' })).json();
      const res = await admin.client.post(api('/tools'), {
        tool_key: 'files.read_file',
        name: 'Read file',
        description: 'Reads a file',
        mcp_server_id: server.id,
        data_resource_id: data.id,
        operations: ['invoke'],
        privilege_class: 'read',
        approval_class: 'none',
        idempotent: true,
        input_schema: { type: 'object', properties: { path: { type: 'string' } } },
        credential_ref_id: cred.id,
      });
      expect(res.statusCode).toBe(201);
      const tool = res.json();
      expect(tool).toMatchObject({ mcp_server_id: server.id, data_resource_id: data.id, credential_ref_id: cred.id, builtin: false, rate_limit_per_minute: null });
      expect((await admin.client.post(api('/tools'), { tool_key: 'files.read_file', name: 'Dup' })).json().error).toMatchObject({
        code: 'conflict',
        details: { field: 'tool_key' },
      });

      const byServer = (await admin.client.get(api(`/tools?mcp_server_id=${server.id}`))).json().items;
      expect(byServer.map((x: { id: string }) => x.id)).toEqual([tool.id]);
      const financial = (await admin.client.get(api('/tools?privilege_class=financial'))).json().items;
      expect(financial.map((x: { tool_key: string }) => x.tool_key)).toEqual(['payments.create_payment']);
      expect((await admin.client.get(api('/mcp-servers'))).json().items.find((s: { id: string }) => s.id === server.id).tool_count).toBe(1);

      const patched = await admin.client.patch(api(`/tools/${tool.id}`), { privilege_class: 'destructive', approval_class: 'dual', rate_limit_per_minute: 10000 });
      expect(patched.json()).toMatchObject({ privilege_class: 'destructive', approval_class: 'dual', rate_limit_per_minute: 10000, version: 2 });
      for (const rate of [0, 10001]) expectValidation(await admin.client.patch(api(`/tools/${tool.id}`), { rate_limit_per_minute: rate }), 'rate_limit_per_minute');

      const unconfirmed = await admin.client.post(api(`/tools/${tool.id}/block`), { reason: 'suspicious', blocked: true });
      expect(unconfirmed.json().error.code).toBe('confirmation_required');
      const blocked = await admin.client.post(api(`/tools/${tool.id}/block`), { reason: 'suspicious', blocked: true, confirm: true });
      expect(blocked.json().blocked).toBe(true);
      const unblocked = await admin.client.post(api(`/tools/${tool.id}/block`), { reason: 'cleared', blocked: false, confirm: true });
      expect(unblocked.json().blocked).toBe(false);
      const audit = (await admin.client.get(api(`/audit?target_id=${tool.id}`))).json().items.map((e: { action: string }) => e.action);
      expect(audit).toEqual(['tool.unblocked', 'tool.blocked', 'tool.updated', 'tool.created']);
      expect((await other.client.post(api(`/tools/${tool.id}/block`), { reason: 'x x x', blocked: true, confirm: true })).statusCode).toBe(404);
      expect((await other.client.patch(api(`/tools/${tool.id}`), { privilege_class: 'read' })).statusCode).toBe(404);
    });

    it.each([
      ['tool_key', { tool_key: 'Has Spaces' }],
      ['tool_key', { tool_key: 'x'.repeat(201) }],
      ['name', { name: 'x' }],
      ['description', { description: 'x'.repeat(4001) }],
      ['privilege_class', { privilege_class: 'god' }],
      ['approval_class', { approval_class: 'triple' }],
      ['idempotent', { idempotent: 'yes' }],
      ['mcp_server_id', { mcp_server_id: '00000000-0000-4000-8000-000000000000' }],
      ['credential_ref_id', { credential_ref_id: '00000000-0000-4000-8000-000000000000' }],
    ])('POST answers 422 naming %s', async (field, over) => {
      expectValidation(await admin.client.post(api('/tools'), { tool_key: `valid.${Math.random().toString(36).slice(2)}`, name: 'Valid', ...over }), field);
    });

    it("refuses references to another organisation's records", async () => {
      const theirs = (await other.client.post(api('/mcp-servers'), { name: 'Theirs', endpoint: 'https://mcp.example.com/theirs' })).json();
      expectValidation(await admin.client.post(api('/tools'), { tool_key: 'x.y', name: 'XY', mcp_server_id: theirs.id }), 'mcp_server_id');
    });
  });

  describe('ALLOW_PRIVATE_ENDPOINTS (development)', () => {
    it('lets loopback, private and metadata endpoints be registered, as MCP servers running beside Tollgate are', async () => {
      const dev = await startTestApp({ share: t, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', ALLOW_PRIVATE_ENDPOINTS: 'true' } });
      try {
        const a = await onboardAdmin(dev.app);
        for (const endpoint of ['http://127.0.0.1:8080/mcp', 'http://localhost:3001/mcp', 'http://10.0.0.5/mcp', 'http://169.254.169.254/']) {
          expect((await a.client.post(api('/mcp-servers'), { name: `Beside ${endpoint.length}`, endpoint })).statusCode).toBe(201);
        }
        expect((await a.client.post(api('/resources/apis'), { name: 'Local API', system: 'dev', base_url: 'http://127.0.0.1:9000' })).statusCode).toBe(201);
      } finally {
        await dev.close();
      }
    });
  });
});
