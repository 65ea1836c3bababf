import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { loadPolicyCases, loadPolicyRegistry } from '../support/policy-cases.js';

/**
 * The policy cases of test/fixtures/policies, through POST /policies/simulate in a real organisation
 * built to mirror _registry.json: the same answers as the engine gives them (test/unit/policy-cases).
 * A case's `published` rules are published for real (author and publisher are two people) and
 * deactivated after it; its deny-class rules are put in force and lifted after it.
 */
describe('policy cases through POST /policies/simulate', () => {
  const registry = loadPolicyRegistry();
  const cases = loadPolicyCases();
  const clock = new TestClock(new Date(registry.now));
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let publisher: Awaited<ReturnType<typeof addMember>>;
  let agentId: string;

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_PERSON_PER_MINUTE: '100000', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    publisher = await addMember(t.app, admin.client, ['security_admin']);
    const a = registry.agent;
    const agent = await admin.client.post(api('/agents'), {
      name: 'Policy cases agent',
      environment: a.environment,
      criticality: a.criticality,
      data_classification: a.dataClassification,
    });
    expect(agent.statusCode).toBe(201);
    agentId = agent.json().id;
    const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string; privilege_class: string; approval_class: string }>;
    for (const [key, tool] of Object.entries(registry.tools)) {
      // The organisation's sample tools are the registry's tools.
      expect(tools.find((x) => x.tool_key === key)).toMatchObject({ privilege_class: tool.privilegeClass, approval_class: tool.approvalClass });
    }
    for (const b of registry.bindings) {
      const res = await admin.client.post(api(`/agents/${agentId}/permissions`), {
        target_kind: 'tool',
        target_id: tools.find((x) => x.tool_key === b.tool)!.id,
        actions: ['invoke'],
        constraints: b.constraints,
      });
      expect(res.statusCode).toBe(201);
    }
    for (const d of registry.delegations) {
      const res = await admin.client.post(api(`/agents/${agentId}/delegations`), {
        principal_ref: d.principalRef,
        display_name: d.principalRef,
        scopes: d.scopes,
      });
      expect(res.statusCode).toBe(201);
    }
  });
  afterAll(async () => t?.close());

  it.each(cases.map((c, i) => ({ ...c, i })))('$file', async (c) => {
    const undo: Array<() => Promise<unknown>> = [];
    try {
      for (const privilegeClass of c.deny_class ?? []) {
        const res = await admin.client.post(api('/actions/deny-class'), { reason: `case ${c.file}`, confirm: true, privilege_class: privilegeClass, agent_id: null });
        expect(res.statusCode).toBe(200);
        const ruleId = res.json().rule_id;
        undo.push(() => admin.client.post(api('/actions/deny-class/lift'), { reason: 'case done', confirm: true, rule_id: ruleId }));
      }
      if (c.published) {
        const created = await admin.client.post(api('/policies'), { key: `case-${c.i}`, name: `Case ${c.i}`, rules: c.published });
        expect(created.statusCode).toBe(201);
        const id = created.json().id;
        const published = await publisher.client.post(api(`/policies/${id}/versions/1/publish`), undefined, { 'if-match': '"1"' });
        expect(published.statusCode).toBe(200);
        undo.push(() => publisher.client.post(api(`/policies/${id}/status`), { status: 'inactive' }, { 'if-match': '"2"' }));
      }
      const res = await admin.client.post(api('/policies/simulate'), {
        agent_id: agentId,
        ...c.request,
        ...(c.draft_rules !== undefined ? { draft_rules: c.draft_rules } : {}),
        approval_present: c.approval_present,
      });
      expect(res.statusCode).toBe(200);
      const got = res.json();
      expect({ decision: got.decision, reason_codes: got.reason_codes, approvals_required: got.approvals_required }).toEqual(c.expect);
      expect(got.rules_evaluated).toBe(c.draft_rules !== undefined ? 'draft' : 'published');
    } finally {
      for (const u of undo.reverse()) await u();
    }
  });
});
