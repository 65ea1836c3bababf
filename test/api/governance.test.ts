import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CATALOGUE } from '../../api/modules/governance/index.js';
import { inScope } from '../../api/db/database.js';
import { notifyExpiringExceptions } from '../../api/modules/governance/governance.jobs.js';
import { firstSeqSince } from '../../api/modules/evidence/index.js';
import { addMember, asOwner, api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * Governance on real PostgreSQL through the API: framework coverage computed from the evidence chain over a
 * window, controls and the organisation's own mappings, exceptions (four eyes, lapse, notices) and the hourly
 * expiry job. Remediation and the AI-system register are in governance-systems.test.ts.
 */

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Status = { id: string; ref: string; title: string; status: 'met' | 'excepted' | 'not_met'; why: string };
type Coverage = {
  key: string;
  controls_total: number;
  controls_met: number;
  controls_excepted: number;
  controls_not_met: number;
  coverage_percent: number;
  readiness: string;
  window_days: number;
  since: string;
  until: string;
  failing_controls: Status[];
  controls: Status[];
};

const control = (key: string) => CATALOGUE.byKey.get(key)!;
const DAY = 86_400;
/** Sessions last 30 days here, so that the clock can move weeks on between the steps of a test. */
const ENV = { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', SESSION_TTL_SECONDS: String(30 * DAY) };

/** Signs a person in again (development sign-in) once the clock has moved past their session. */
async function signInAgain(who: { client: Client; email: string }, tenantId: string) {
  const res = await who.client.post(api('/auth/dev-login'), { email: who.email, tenant_id: tenantId });
  expect(res.statusCode, res.body).toBe(200);
}

/** An organisation on the enterprise plan with a security administrator, an auditor and a viewer. */
async function organisation(t: TestApp, name: string) {
  const admin = await onboardAdmin(t.app, name);
  await setPlan(t, admin.tenant.id, 'enterprise');
  const sec = await addMember(t.app, admin.client, ['security_admin']);
  const auditor = await addMember(t.app, admin.client, ['auditor']);
  const viewer = await addMember(t.app, admin.client, ['viewer']);
  return { admin, sec, auditor, viewer };
}

let keyN = 0;
const key = () => `gov-${Date.now()}-${++keyN}`;

/** An agent granted crm.lookup_customer and payments.create_payment (up to 500 EUR; needs an approval). */
async function agentWithTools(client: Client, name: string) {
  const agent = (await client.post(api('/agents'), { name })).json();
  const tools = Object.fromEntries((await client.get(api('/tools'))).json().items.map((x: { tool_key: string; id: string }) => [x.tool_key, x.id]));
  for (const [toolKey, constraints] of [
    ['crm.lookup_customer', {}],
    ['payments.create_payment', { max_amount: 500, currency: 'EUR' }],
  ] as const) {
    const res = await client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tools[toolKey], actions: ['invoke'], constraints });
    expect(res.statusCode, res.body).toBe(201);
  }
  return agent.id as string;
}

const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };

/** A console submission: the gateway decides it and records the decision as evidence. */
async function submit(client: Client, agentId: string, body: Record<string, unknown>) {
  const res = await client.post(api('/actions/console'), { ...body, agent_id: agentId }, { 'idempotency-key': key() });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

async function frameworks(client: Client, query = ''): Promise<Coverage[]> {
  const res = await client.get(api(`/governance/frameworks${query}`));
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items;
}

async function statusOf(client: Client, controlKey: string, query = ''): Promise<Status> {
  const c = control(controlKey);
  const f = (await frameworks(client, query)).find((x) => x.key === c.framework)!;
  return f.controls.find((x) => x.id === c.id)!;
}

describe('governance: frameworks, controls and mappings', () => {
  const clock = new TestClock();
  let t: TestApp;
  let org: Awaited<ReturnType<typeof organisation>>;
  let other: Admin;
  let agentId: string;

  beforeAll(async () => {
    t = await startTestApp({ clock, env: ENV });
    org = await organisation(t, 'Governance Org');
    other = await onboardAdmin(t.app, 'Other Org');
    agentId = await agentWithTools(org.admin.client, 'Support agent');
  });
  afterAll(async () => t?.close());

  describe('GET /governance/frameworks', () => {
    it('answers each framework with every control, and names every failing control with why', async () => {
      const fresh = await onboardAdmin(t.app, 'Fresh Org');
      const items = await frameworks(fresh.client);
      expect(items.map((f) => f.key)).toEqual(['eu-ai-act', 'iso-42001', 'nist-ai-rmf']);
      const now = clock.now();
      for (const f of items) {
        const shipped = CATALOGUE.frameworks.find((x) => x.key === f.key)!;
        expect(f).toMatchObject({ name: shipped.name, version: shipped.version, window_days: 90, until: now.toISOString() });
        expect(f.since).toBe(new Date(now.getTime() - 90 * DAY * 1000).toISOString());
        expect(f.controls.map((c) => c.id)).toEqual(shipped.controls.map((c) => c.id));
        expect(f.controls_total).toBe(shipped.controls.length);
        expect(f.controls_met + f.controls_excepted + f.controls_not_met).toBe(f.controls_total);
        expect(f.failing_controls).toEqual(f.controls.filter((c) => c.status === 'not_met'));
      }
      // An organisation that has done nothing has no evidence: nothing is met, nothing is ready.
      for (const f of items) expect(f).toMatchObject({ controls_met: 0, controls_excepted: 0, coverage_percent: 0, readiness: 'not_ready' });
      const eu = items[0]!;
      expect(eu.failing_controls.find((c) => c.ref === 'Art.14')).toEqual({
        id: control('eu-ai-act:Art.14').id,
        ref: 'Art.14',
        title: 'Human oversight',
        status: 'not_met',
        why: 'no evidence of approval or containment in the last 90 days',
      });
      const nist = items[2]!;
      expect(nist.failing_controls.find((c) => c.ref === 'GOVERN-3')!.why).toBe('no evidence is mapped to this control');
    });

    it('counts the gateway’s decisions as record-keeping; a mapping’s condition must be contained in the payload', async () => {
      expect((await statusOf(org.admin.client, 'eu-ai-act:Art.12')).status).toBe('not_met');
      await submit(org.admin.client, agentId, lookup);
      const recordKeeping = await statusOf(org.admin.client, 'eu-ai-act:Art.12');
      expect(recordKeeping).toMatchObject({ status: 'met', why: 'evidence in the last 90 days: decision, execution' });
      // Art.15 asks for a denial ({"decision":"deny"}): an allowed call is not one.
      expect(await statusOf(org.admin.client, 'eu-ai-act:Art.15')).toMatchObject({
        status: 'not_met',
        why: 'no evidence of decision with {"decision":"deny"}, mcp_trust_change or binding_reapproval in the last 90 days',
      });
      await submit(org.admin.client, agentId, { ...lookup, tool: 'crm.export_all' });
      expect(await statusOf(org.admin.client, 'eu-ai-act:Art.15')).toMatchObject({ status: 'met', why: 'evidence in the last 90 days: decision with {"decision":"deny"}' });
      // Arrays are contained element-wise: ISO A.7 wants a decision whose reason codes include SECRET_DETECTED.
      expect((await statusOf(org.admin.client, 'iso-42001:A.7')).status).toBe('not_met');
      await submit(org.admin.client, agentId, { ...lookup, parameters: { customer_id: '42', note: 'AKIAQWERTYUIOPASDFGH' } });
      expect(await statusOf(org.admin.client, 'iso-42001:A.7')).toMatchObject({ status: 'met', why: 'evidence in the last 90 days: decision with {"reason_codes":["SECRET_DETECTED"]}' });
    });

    it('counts a person’s approval as human oversight', async () => {
      const held = await submit(org.admin.client, agentId, { tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount: 100, currency: 'EUR' } });
      expect(held.decision.decision).toBe('require_approval');
      expect((await statusOf(org.admin.client, 'eu-ai-act:Art.14')).status).toBe('not_met');
      const decided = await org.sec.client.post(api(`/approvals/${held.approval.id}/decision`), { decision: 'approve', reason: 'invoice checked' });
      expect(decided.statusCode, decided.body).toBe(200);
      expect(await statusOf(org.admin.client, 'eu-ai-act:Art.14')).toMatchObject({ status: 'met', why: 'evidence in the last 90 days: approval' });
    });

    it('computes coverage percent and readiness from the statuses', async () => {
      for (const f of await frameworks(org.auditor.client)) {
        const covered = f.controls.filter((c) => c.status !== 'not_met').length;
        expect(f.coverage_percent).toBe(Math.round((covered / f.controls_total) * 1000) / 10);
        expect(f.readiness).toBe(f.controls_not_met === 0 ? 'ready' : f.coverage_percent >= 50 ? 'partial' : 'not_ready');
      }
      // Another organisation's evidence is not this one's.
      expect((await statusOf(other.client, 'eu-ai-act:Art.12')).status).toBe('not_met');
    });

    it('refuses a window outside 1-365 days, and callers without governance:read', async () => {
      expectValidation(await org.admin.client.get(api('/governance/frameworks?days=0')), 'query.days');
      expectValidation(await org.admin.client.get(api('/governance/frameworks?days=366')), 'query.days');
      expectValidation(await org.admin.client.get(api('/governance/frameworks?days=ninety')), 'query.days');
      const res = await org.viewer.client.get(api('/governance/frameworks'));
      expect(res.statusCode).toBe(403);
      expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'governance:read' } });
    });
  });

  describe('GET /controls/{control_id}', () => {
    it('answers a control with its catalogue mappings and its status', async () => {
      const c = control('eu-ai-act:Art.14');
      const res = await org.auditor.client.get(api(`/controls/${c.id}`));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toEqual({
        id: c.id,
        key: 'eu-ai-act:Art.14',
        ref: 'Art.14',
        title: 'Human oversight',
        description: c.description,
        framework: { key: 'eu-ai-act', name: CATALOGUE.frameworks[0]!.name, version: 'Regulation (EU) 2024/1689' },
        status: 'met',
        why: 'evidence in the last 90 days: approval',
        window_days: 90,
        mappings: c.evidence.map((m) => ({
          id: null,
          control_id: c.id,
          source: 'catalogue',
          evidence_event_type: m.evidence_event_type,
          condition: m.condition,
          rationale: m.rationale,
          catalogued: true,
          created_at: null,
          created_by: null,
        })),
      });
    });

    it('answers 404 for an id that is no control, 422 for one that is no UUID, 403 without governance:read', async () => {
      expect((await org.admin.client.get(api(`/controls/${randomUUID()}`))).json().error.code).toBe('not_found');
      expectValidation(await org.admin.client.get(api('/controls/art-14')), 'path.control_id');
      expect((await org.viewer.client.get(api(`/controls/${control('eu-ai-act:Art.14').id}`))).statusCode).toBe(403);
    });
  });

  describe('POST /controls/{control_id}/mappings', () => {
    const diversity = control('nist-ai-rmf:GOVERN-3');

    it('maps an evidence type to a control for the organisation: the control counts it from then on; audited, with evidence', async () => {
      expect((await statusOf(org.admin.client, 'nist-ai-rmf:GOVERN-3')).status).toBe('not_met');
      const res = await org.sec.client.post(api(`/controls/${diversity.id}/mappings`), {
        evidence_event_type: 'decision',
        rationale: 'Our console reviews are done by a mixed panel.',
        condition: { source: 'console' },
      });
      expect(res.statusCode, res.body).toBe(201);
      const mapping = res.json();
      expect(mapping).toEqual({
        id: expect.any(String),
        control_id: diversity.id,
        source: 'organisation',
        evidence_event_type: 'decision',
        condition: { source: 'console' },
        rationale: 'Our console reviews are done by a mixed panel.',
        catalogued: true,
        created_at: clock.now().toISOString(),
        created_by: org.sec.userId,
      });
      expect(await statusOf(org.admin.client, 'nist-ai-rmf:GOVERN-3')).toMatchObject({ status: 'met', why: 'evidence in the last 90 days: decision with {"source":"console"}' });
      const read = (await org.admin.client.get(api(`/controls/${diversity.id}`))).json();
      expect(read.mappings).toEqual([mapping]);

      const evidence = (await org.admin.client.get(api('/evidence?event_type=control_mapping'))).json().items;
      expect(evidence).toHaveLength(1);
      expect(evidence[0]).toMatchObject({
        control_ref: 'nist-ai-rmf:GOVERN-3',
        agent_id: null,
        payload: { mapping_id: mapping.id, control_id: diversity.id, evidence_event_type: 'decision', condition: { source: 'console' }, actor_id: org.sec.userId },
      });
      const audit = (await org.admin.client.get(api('/audit?action=control.mapping_added'))).json().items;
      expect(audit[0]).toMatchObject({ actor: { type: 'person', id: org.sec.userId }, target_id: diversity.id, outcome: 'success' });
      // Another organisation's control is untouched.
      expect((await other.client.get(api(`/controls/${diversity.id}`))).json()).toMatchObject({ status: 'not_met', mappings: [] });
      expect((await statusOf(other.client, 'nist-ai-rmf:GOVERN-3')).status).toBe('not_met');
    });

    it('refuses with 409 a mapping the control has already, the catalogue’s included, whatever the key order', async () => {
      const again = await org.admin.client.post(api(`/controls/${diversity.id}/mappings`), { evidence_event_type: 'decision', rationale: 'Again, the same.', condition: { source: 'console' } });
      expect(again.statusCode).toBe(409);
      expect(again.json().error.code).toBe('conflict');
      const two = { decision: 'allow', source: 'console' };
      expect((await org.admin.client.post(api(`/controls/${diversity.id}/mappings`), { evidence_event_type: 'decision', rationale: 'Allowed calls.', condition: two })).statusCode).toBe(201);
      const reordered = await org.admin.client.post(api(`/controls/${diversity.id}/mappings`), {
        evidence_event_type: 'decision',
        rationale: 'Allowed calls, reordered.',
        condition: { source: 'console', decision: 'allow' },
      });
      expect(reordered.statusCode).toBe(409);
      // The catalogue maps decision without a condition to Art.12 already.
      const shipped = await org.admin.client.post(api(`/controls/${control('eu-ai-act:Art.12').id}/mappings`), { evidence_event_type: 'decision', rationale: 'Decisions are kept.' });
      expect(shipped.statusCode).toBe(409);
      expect(shipped.json().error.message).toMatch(/catalogue already maps decision/);
      // An empty condition is no condition.
      const g5 = control('nist-ai-rmf:GOVERN-5').id;
      expect((await org.admin.client.post(api(`/controls/${g5}/mappings`), { evidence_event_type: 'approval', rationale: 'Approvals.', condition: null })).statusCode).toBe(201);
      const empty = await org.admin.client.post(api(`/controls/${g5}/mappings`), { evidence_event_type: 'approval', rationale: 'Approvals.', condition: {} });
      expect(empty.statusCode).toBe(409);
    });

    it('accepts an event type Tollgate does not write yet, flagged, and it counts for nothing until written', async () => {
      const iso = control('iso-42001:A.2');
      const res = await org.admin.client.post(api(`/controls/${iso.id}/mappings`), { evidence_event_type: 'survey.completed', rationale: 'Our quarterly survey.' });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toMatchObject({ catalogued: false, condition: null, evidence_event_type: 'survey.completed' });
      expect(await statusOf(org.admin.client, 'iso-42001:A.2')).toMatchObject({
        status: 'not_met',
        why: 'no evidence of policy_change with {"change":"published"} or survey.completed in the last 90 days',
      });
    });

    it('validates the body and the control, and needs governance:write', async () => {
      const url = api(`/controls/${diversity.id}/mappings`);
      const ok = { evidence_event_type: 'approval', rationale: 'Approvals count.' };
      expectValidation(await org.admin.client.post(url, { ...ok, evidence_event_type: 'ab' }), 'evidence_event_type');
      expectValidation(await org.admin.client.post(url, { ...ok, evidence_event_type: 'x'.repeat(81) }), 'evidence_event_type');
      expectValidation(await org.admin.client.post(url, { ...ok, evidence_event_type: 'has space' }), 'evidence_event_type');
      expectValidation(await org.admin.client.post(url, { ...ok, rationale: 'abc' }), 'rationale');
      expectValidation(await org.admin.client.post(url, { evidence_event_type: 'approval' }), 'rationale');
      expectValidation(await org.admin.client.post(url, { ...ok, condition: ['deny'] }), 'condition');
      expectValidation(await org.admin.client.post(url, { ...ok, condition: 'deny' }), 'condition');
      expectValidation(await org.admin.client.post(url, { ...ok, condition: { note: 'x'.repeat(4000) } }), 'condition');
      expect((await org.admin.client.post(api(`/controls/${randomUUID()}/mappings`), ok)).statusCode).toBe(404);
      const denied = await org.auditor.client.post(url, ok);
      expect(denied.statusCode).toBe(403);
      expect(denied.json().error.details).toEqual({ required_permission: 'governance:write' });
    });
  });

  describe('the window', () => {
    it('counts only evidence of the last `days` days: older records drop out, a wider window takes them back', async () => {
      // Every record so far was written at the test clock's start. 91 days on, none is in the default window.
      clock.advance(91 * DAY);
      await signInAgain(org.admin, org.admin.tenant.id);
      expect(await statusOf(org.admin.client, 'eu-ai-act:Art.12')).toMatchObject({ status: 'not_met', why: 'no evidence of decision or execution in the last 90 days' });
      expect((await statusOf(org.admin.client, 'eu-ai-act:Art.12', '?days=92')).status).toBe('met');
      expect((await statusOf(org.admin.client, 'eu-ai-act:Art.12', '?days=91')).status).toBe('met');
      expect(await statusOf(org.admin.client, 'eu-ai-act:Art.12', '?days=1')).toMatchObject({ status: 'not_met', why: 'no evidence of decision or execution in the last 1 day' });
      // A new record is in every window again.
      await submit(org.admin.client, agentId, lookup);
      expect((await statusOf(org.admin.client, 'eu-ai-act:Art.12', '?days=1')).status).toBe('met');
      const [eu] = await frameworks(org.admin.client, '?days=30');
      expect(eu).toMatchObject({ window_days: 30, since: new Date(clock.now().getTime() - 30 * DAY * 1000).toISOString() });
    });

    it('finds the first record of a window by bisecting the chain’s sequence: the same answer as a scan, gaps included', async () => {
      const orgId = randomUUID();
      const base = new Date('2026-01-01T00:00:00Z');
      await asOwner(t, async (c) => {
        await c.query(`insert into organisations (id, slug, name, primary_region) values ($1, $2, 'Bisect Org', 'eu-west')`, [orgId, `bisect-${orgId.slice(0, 8)}`]);
        // 1000 records, three a minute, with ten missing in the middle (as if removed).
        await c.query(
          `insert into evidence_records (id, org_id, seq, prev_hash, hash, signature, kid, event_type, correlation_id, payload, created_at)
           select gen_random_uuid(), $1, s, 'p', 'h', 's', 'k', 'decision', 'planted', '{}', $2::timestamptz + (s / 3) * interval '1 minute'
           from generate_series(1, 1000) s where s not between 400 and 409`,
          [orgId, base],
        );
        await c.query(`insert into evidence_heads (org_id, seq, hash) values ($1, 1000, 'h')`, [orgId]);
      });
      const scan = (since: Date) =>
        asOwner(t, async (c) => (await c.query('select coalesce(min(seq), 1001)::text as seq from evidence_records where org_id = $1 and created_at >= $2', [orgId, since])).rows[0].seq);
      for (const minutes of [-5, 0, 1, 2, 100, 132, 133, 134, 135, 136, 137, 200, 332, 333, 334, 400]) {
        const since = new Date(base.getTime() + minutes * 60_000);
        const found = await inScope(t.database.db, { orgId }, (tx) => firstSeqSince(tx, orgId, since));
        expect(found, `${minutes} minutes`).toBe(await scan(since));
      }
      // An organisation without evidence: the window starts at the first record to come.
      expect(await inScope(t.database.db, { orgId: other.tenant.id }, (tx) => firstSeqSince(tx, other.tenant.id, base))).toBe('1');
    });
  });
});

describe('governance: exceptions', () => {
  const clock = new TestClock();
  let t: TestApp;
  let org: Awaited<ReturnType<typeof organisation>>;
  let other: Admin;
  let agentId: string;
  const diverse = control('nist-ai-rmf:GOVERN-5');
  const oversight = control('eu-ai-act:Art.14');

  beforeAll(async () => {
    t = await startTestApp({ clock, env: ENV });
    org = await organisation(t, 'Exceptions Org');
    other = await onboardAdmin(t.app, 'Other Org');
    agentId = (await org.admin.client.post(api('/agents'), { name: 'Excepted agent' })).json().id;
  });
  afterAll(async () => t?.close());

  const inDays = (n: number) => new Date(clock.now().getTime() + n * DAY * 1000).toISOString();
  const request = (client: Client, over: Record<string, unknown> = {}) =>
    client.post(api('/exceptions'), {
      control_id: diverse.id,
      title: 'No stakeholder panel yet',
      justification: 'The panel is being set up this quarter; until then we cannot show engagement.',
      owner_email: org.sec.email,
      expires_at: inDays(30),
      ...over,
    });
  const decide = (client: Client, id: string, decision: 'approve' | 'reject', note = 'Reviewed, acceptable for now.') =>
    client.post(api(`/exceptions/${id}/decision`), { decision, note });
  const notices = async (client: Client, kind: string) =>
    (await client.get(api('/notifications'))).json().items.filter((n: { kind: string }) => n.kind === kind) as Array<{ title: string; body: string }>;

  it('takes a request: pending, with the control named, audited', async () => {
    const res = await request(org.admin.client, { compensating_controls: 'Monthly review by the security team.' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toEqual({
      id: expect.any(String),
      control_id: diverse.id,
      control_key: 'nist-ai-rmf:GOVERN-5',
      control_title: diverse.title,
      agent_id: null,
      title: 'No stakeholder panel yet',
      justification: 'The panel is being set up this quarter; until then we cannot show engagement.',
      compensating_controls: 'Monthly review by the security team.',
      owner_email: org.sec.email,
      expires_at: inDays(30),
      status: 'pending',
      requested_by: org.admin.userId,
      created_at: clock.now().toISOString(),
      decided_by: null,
      decided_at: null,
      decision_note: null,
      version: 1,
    });
    const audit = (await org.admin.client.get(api('/audit?action=exception.requested'))).json().items;
    expect(audit[0]).toMatchObject({ target_id: res.json().id, actor: { id: org.admin.userId } });
    // Pending covers nothing.
    expect((await statusOf(org.admin.client, 'nist-ai-rmf:GOVERN-5')).status).toBe('not_met');
  });

  it('validates the request', async () => {
    expectValidation(await request(org.admin.client, { expires_at: inDays(-1) }), 'expires_at');
    expectValidation(await request(org.admin.client, { expires_at: clock.now().toISOString() }), 'expires_at');
    expectValidation(await request(org.admin.client, { expires_at: 'next week' }), 'expires_at');
    expectValidation(await request(org.admin.client, { expires_at: '9999-12-31T23:59:59-23:59' }), 'expires_at');
    expectValidation(await request(org.admin.client, { title: 'abcd' }), 'title');
    expectValidation(await request(org.admin.client, { justification: 'too short' }), 'justification');
    expectValidation(await request(org.admin.client, { owner_email: 'not-an-email' }), 'owner_email');
    expectValidation(await request(org.admin.client, { compensating_controls: 'x'.repeat(4001) }), 'compensating_controls');
    expectValidation(await request(org.admin.client, { control_id: randomUUID() }), 'control_id');
    expectValidation(await request(org.admin.client, { control_id: 'GOVERN-5' }), 'control_id');
    const foreign = (await other.client.post(api('/agents'), { name: 'Foreign agent' })).json().id;
    expectValidation(await request(org.admin.client, { agent_id: foreign }), 'agent_id');
    expect((await request(org.auditor.client)).statusCode).toBe(403);
  });

  it('is decided by another holder of exception:approve: never the requester, once, and the requester is told', async () => {
    const e = (await request(org.admin.client)).json();
    const self = await decide(org.admin.client, e.id, 'approve');
    expect(self.statusCode).toBe(403);
    expect(self.json().error.code).toBe('self_approval_prohibited');
    const auditor = await decide(org.auditor.client, e.id, 'approve');
    expect(auditor.statusCode).toBe(403);
    expect(auditor.json().error.details).toEqual({ required_permission: 'exception:approve' });
    expect((await decide(other.client, e.id, 'approve')).statusCode).toBe(404);
    expectValidation(await org.sec.client.post(api(`/exceptions/${e.id}/decision`), { decision: 'maybe', note: 'hmm' }), 'decision');
    expectValidation(await org.sec.client.post(api(`/exceptions/${e.id}/decision`), { decision: 'approve', note: 'ok' }), 'note');

    const approved = await decide(org.sec.client, e.id, 'approve', 'Panel due in March; accepted until then.');
    expect(approved.statusCode, approved.body).toBe(200);
    expect(approved.json()).toMatchObject({ status: 'approved', decided_by: org.sec.userId, decided_at: clock.now().toISOString(), decision_note: 'Panel due in March; accepted until then.', version: 2 });
    const twice = await decide(org.admin.client, e.id, 'reject');
    expect(twice.statusCode).toBe(409);
    expect(twice.json().error).toMatchObject({ code: 'conflict', details: { status: 'approved' } });

    const evidence = (await org.admin.client.get(api('/evidence?event_type=exception_decision'))).json().items;
    expect(evidence[0]).toMatchObject({
      control_ref: 'nist-ai-rmf:GOVERN-5',
      agent_id: null,
      payload: { exception_id: e.id, decision: 'approve', status: 'approved', requested_by: org.admin.userId, actor_id: org.sec.userId },
    });
    const audit = (await org.admin.client.get(api('/audit?action=exception.approved'))).json().items;
    expect(audit[0]).toMatchObject({ target_id: e.id, actor: { id: org.sec.userId } });
    const told = await notices(org.admin.client, 'exception.decided');
    expect(told).toHaveLength(1);
    expect(told[0]!.title).toBe('Exception approved: No stakeholder panel yet');
    expect(told[0]!.body).toContain('Panel due in March');
    expect(await notices(org.sec.client, 'exception.decided')).toEqual([]);
  });

  it('takes a service account’s request, decided by a person; a service account cannot decide one', async () => {
    const sa = (await org.admin.client.post(api('/service-accounts'), { name: 'governance-bot', roles: ['security_admin'] })).json();
    const token = (
      await t.app.inject({ method: 'POST', url: api('/service-accounts/token'), payload: { grant_type: 'client_credentials', client_id: sa.client_id, client_secret: sa.client_secret } })
    ).json().access_token as string;
    const asService = (url: string, payload: object) => t.app.inject({ method: 'POST', url: api(url), headers: { authorization: `Bearer ${token}` }, payload });
    const requested = await asService('/exceptions', {
      control_id: control('iso-42001:A.9').id,
      title: 'Automation asks for this',
      justification: 'Raised by the pipeline for a system not yet behind the gateway.',
      owner_email: org.sec.email,
      expires_at: inDays(10),
    });
    expect(requested.statusCode, requested.body).toBe(201);
    expect(requested.json().requested_by).toBe(sa.id);
    const byService = await asService(`/exceptions/${requested.json().id}/decision`, { decision: 'approve', note: 'Self-service.' });
    expect(byService.statusCode).toBe(403);
    expect(byService.json().error).toMatchObject({ code: 'forbidden', details: { required_principal: 'person' } });
    expect((await decide(org.sec.client, requested.json().id, 'reject', 'Put it behind the gateway instead.')).json().status).toBe('rejected');
  });

  it('makes an organisation-wide approved exception cover its control: excepted, counted as covered, named', async () => {
    const status = await statusOf(org.auditor.client, 'nist-ai-rmf:GOVERN-5');
    expect(status.status).toBe('excepted');
    expect(status.why).toMatch(/^no evidence is mapped to this control; covered by exception "No stakeholder panel yet" \(.+\) until /);
    const nist = (await frameworks(org.auditor.client)).find((f) => f.key === 'nist-ai-rmf')!;
    expect(nist.controls_excepted).toBe(1);
    expect(nist.failing_controls.map((c) => c.ref)).not.toContain('GOVERN-5');
    // The decision itself is evidence of accountability (GOVERN-2) and of a deliberate response to risk (MANAGE-1).
    expect(nist.controls.filter((c) => c.status === 'met').map((c) => c.ref)).toEqual(['GOVERN-2', 'MANAGE-1']);
    expect(nist.coverage_percent).toBe(Math.round((3 / nist.controls_total) * 1000) / 10);
  });

  it('keeps an exception about one agent out of the organisation’s coverage', async () => {
    const e = (await request(org.admin.client, { control_id: oversight.id, agent_id: agentId, title: 'No approvals for the batch agent' })).json();
    expect(e.agent_id).toBe(agentId);
    expect((await decide(org.sec.client, e.id, 'approve')).statusCode).toBe(200);
    expect((await statusOf(org.admin.client, 'eu-ai-act:Art.14')).status).toBe('not_met');
  });

  it('records a rejection, which covers nothing', async () => {
    const e = (await request(org.sec.client, { control_id: control('eu-ai-act:Art.10').id, title: 'No data inventory' })).json();
    const rejected = await decide(org.admin.client, e.id, 'reject', 'Run discovery instead.');
    expect(rejected.json()).toMatchObject({ status: 'rejected', decided_by: org.admin.userId });
    expect((await statusOf(org.admin.client, 'eu-ai-act:Art.10')).status).toBe('not_met');
    expect((await notices(org.sec.client, 'exception.decided'))[0]!.title).toBe('Exception rejected: No data inventory');
  });

  it('lists exceptions newest first, filtered by status, paged', async () => {
    const all = (await org.auditor.client.get(api('/exceptions'))).json().items as Array<{ id: string; status: string; created_at: string }>;
    expect(all.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < all.length; i++) expect(all[i - 1]!.created_at >= all[i]!.created_at).toBe(true);
    for (const status of ['pending', 'approved', 'rejected'] as const) {
      const page = (await org.auditor.client.get(api(`/exceptions?status=${status}`))).json().items as Array<{ status: string }>;
      expect(page.length).toBeGreaterThan(0);
      expect(page.every((e) => e.status === status)).toBe(true);
    }
    const first = (await org.auditor.client.get(api('/exceptions?limit=2'))).json();
    expect(first.items.map((e: { id: string }) => e.id)).toEqual(all.slice(0, 2).map((e) => e.id));
    const second = (await org.auditor.client.get(api(`/exceptions?limit=2&cursor=${first.next_cursor}`))).json();
    expect(second.items.map((e: { id: string }) => e.id)).toEqual(all.slice(2, 4).map((e) => e.id));
    // A cursor belongs to its list: not to another status's.
    expect((await org.auditor.client.get(api(`/exceptions?status=pending&cursor=${first.next_cursor}`))).json().error.code).toBe('invalid_cursor');
    expectValidation(await org.auditor.client.get(api('/exceptions?status=lapsed')), 'query.status');
    expect((await org.viewer.client.get(api('/exceptions'))).statusCode).toBe(403);
    expect((await other.client.get(api('/exceptions'))).json().items).toEqual([]);
  });

  it('lapses on its own at expires_at: expired, covering nothing; a pending one past it can no longer be decided', async () => {
    const short = (await request(org.admin.client, { control_id: control('iso-42001:A.4').id, title: 'Inventory later', expires_at: inDays(2) })).json();
    await decide(org.sec.client, short.id, 'approve');
    clock.advance(1);
    const undecided = (await request(org.admin.client, { control_id: control('iso-42001:A.5').id, title: 'Impact later', expires_at: inDays(1) })).json();
    expect((await statusOf(org.admin.client, 'iso-42001:A.4')).status).toBe('excepted');
    clock.advance(3 * DAY);
    expect((await statusOf(org.admin.client, 'iso-42001:A.4')).status).toBe('not_met');
    const expired = (await org.admin.client.get(api('/exceptions?status=expired'))).json().items.map((e: { id: string }) => e.id);
    expect(expired).toEqual([undecided.id, short.id]);
    const approved = (await org.admin.client.get(api('/exceptions?status=approved'))).json().items.map((e: { id: string }) => e.id);
    expect(approved).not.toContain(short.id);
    expect(approved.length).toBeGreaterThan(0);
    const pending = (await org.admin.client.get(api('/exceptions?status=pending'))).json().items.map((e: { id: string }) => e.id);
    expect(pending).not.toContain(undecided.id);
    const late = await decide(org.sec.client, undecided.id, 'approve');
    expect(late.statusCode).toBe(409);
    expect(late.json().error).toMatchObject({ code: 'conflict', details: { status: 'expired' } });
  });
});

describe('governance: the exception expiry job', () => {
  const clock = new TestClock();
  let t: TestApp;
  let org: Awaited<ReturnType<typeof organisation>>;
  let other: Awaited<ReturnType<typeof organisation>>;

  const owner = <T>(fn: (c: pg.Client) => Promise<T>) => asOwner(t, fn);
  async function eventually<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
    const until = Date.now() + ms;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const inDays = (n: number) => new Date(clock.now().getTime() + n * DAY * 1000).toISOString();
  async function approvedException(o: typeof org, controlKey: string, ownerEmail: string, days: number) {
    const e = (
      await o.admin.client.post(api('/exceptions'), {
        control_id: control(controlKey).id,
        title: `Exception on ${controlKey}`,
        justification: 'Accepted for a while, with the compensating controls below.',
        owner_email: ownerEmail,
        expires_at: inDays(days),
      })
    ).json();
    expect((await o.sec.client.post(api(`/exceptions/${e.id}/decision`), { decision: 'approve', note: 'Accepted.' })).statusCode).toBe(200);
    return e.id as string;
  }
  const expiring = async (client: Client) =>
    (await client.get(api('/notifications'))).json().items.filter((n: { kind: string }) => n.kind === 'exception.expiring') as Array<{ title: string; body: string }>;

  beforeAll(async () => {
    t = await startTestApp({ clock, worker: true, env: { ...ENV, JOB_POLL_INTERVAL_SECONDS: '0.5' } });
    org = await organisation(t, 'Expiry Org');
    other = await organisation(t, 'Other Expiry Org');
  }, 60_000);
  afterAll(async () => t?.close());

  it('runs hourly as governance.exception_expiry and tells the owner, once, of an approved exception lapsing within 7 days', async () => {
    const schedule = await owner(async (c) => (await c.query(`select cron, timezone from pgboss.schedule where name = 'governance.exception_expiry'`)).rows[0]);
    expect(schedule).toEqual({ cron: '0 * * * *', timezone: 'UTC' });
    // From here on the runs are the test's own.
    await owner((c) => c.query(`delete from pgboss.schedule where name = 'governance.exception_expiry'`));

    const soon = await approvedException(org, 'eu-ai-act:Art.10', org.viewer.email.toUpperCase(), 3);
    await approvedException(org, 'eu-ai-act:Art.11', org.viewer.email, 30);
    const elsewhere = await approvedException(other, 'eu-ai-act:Art.10', other.auditor.email, 6);
    expect(await t.app.deps.jobs.send('governance.exception_expiry', {})).toEqual(expect.any(String));
    const told = await eventually('the notice', async () => {
      const n = await expiring(org.viewer.client);
      return n.length > 0 ? n : undefined;
    });
    expect(told).toHaveLength(1);
    expect(told[0]!.title).toBe('Exception expiring: Exception on eu-ai-act:Art.10');
    expect(told[0]!.body).toContain('lapses on');
    expect(told[0]!.body).toContain('in 3 days');
    // Every organisation's, each in its own.
    const otherTold = await eventually('the other organisation’s notice', async () => {
      const n = await expiring(other.auditor.client);
      return n.length > 0 ? n : undefined;
    });
    expect(otherTold).toHaveLength(1);
    expect(await expiring(org.auditor.client)).toEqual([]);
    const marked = await owner(async (c) => (await c.query('select id from governance_exceptions where expiry_notified_at is not null order by id')).rows.map((r) => r.id));
    expect(marked.sort()).toEqual([soon, elsewhere].sort());

    // Again: nothing more.
    expect(await notifyExpiringExceptions({ db: t.database.db, clock })).toEqual({ exceptions: 0, notified: 0 });
    expect(await expiring(org.viewer.client)).toHaveLength(1);
  });

  it('tells of the later one when its week comes, and tells nobody when the owner is not a member', async () => {
    await approvedException(org, 'eu-ai-act:Art.13', 'someone@elsewhere.example', 5);
    clock.advance(24 * DAY);
    expect(await notifyExpiringExceptions({ db: t.database.db, clock })).toEqual({ exceptions: 1, notified: 1 });
    expect((await expiring(org.viewer.client)).map((n) => n.title)).toEqual(['Exception expiring: Exception on eu-ai-act:Art.11', 'Exception expiring: Exception on eu-ai-act:Art.10']);
    // The stranger's exception lapsed unseen before this run (past expires_at): not due any more; a new one is.
    await approvedException(org, 'eu-ai-act:Art.17', 'someone@elsewhere.example', 2);
    expect(await notifyExpiringExceptions({ db: t.database.db, clock })).toEqual({ exceptions: 1, notified: 0 });
    expect(await notifyExpiringExceptions({ db: t.database.db, clock })).toEqual({ exceptions: 0, notified: 0 });
  });

  it('is not for the runtime role to list other organisations’ exceptions: it sees only through the owner’s function', async () => {
    const runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
    try {
      expect((await runtime.query('select count(*)::int as n from governance_exceptions')).rows[0].n).toBe(0);
      await expect(runtime.query('delete from governance_exceptions')).rejects.toThrow(/permission denied/);
    } finally {
      await runtime.end();
    }
  });
});
