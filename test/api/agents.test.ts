import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, expectValidation, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

describe('agents', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  describe('POST /agents', () => {
    it('registers an agent with the spec defaults and derives its slug from the name', async () => {
      const a = await onboardAdmin(t.app);
      const res = await a.client.post(api('/agents'), { name: 'Invoice Bot: Ünïcode Edition!' });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({
        slug: 'invoice-bot-unicode-edition',
        agent_uri: `agent://${a.tenant.slug}/invoice-bot-unicode-edition`,
        description: '',
        purpose: '',
        framework: 'custom',
        environment: 'development',
        business_unit: null,
        criticality: 'medium',
        data_classification: 'internal',
        internet_exposure: 'none',
        code_execution: 'none',
        persistent_memory: 'none',
        human_approval_coverage: 'none',
        gateway_enforced: true,
        tags: [],
        owners: [],
        status: 'active',
        gateway_access: true,
        source: 'manual',
        risk_band: null,
        version: 1,
      });
      const again = await a.client.post(api('/agents'), { name: 'Invoice Bot: Unicode Edition' });
      expect(again.json().slug).toBe('invoice-bot-unicode-edition-2');
      const audit = (await a.client.get(api(`/audit?action=agent.created&target_id=${res.json().id}`))).json().items;
      expect(audit).toHaveLength(1);
    });

    it('keeps slugs unique per organisation: a taken one is a conflict, another organisation may reuse it', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      expect((await a.client.post(api('/agents'), { name: 'Pay', slug: 'payer' })).statusCode).toBe(201);
      const dup = await a.client.post(api('/agents'), { name: 'Pay again', slug: 'payer' });
      expect(dup.statusCode).toBe(409);
      expect(dup.json().error).toMatchObject({ code: 'conflict', details: { field: 'slug' } });
      expect((await b.client.post(api('/agents'), { name: 'Pay', slug: 'payer' })).statusCode).toBe(201);
    });

    it.each([
      ['name', { name: 'A' }],
      ['name', { name: 'x'.repeat(201) }],
      ['slug', { slug: 'x'.repeat(101) }],
      ['slug', { slug: 'Bad Slug' }],
      ['description', { description: 'x'.repeat(4001) }],
      ['purpose', { purpose: 'x'.repeat(4001) }],
      ['framework', { framework: 'x'.repeat(65) }],
      ['environment', { environment: 'prod' }],
      ['business_unit', { business_unit: 'x'.repeat(121) }],
      ['criticality', { criticality: 'extreme' }],
      ['data_classification', { data_classification: 'secret' }],
      ['internet_exposure', { internet_exposure: 'wide' }],
      ['code_execution', { code_execution: 'root' }],
      ['persistent_memory', { persistent_memory: 'forever' }],
      ['human_approval_coverage', { human_approval_coverage: 'total' }],
      ['tags', { tags: 'one' }],
      ['owners.0.email', { owners: [{ name: 'O', email: 'nope' }] }],
      ['owners.0.owner_type', { owners: [{ name: 'O', email: 'o@example.com', owner_type: 'boss' }] }],
    ])('answers 422 naming %s', async (field, over) => {
      const a = await onboardAdmin(t.app);
      expectValidation(await a.client.post(api('/agents'), { name: 'Valid name', ...over }), field);
    });

    it('needs an owner, a purpose and a data classification for production, naming what is missing', async () => {
      const a = await onboardAdmin(t.app);
      await setPlan(t, a.tenant.id, 'team');
      const bare = await a.client.post(api('/agents'), { name: 'Prod bot', environment: 'production' });
      expect(bare.statusCode).toBe(422);
      expect(bare.json().error).toMatchObject({
        code: 'production_requirements',
        details: { missing: ['owners', 'purpose', 'data_classification'] },
      });
      const partial = await a.client.post(api('/agents'), {
        name: 'Prod bot',
        environment: 'production',
        purpose: 'Pays supplier invoices',
        data_classification: 'confidential',
      });
      expect(partial.json().error.details.missing).toEqual(['owners']);
      const ok = await a.client.post(api('/agents'), {
        name: 'Prod bot',
        environment: 'production',
        purpose: 'Pays supplier invoices',
        data_classification: 'confidential',
        owners: [{ name: 'Olga Owner', email: 'olga@example.com' }],
      });
      expect(ok.statusCode).toBe(201);
      expect(ok.json().owners).toEqual([expect.objectContaining({ name: 'Olga Owner', owner_type: 'accountable' })]);
    });

    it('keeps the developer plan to five non-production agents and no production agents', async () => {
      const a = await onboardAdmin(t.app);
      for (let i = 0; i < 5; i++) expect((await a.client.post(api('/agents'), { name: `Dev agent ${i}` })).statusCode).toBe(201);
      const sixth = await a.client.post(api('/agents'), { name: 'One too many', environment: 'staging' });
      expect(sixth.statusCode).toBe(403);
      expect(sixth.json().error).toMatchObject({ code: 'module_not_in_plan', details: { plan: 'developer' } });
      const prod = await a.client.post(api('/agents'), {
        name: 'Prod',
        environment: 'production',
        purpose: 'p',
        data_classification: 'internal',
        owners: [{ name: 'O', email: 'o@example.com' }],
      });
      expect(prod.json().error).toMatchObject({ code: 'module_not_in_plan', details: { module: 'production_agents' } });

      // A revoked agent no longer counts.
      const first = (await a.client.get(api('/agents?limit=1'))).json().items[0];
      await a.client.post(api(`/agents/${first.id}/revoke`), { reason: 'retired', confirm: true });
      expect((await a.client.post(api('/agents'), { name: 'Replacement' })).statusCode).toBe(201);
    });
  });

  describe('GET /agents and /agents/{id}', () => {
    it('filters by q, environment, status and source, pages, and stays inside the organisation', async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      await setPlan(t, a.tenant.id, 'team');
      await a.client.post(api('/agents'), { name: 'Alpha reader', environment: 'staging' });
      const beta = (await a.client.post(api('/agents'), { name: 'Beta writer', description: 'writes ledgers' })).json();
      await a.client.post(api('/agents'), { name: 'Gamma', environment: 'staging' });
      await b.client.post(api('/agents'), { name: 'Alpha elsewhere' });
      await a.client.post(api(`/agents/${beta.id}/suspend`), { reason: 'investigating', confirm: true });

      const names = async (q: string) => (await a.client.get(api(`/agents${q}`))).json().items.map((x: { name: string }) => x.name);
      expect(await names('')).toEqual(['Alpha reader', 'Beta writer', 'Gamma']);
      expect(await names('?q=alpha')).toEqual(['Alpha reader']);
      expect(await names('?q=ledgers')).toEqual(['Beta writer']);
      expect(await names('?environment=staging')).toEqual(['Alpha reader', 'Gamma']);
      expect(await names('?status=suspended')).toEqual(['Beta writer']);
      expect(await names('?source=discovery')).toEqual([]);
      expect(await names('?risk_band=high')).toEqual([]);
      const page = (await a.client.get(api('/agents?limit=2'))).json();
      expect(page.items).toHaveLength(2);
      const next = (await a.client.get(api(`/agents?limit=2&cursor=${encodeURIComponent(page.next_cursor)}`))).json();
      expect(next.items.map((x: { name: string }) => x.name)).toEqual(['Gamma']);

      expect((await a.client.get(api(`/agents/${beta.id}`))).json()).toMatchObject({ id: beta.id, status: 'suspended' });
      expect((await b.client.get(api(`/agents/${beta.id}`))).statusCode).toBe(404);
      expectValidation(await a.client.get(api('/agents/not-a-uuid')), 'path.agent_id');
      expectValidation(await a.client.get(api('/agents?environment=moon')), 'query.environment');
    });
  });

  describe('PATCH /agents/{id}', () => {
    it('changes fields, honours If-Match, audits, and checks production rules and the plan', async () => {
      const a = await onboardAdmin(t.app);
      const agent = (await a.client.post(api('/agents'), { name: 'Patchable' })).json();
      const stale = await a.client.patch(api(`/agents/${agent.id}`), { name: 'Renamed' }, { 'if-match': '9' });
      expect(stale.json().error.code).toBe('version_conflict');
      const res = await a.client.patch(api(`/agents/${agent.id}`), { name: 'Renamed', tags: ['finance'], gateway_enforced: false }, { 'if-match': '1' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ name: 'Renamed', tags: ['finance'], gateway_enforced: false, version: 2, slug: agent.slug });
      const audit = (await a.client.get(api(`/audit?action=agent.updated&target_id=${agent.id}`))).json().items;
      expect(audit[0].details).toMatchObject({ name: { from: 'Patchable', to: 'Renamed' } });

      const toProd = await a.client.patch(api(`/agents/${agent.id}`), { environment: 'production', purpose: 'Real work' });
      expect(toProd.json().error.code).toBe('production_requirements');
      await a.client.post(api(`/agents/${agent.id}/owners`), { name: 'Owen', email: 'owen@example.com' });
      const plan = await a.client.patch(api(`/agents/${agent.id}`), { environment: 'production', purpose: 'Real work' });
      expect(plan.json().error.code).toBe('module_not_in_plan');
      await setPlan(t, a.tenant.id, 'team');
      expect((await a.client.patch(api(`/agents/${agent.id}`), { environment: 'production', purpose: 'Real work' })).statusCode).toBe(200);
      expect((await a.client.patch(api(`/agents/${agent.id}`), { purpose: '' })).json().error.code).toBe('production_requirements');
    });

    it.each([
      ['name', { name: 'x' }],
      ['environment', { environment: 'lab' }],
      ['gateway_enforced', { gateway_enforced: 'yes' }],
      ['tags', { tags: [''] }],
    ])('answers 422 naming %s', async (field, body) => {
      const a = await onboardAdmin(t.app);
      const agent = (await a.client.post(api('/agents'), { name: 'Valid' })).json();
      const res = await a.client.patch(api(`/agents/${agent.id}`), body);
      expect(res.statusCode).toBe(422);
      expect(res.json().error.details.map((d: { field: string }) => d.field.split('.')[0])).toContain(field);
    });

    it("answers 404 for another organisation's agent and 403 without agent:write", async () => {
      const a = await onboardAdmin(t.app);
      const b = await onboardAdmin(t.app);
      const agent = (await a.client.post(api('/agents'), { name: 'Mine' })).json();
      expect((await b.client.patch(api(`/agents/${agent.id}`), { name: 'Theirs' })).statusCode).toBe(404);
      const viewer = await addMember(t.app, a.client, ['viewer']);
      const res = await viewer.client.patch(api(`/agents/${agent.id}`), { name: 'Nope' });
      expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'agent:write' } });
    });
  });

  describe('owners, versions and attestation', () => {
    it('adds owners and versions, and keeps attestations with their date', async () => {
      const a = await onboardAdmin(t.app);
      const agent = (await a.client.post(api('/agents'), { name: 'Attested' })).json();
      const owner = await a.client.post(api(`/agents/${agent.id}/owners`), { name: 'Tech Lead', email: 'lead@example.com', owner_type: 'technical' });
      expect(owner.statusCode).toBe(201);
      expect(owner.json()).toMatchObject({ name: 'Tech Lead', owner_type: 'technical' });

      const model = (await a.client.post(api('/models'), { provider: 'vendor-a', model_name: 'large-1' })).json();
      const version = await a.client.post(api(`/agents/${agent.id}/versions`), {
        version_label: 'v2.0',
        model_id: model.id,
        manifest: { tools: ['crm.lookup_customer'] },
      });
      expect(version.statusCode).toBe(201);
      expect(version.json()).toMatchObject({ version_label: 'v2.0', model_id: model.id, change_summary: '', created_by: a.userId });
      const b = await onboardAdmin(t.app);
      const foreignModel = (await b.client.post(api('/models'), { provider: 'vendor-b', model_name: 'small' })).json();
      expectValidation(await a.client.post(api(`/agents/${agent.id}/versions`), { version_label: 'v3', model_id: foreignModel.id }), 'model_id');
      expectValidation(await a.client.post(api(`/agents/${agent.id}/versions`), { version_label: '' }), 'version_label');
      expectValidation(await a.client.post(api(`/agents/${agent.id}/versions`), { version_label: 'x'.repeat(65) }), 'version_label');

      const auditor = await addMember(t.app, a.client, ['auditor']);
      const attest = await auditor.client.post(api(`/agents/${agent.id}/attest`), { statement: 'Registration reviewed and accurate.' });
      expect(attest.statusCode).toBe(200);
      expect(attest.json()).toMatchObject({ agent_id: agent.id, attested_by: auditor.userId });
      expect((await a.client.get(api(`/agents/${agent.id}`))).json().last_attested_at).toBe(attest.json().attested_at);
      expectValidation(await a.client.post(api(`/agents/${agent.id}/attest`), { statement: 'too short' }), 'statement');
      expect((await b.client.post(api(`/agents/${agent.id}/owners`), { name: 'X', email: 'x@example.com' })).statusCode).toBe(404);
    });
  });
});
