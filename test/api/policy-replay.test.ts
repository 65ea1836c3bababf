import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileRules } from '../../api/modules/gateway/index.js';
import { parameterReads, readsLostValue, ReplayTally, storedParameters } from '../../api/modules/policies/replay-tally.js';
import { MAX_CONCURRENT_REPLAYS, REPLAY_LIMITS, replayVersion } from '../../api/modules/policies/replay.service.js';
import type { ActorPrincipal } from '../../api/platform/context.js';
import { addMember, api, asOwner, expectValidation, onboardAdmin, startEmbeddedApp, startTestApp, TestClock, type TestApp } from '../support/harness.js';

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Member = Awaited<ReturnType<typeof addMember>>;
type Effect = 'allow' | 'deny' | 'require_approval';

const lookupOf = (customer: string) => [
  { field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' },
  { field: 'action.parameters.customer_id', op: 'eq', value: customer },
];
/** Published: lookups of customer 99 are denied. */
const PUBLISHED = [{ id: 'no-lookup-99', effect: 'deny', reason_code: 'LOOKUP_99_BLOCKED', conditions: lookupOf('99') }];
/** The draft: customer 99 is free again, customer 7 needs review, mail is frozen, lookups of customer 1 are tagged. */
const DRAFT = [
  { id: 'review-lookup-7', effect: 'require_approval', reason_code: 'LOOKUP_REVIEW', conditions: lookupOf('7') },
  { id: 'freeze-email', effect: 'deny', reason_code: 'EMAIL_FROZEN', conditions: [{ field: 'tool.key', op: 'eq', value: 'email.send_message' }] },
  { id: 'tag-lookup-1', effect: 'allow', reason_code: 'LOOKUP_TAGGED', conditions: lookupOf('1') },
];

/**
 * Policy replay (docs/policies.md, Replay): recorded first decisions, made through POST /actions and
 * /actions/console, decided again with the rules in force and with a version in place of the published one.
 */
describe('policy replay over recorded decisions', () => {
  let t: TestApp;
  const clock = new TestClock(new Date('2026-11-24T10:00:00.000Z'));
  let admin: Admin;
  let security: Member;
  let developer: Member;
  let viewer: Member;
  let other: Admin;
  let otherAgent: string;
  let otherPolicy: string;
  let agentA: string;
  let agentB: string;
  let tokenA: string;
  let policyId: string;
  let tools: Record<string, string>;
  const bindings: Record<string, string> = {};
  let keyN = 0;
  /** The main window: [from, to). */
  let from: string;
  let to: string;
  const ids: Record<string, string[]> = {};

  const ifMatch = (v: number) => ({ 'if-match': `"${v}"` });
  const tick = () => clock.advance(1);
  const lookup = (customer: string, extra: Record<string, unknown> = {}) => ({
    tool: 'crm.lookup_customer',
    target: `crm://customers/${customer}`,
    parameters: { customer_id: customer, ...extra },
  });
  const email = { tool: 'email.send_message', target: 'mail://someone', parameters: { to: 'someone@example.com', subject: 'Hello' } };

  async function submit(body: Record<string, unknown>, label: string, session?: string): Promise<{ decision: Effect; reason_codes: string[] }> {
    tick();
    const res = await t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${tokenA}`, 'idempotency-key': `replay-${++keyN}`, ...(session ? { 'tollgate-session': session } : {}) },
      payload: body,
    });
    expect(res.statusCode, res.body).toBe(200);
    (ids[label] ??= []).push(res.json().action.id);
    return res.json().decision;
  }
  async function console_(agentId: string, body: Record<string, unknown>, label: string): Promise<{ decision: Effect }> {
    tick();
    const res = await admin.client.post(api('/actions/console'), { ...body, agent_id: agentId }, { 'idempotency-key': `replay-console-${++keyN}` });
    expect(res.statusCode, res.body).toBe(200);
    (ids[label] ??= []).push(res.json().action.id);
    return res.json().decision;
  }
  // Each replay a second after the last, so that the latest of a version is the last one made.
  const replay = (number: number, body: Record<string, unknown>, who: { client: Admin['client'] } = developer, policy = policyId) => {
    tick();
    return who.client.post(api(`/policies/${policy}/versions/${number}/replay`), body);
  };
  const counts = async (orgId: string) =>
    asOwner(t, async (c) => {
      const q = async (table: string) => Number((await c.query(`select count(*) as n from ${table} where org_id = $1`, [orgId])).rows[0].n);
      return {
        actions: await q('action_requests'),
        evidence: await q('evidence_records'),
        approvals: await q('approvals'),
        sessions: await q('agent_sessions'),
        replays: await q('policy_replays'),
      };
    });

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', RATE_LIMIT_GATEWAY_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app);
    security = await addMember(t.app, admin.client, ['security_admin']);
    developer = await addMember(t.app, admin.client, ['agent_developer']);
    viewer = await addMember(t.app, admin.client, ['viewer']);
    const list = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    tools = Object.fromEntries(list.map((x) => [x.tool_key, x.id]));
    const agent = async (name: string) => {
      const id = (await admin.client.post(api('/agents'), { name, criticality: 'low' })).json().id as string;
      for (const key of ['crm.lookup_customer', 'email.send_message']) {
        const res = await admin.client.post(api(`/agents/${id}/permissions`), { target_kind: 'tool', target_id: tools[key], actions: ['invoke'] });
        expect(res.statusCode, res.body).toBe(201);
        bindings[`${name}:${key}`] = res.json().id;
      }
      return id;
    };
    agentA = await agent('Replay A');
    agentB = await agent('Replay B');
    const identity = (await admin.client.post(api(`/agents/${agentA}/identities`))).json();
    tokenA = (
      await t.app.inject({
        method: 'POST',
        url: api('/identities/token'),
        payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
      })
    ).json().access_token;

    const created = await developer.client.post(api('/policies'), { key: 'replay-subject', name: 'Replay subject', rules: PUBLISHED });
    expect(created.statusCode, created.body).toBe(201);
    policyId = created.json().id;
    expect((await security.client.post(api(`/policies/${policyId}/versions/1/publish`), undefined, ifMatch(1))).statusCode).toBe(200);
    const v2 = await developer.client.post(api(`/policies/${policyId}/versions`), { rules: DRAFT, change_note: 'Review customer 7, freeze mail' }, ifMatch(2));
    expect(v2.statusCode, v2.body).toBe(201);

    // Another organisation with its own agent, policy and decisions in the same window.
    other = await onboardAdmin(t.app, 'Other');
    otherAgent = (await other.client.post(api('/agents'), { name: 'Other agent' })).json().id;
    const otherTools = (await other.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
    const otherEmail = otherTools.find((x) => x.tool_key === 'email.send_message')!.id;
    expect((await other.client.post(api(`/agents/${otherAgent}/permissions`), { target_kind: 'tool', target_id: otherEmail, actions: ['invoke'] })).statusCode).toBe(201);
    otherPolicy = (await other.client.post(api('/policies'), { key: 'other-policy', name: 'Other policy', rules: DRAFT })).json().id;

    // Before the window.
    await submit(email, 'before');
    tick();
    from = clock.now().toISOString();
    // In the window: agent A through the gateway, agent B from the console.
    for (const [body, label] of [
      [lookup('7'), 'a:lookup7'],
      [lookup('7'), 'a:lookup7'],
      [lookup('99'), 'a:lookup99'],
      [lookup('1'), 'a:lookup1'],
      [email, 'a:email'],
      [lookup('5'), 'a:lookup5'],
    ] as const) {
      await submit(body, label);
    }
    await console_(agentB, email, 'b:email');
    await console_(agentB, lookup('7'), 'b:lookup7');
    tick();
    const otherRes = await other.client.post(api('/actions/console'), { ...email, agent_id: otherAgent }, { 'idempotency-key': 'other-org-1' });
    expect(otherRes.statusCode, otherRes.body).toBe(200);
    tick();
    to = clock.now().toISOString();
    // After the window.
    await submit(lookup('7'), 'after');
    tick();
  });
  afterAll(async () => t?.close());

  it('recorded the decisions the replay starts from, with the facts replay reads', async () => {
    const rows = await asOwner(t, async (c) => (await c.query(`select id, decision, decision_facts from action_requests where id = any($1)`, [ids['a:lookup99']])).rows);
    expect(rows).toEqual([expect.objectContaining({ decision: 'deny', decision_facts: expect.objectContaining({ v: 1, agent: expect.objectContaining({ id: agentA, criticality: 'low' }) }) })]);
  });

  it('counts what the draft would change: transitions, by agent and by rule, with examples; nothing but the summary is written', async () => {
    const before = await counts(admin.tenant.id);
    const res = await replay(2, { from, to });
    expect(res.statusCode, res.body).toBe(200);
    const r = res.json();
    expect(r).toMatchObject({
      policy_id: policyId,
      version_number: 2,
      window: { from, to },
      agent_id: null,
      published_version: 1,
      policy_status: 'active',
      replayed_as_active: false,
      requested_by: developer.userId,
      replayed: 8,
      changed: 6,
      reason_codes_changed: 1,
      unchanged: 1,
      drift: 0,
      inexact: 0,
      without_facts: 0,
      skipped: 0,
      agents_changed: 2,
    });
    expect(r.transitions).toEqual([
      { from: 'allow', to: 'require_approval', count: 3 },
      { from: 'allow', to: 'deny', count: 2 },
      { from: 'deny', to: 'allow', count: 1 },
    ]);
    expect(r.drift_transitions).toEqual([]);
    expect(r.by_rule).toEqual([
      { source: 'version', rule_id: 'review-lookup-7', effect: 'require_approval', reason_code: 'LOOKUP_REVIEW', decisions_changed: 3, reason_codes_changed: 0 },
      { source: 'version', rule_id: 'freeze-email', effect: 'deny', reason_code: 'EMAIL_FROZEN', decisions_changed: 2, reason_codes_changed: 0 },
      { source: 'published', rule_id: 'no-lookup-99', effect: 'deny', reason_code: 'LOOKUP_99_BLOCKED', decisions_changed: 1, reason_codes_changed: 0 },
      { source: 'version', rule_id: 'tag-lookup-1', effect: 'allow', reason_code: 'LOOKUP_TAGGED', decisions_changed: 0, reason_codes_changed: 1 },
    ]);
    expect(r.by_agent).toEqual([
      { agent_id: agentA, replayed: 6, changed: 4, reason_codes_changed: 1 },
      { agent_id: agentB, replayed: 2, changed: 2, reason_codes_changed: 0 },
    ]);
    // Every changed action, oldest first, with both sides' reason codes.
    expect(r.examples.map((e: { action_id: string }) => e.action_id)).toEqual([
      ...ids['a:lookup7']!,
      ...ids['a:lookup99']!,
      ...ids['a:lookup1']!,
      ...ids['a:email']!,
      ...ids['b:email']!,
      ...ids['b:lookup7']!,
    ]);
    expect(r.examples[2]).toEqual({
      action_id: ids['a:lookup99']![0],
      agent_id: agentA,
      tool: 'crm.lookup_customer',
      created_at: expect.any(String),
      recorded: 'deny',
      from: 'deny',
      to: 'allow',
      reason_codes_before: ['LOOKUP_99_BLOCKED'],
      reason_codes_after: ['PERMISSION_GRANTED'],
      inexact: false,
    });
    expect(r.examples[3]).toMatchObject({ from: 'allow', to: 'allow', reason_codes_before: ['PERMISSION_GRANTED'], reason_codes_after: ['PERMISSION_GRANTED', 'LOOKUP_TAGGED'] });
    expect(r.examples[5]).toMatchObject({ agent_id: agentB, from: 'allow', to: 'deny', reason_codes_after: ['EMAIL_FROZEN'] });

    // Only the replay's summary row: no action, evidence or approval.
    const after = await counts(admin.tenant.id);
    expect(after).toEqual({ ...before, replays: before.replays + 1 });
    const audit = (await admin.client.get(api(`/audit?target_id=${policyId}`))).json().items as Array<{ action: string; details: Record<string, unknown> }>;
    expect(audit.find((a) => a.action === 'policy.replayed')?.details).toMatchObject({ replay_id: r.id, number: 2, replayed: 8, changed: 6 });
  });

  it('replays one agent, and only the window', async () => {
    const b = (await replay(2, { from, to, agent_id: agentB })).json();
    expect(b).toMatchObject({ agent_id: agentB, replayed: 2, changed: 2, reason_codes_changed: 0 });
    expect(b.transitions).toEqual([
      { from: 'allow', to: 'deny', count: 1 },
      { from: 'allow', to: 'require_approval', count: 1 },
    ]);
    expect(b.by_agent).toEqual([{ agent_id: agentB, replayed: 2, changed: 2, reason_codes_changed: 0 }]);

    // Widened to take the action before and the one after.
    const wide = (await replay(2, { from: new Date(Date.parse(from) - 60_000).toISOString(), to: clock.now().toISOString() })).json();
    expect(wide).toMatchObject({ replayed: 10, changed: 8 });
    const examples = wide.examples.map((e: { action_id: string }) => e.action_id);
    expect(examples).toContain(ids.before![0]);
    expect(examples).toContain(ids.after![0]);
    // The window's end is exclusive, its beginning inclusive.
    const at = await asOwner(t, async (c) => (await c.query(`select created_at from action_requests where id = $1`, [ids.after![0]])).rows[0].created_at as Date);
    expect((await replay(2, { from, to: at.toISOString() })).json().replayed).toBe(8);
    expect((await replay(2, { from: at.toISOString(), to: new Date(at.getTime() + 1).toISOString() })).json()).toMatchObject({ replayed: 1, changed: 1 });
  });

  it('shows the latest replay on the version it replayed, on GET and in the publish answer', async () => {
    const latest = (await replay(2, { from, to })).json();
    const got = await admin.client.get(api(`/policies/${policyId}`));
    expect(got.statusCode).toBe(200);
    const versions = got.json().versions as Array<{ number: number; latest_replay: Record<string, unknown> | null }>;
    const { examples: _examples, ...summary } = latest;
    expect(versions.find((v) => v.number === 2)!.latest_replay).toEqual(summary);
    expect(versions.find((v) => v.number === 1)!.latest_replay).toBeNull();

    // The second person publishes and sees the effect in the answer.
    const published = await security.client.post(api(`/policies/${policyId}/versions/2/publish`), undefined, ifMatch(got.json().version));
    expect(published.statusCode, published.body).toBe(200);
    const pv = published.json().versions as Array<{ number: number; state: string; latest_replay: { id: string; changed: number } | null }>;
    expect(pv.find((v) => v.number === 2)).toMatchObject({ state: 'published', latest_replay: { id: latest.id, changed: 6 } });
    expect(pv.find((v) => v.number === 1)!.latest_replay).toBeNull();

    // Now published, the same version replays as no change: the rules in force are its own.
    const same = (await replay(2, { from, to })).json();
    expect(same).toMatchObject({ published_version: 2, replayed: 8, changed: 0, reason_codes_changed: 0, unchanged: 8 });
    // Version 1 against it: the reverse transitions.
    const back = (await replay(1, { from, to })).json();
    expect(back.transitions).toEqual([
      { from: 'require_approval', to: 'allow', count: 3 },
      { from: 'allow', to: 'deny', count: 1 },
      { from: 'deny', to: 'allow', count: 2 },
    ].sort((x, y) => y.count - x.count || x.from.localeCompare(y.from) || x.to.localeCompare(y.to)));
    // Roll back so the later tests start from version 1 in force.
    const current = (await admin.client.get(api(`/policies/${policyId}`))).json().version;
    expect((await security.client.post(api(`/policies/${policyId}/versions/1/publish`), undefined, ifMatch(current))).statusCode).toBe(200);
  });

  it('counts drift: decisions the rules in force now decide otherwise than recorded, the registry having moved', async () => {
    const removed = await admin.client.delete(api(`/agents/${agentB}/permissions/${bindings['Replay B:email.send_message']}?reason=${encodeURIComponent('No more mail')}`));
    expect(removed.statusCode, removed.body).toBe(204);
    const r = (await replay(2, { from, to })).json();
    // B's email is denied now without its binding: recorded allow, now deny; the draft's deny changes nothing more.
    expect(r).toMatchObject({ replayed: 8, drift: 1, changed: 5 });
    expect(r.drift_transitions).toEqual([{ from: 'allow', to: 'deny', count: 1 }]);
    expect(r.transitions).toEqual([
      { from: 'allow', to: 'require_approval', count: 3 },
      { from: 'allow', to: 'deny', count: 1 },
      { from: 'deny', to: 'allow', count: 1 },
    ]);
    const back = await admin.client.post(api(`/agents/${agentB}/permissions`), { target_kind: 'tool', target_id: tools['email.send_message'], actions: ['invoke'] });
    expect(back.statusCode).toBe(201);
  });

  it('replays with the agent as recorded, and counts actions without recorded facts (decided before migration 0021) as such', async () => {
    const rule = [{ id: 'no-critical-agents', effect: 'deny', reason_code: 'CRITICAL_AGENT', conditions: [{ field: 'agent.criticality', op: 'eq', value: 'critical' }] }];
    const current = (await admin.client.get(api(`/policies/${policyId}`))).json().version;
    const v3 = await developer.client.post(api(`/policies/${policyId}/versions`), { rules: rule, change_note: 'Critical agents stop' }, ifMatch(current));
    expect(v3.statusCode, v3.body).toBe(201);
    const patched = await admin.client.patch(api(`/agents/${agentA}`), { criticality: 'critical' });
    expect(patched.statusCode, patched.body).toBe(200);

    // With facts, agent A replays as it was (low): nothing the criticality rule changes.
    const withFacts = (await replay(3, { from, to, agent_id: agentA })).json();
    expect(withFacts).toMatchObject({ replayed: 6, without_facts: 0 });
    expect(withFacts.by_rule.find((x: { rule_id: string }) => x.rule_id === 'no-critical-agents')).toBeUndefined();

    // Without them (as actions decided before the migration), the agent is read as it is now.
    await asOwner(t, (c) => c.query(`update action_requests set decision_facts = null where id = any($1)`, [[...ids['a:lookup5']!, ...ids['a:lookup1']!]]));
    const without = (await replay(3, { from, to, agent_id: agentA })).json();
    expect(without).toMatchObject({ replayed: 6, without_facts: 2 });
    expect(without.by_rule.find((x: { rule_id: string }) => x.rule_id === 'no-critical-agents')).toMatchObject({ source: 'version', decisions_changed: 2 });
    const changedIds = without.examples.filter((e: { reason_codes_after: string[] }) => e.reason_codes_after.includes('CRITICAL_AGENT')).map((e: { action_id: string }) => e.action_id);
    expect(changedIds.sort()).toEqual([...ids['a:lookup5']!, ...ids['a:lookup1']!].sort());
    await admin.client.patch(api(`/agents/${agentA}`), { criticality: 'low' });
  });

  it('counts decisions that read parameters stored redacted as inexact', async () => {
    const start = (tick(), clock.now().toISOString());
    await submit(email, 'r:email'); // the address is stored as [redacted:email]
    await submit(lookup('5', { api_key: 'AKIAIOSFODNN7EXAMPLE' }), 'r:secret'); // denied SECRET_DETECTED; stored [redacted:secret]
    await submit(lookup('5'), 'r:plain');
    const settings = await admin.client.patch(api('/settings'), { content_retention: 'metadata_only' });
    expect(settings.statusCode, settings.body).toBe(200);
    expect((await submit(lookup('7'), 'r:withheld')).decision).toBe('allow'); // parameters stored as { redacted: 'metadata_only' }
    await admin.client.patch(api('/settings'), { content_retention: 'redacted_excerpts' });
    tick();
    const end = clock.now().toISOString();

    // Draft 2 reads customer_id: the secret's decision (the scan saw a value not kept) and the withheld one are inexact.
    const v2 = (await replay(2, { from: start, to: end })).json();
    expect(v2).toMatchObject({ replayed: 4, inexact: 2 });
    // A rule on the address: the redacted email is inexact too.
    const current = (await admin.client.get(api(`/policies/${policyId}`))).json().version;
    const byAddress = [{ id: 'mail-outside', effect: 'deny', reason_code: 'MAIL_OUTSIDE', conditions: [{ field: 'action.parameters.to', op: 'matches', value: '@example\\.com$' }] }];
    const v4 = await developer.client.post(api(`/policies/${policyId}/versions`), { rules: byAddress, change_note: 'By address' }, ifMatch(current));
    expect(v4.statusCode, v4.body).toBe(201);
    const r = (await replay(4, { from: start, to: end })).json();
    expect(r).toMatchObject({ replayed: 4, inexact: 3 });
    // Its rule reads what was stored, [redacted:email], and does not match: the change it would make is missed, hence inexact.
    expect(r.changed).toBe(0);
  });

  it('replays a flow rule with the session facts recorded for each decision', async () => {
    const start = (tick(), clock.now().toISOString());
    for (let i = 0; i < 3; i++) expect((await submit(lookup('5'), 's:lookup', 'replay-session')).decision).toBe('allow');
    tick();
    const end = clock.now().toISOString();
    const current = (await admin.client.get(api(`/policies/${policyId}`))).json().version;
    const flow = [
      {
        id: 'third-lookup',
        effect: 'deny',
        reason_code: 'TOO_MANY_LOOKUPS',
        conditions: [
          { field: 'tool.key', op: 'eq', value: 'crm.lookup_customer' },
          { field: 'session.same_tool_calls', op: 'gte', value: 2 },
        ],
      },
    ];
    const v5 = await developer.client.post(api(`/policies/${policyId}/versions`), { rules: flow, change_note: 'Two lookups per session' }, ifMatch(current));
    expect(v5.statusCode, v5.body).toBe(201);
    const r = (await replay(5, { from: start, to: end })).json();
    expect(r).toMatchObject({ replayed: 3, changed: 1, without_facts: 0 });
    expect(r.examples).toEqual([expect.objectContaining({ action_id: ids['s:lookup']![2], from: 'allow', to: 'deny', reason_codes_after: ['TOO_MANY_LOOKUPS'] })]);
  });

  it('gives at most 50 examples, the oldest changes first', async () => {
    const start = (tick(), clock.now().toISOString());
    for (let i = 0; i < 55; i++) await submit(email, 'x:email');
    tick();
    const r = (await replay(2, { from: start, to: clock.now().toISOString() })).json();
    expect(r).toMatchObject({ replayed: 55, changed: 55, transitions: [{ from: 'allow', to: 'deny', count: 55 }] });
    expect(r.examples.map((e: { action_id: string }) => e.action_id)).toEqual(ids['x:email']!.slice(0, 50));
  });

  it('replays an inactive policy as if it were active, and says so', async () => {
    const p = (await developer.client.post(api('/policies'), { key: 'replay-inactive', name: 'Inactive', rules: DRAFT })).json();
    expect((await security.client.post(api(`/policies/${p.id}/status`), { status: 'inactive' }, ifMatch(1))).statusCode).toBe(200);
    const r = (await replay(1, { from, to }, developer, p.id)).json();
    expect(r).toMatchObject({ policy_status: 'inactive', replayed_as_active: true, published_version: null, replayed: 8 });
    expect(r.by_rule.map((x: { rule_id: string }) => x.rule_id).sort()).toEqual(['freeze-email', 'review-lookup-7', 'tag-lookup-1']);
  });

  it('answers 404 across organisations, 403 without action:test, 422 for bad windows', async () => {
    expect((await replay(1, { from, to }, other)).statusCode).toBe(404);
    expect((await replay(1, { from, to }, developer, otherPolicy)).statusCode).toBe(404);
    expect((await replay(1, { from, to, agent_id: otherAgent })).statusCode).toBe(404);
    expect((await replay(99, { from, to })).statusCode).toBe(404);
    // The other organisation's own replay sees only its own action.
    expect((await replay(1, { from, to }, other, otherPolicy)).json()).toMatchObject({ replayed: 1, changed: 1 });

    const forbidden = await replay(2, { from, to }, viewer);
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json().error.code).toBe('forbidden');

    expectValidation(await replay(2, { from: to, to: from }), 'to');
    expectValidation(await replay(2, { from, to: from }), 'to');
    expectValidation(await replay(2, { from: '2026-01-01T00:00:00Z', to: '2026-06-01T00:00:00Z' }), 'from');
    expectValidation(await replay(2, { from: 'yesterday' }), 'from');
    expectValidation(await replay(2, { to }), 'from');
  });

  it('refuses a window holding more decisions than one replay covers, asking for a narrower one', async () => {
    const actor = { kind: 'person', orgId: admin.tenant.id, userId: developer.userId } as unknown as ActorPrincipal;
    const req = { id: 'test', principal: actor, server: t.app } as unknown as FastifyRequest;
    const run = (maxDecisions: number) =>
      replayVersion(t.app.deps.db, t.app.deps.snapshots, req, actor, policyId, 2, { from, to }, clock.now(), { ...REPLAY_LIMITS, maxDecisions, pageSize: 3 });
    await expect(run(7)).rejects.toMatchObject({ code: 'validation_failed', status: 422, message: expect.stringMatching(/more than 7 recorded decisions.*narrower window/) });
    // At the bound it runs, read three at a time.
    expect(await run(8)).toMatchObject({ replayed: 8 });
  });

  it(`runs at most ${MAX_CONCURRENT_REPLAYS} replays at once in a process, refusing another with 503 until one has finished`, async () => {
    const actor = { kind: 'person', orgId: admin.tenant.id, userId: developer.userId } as unknown as ActorPrincipal;
    const req = { id: 'test', principal: actor, server: t.app } as unknown as FastifyRequest;
    const run = () => replayVersion(t.app.deps.db, t.app.deps.snapshots, req, actor, policyId, 2, { from, to }, clock.now(), { ...REPLAY_LIMITS, pageSize: 1 });
    const started = Array.from({ length: MAX_CONCURRENT_REPLAYS + 1 }, () => run());
    const settled = await Promise.allSettled(started);
    expect(settled.slice(0, MAX_CONCURRENT_REPLAYS).every((x) => x.status === 'fulfilled')).toBe(true);
    expect(settled.at(-1)).toMatchObject({ status: 'rejected', reason: { code: 'service_unavailable', status: 503 } });
    // Once they have finished, a replay runs again.
    expect(await run()).toMatchObject({ replayed: 8 });
  });

  it('takes session facts in a simulation', async () => {
    const flow = [
      {
        id: 'after-untrusted',
        effect: 'require_approval',
        reason_code: 'AFTER_UNTRUSTED',
        conditions: [{ field: 'session.untrusted_content', op: 'eq', value: true }],
      },
    ];
    const base = { agent_id: agentA, ...lookup('5'), draft_rules: flow };
    const without = await developer.client.post(api('/policies/simulate'), base);
    expect(without.statusCode, without.body).toBe(200);
    expect(without.json().decision).toBe('allow');
    const tainted = await developer.client.post(api('/policies/simulate'), { ...base, session: { untrusted_content: true, max_classification: 'regulated', tools: { 'web.fetch': 2 }, calls: 2 } });
    expect(tainted.json()).toMatchObject({ decision: 'require_approval', reason_codes: ['AFTER_UNTRUSTED'] });
    const counted = await developer.client.post(api('/policies/simulate'), {
      ...base,
      draft_rules: [{ id: 'budget', effect: 'deny', reason_code: 'BUDGET', conditions: [{ field: 'session.same_tool_calls', op: 'gte', value: 3 }] }],
      session: { tools: { 'crm.lookup_customer': 3 }, calls: 3 },
    });
    expect(counted.json()).toMatchObject({ decision: 'deny', reason_codes: ['BUDGET'] });
    // calls defaults to the sum of the tools' counts.
    const budget = [{ id: 'calls', effect: 'deny', reason_code: 'CALL_BUDGET', conditions: [{ field: 'session.calls', op: 'gte', value: 3 }] }];
    const summed = await developer.client.post(api('/policies/simulate'), { ...base, draft_rules: budget, session: { tools: { 'web.fetch': 2, 'crm.lookup_customer': 1 } } });
    expect(summed.json()).toMatchObject({ decision: 'deny', reason_codes: ['CALL_BUDGET'] });
    const under = await developer.client.post(api('/policies/simulate'), { ...base, draft_rules: budget, session: { tools: { 'web.fetch': 2 } } });
    expect(under.json().decision).toBe('allow');
    expectValidation(await developer.client.post(api('/policies/simulate'), { ...base, session: { max_classification: 'secretish' } }), 'session.max_classification');
  });
});

describe('policy replay on the embedded database', () => {
  it('reads the recorded decisions through the same cursor on PGlite', async () => {
    const e = await startEmbeddedApp();
    try {
      const admin = await onboardAdmin(e.app, 'Embedded');
      const developer = await addMember(e.app, admin.client, ['agent_developer']);
      const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
      const agentId = (await admin.client.post(api('/agents'), { name: 'Embedded agent' })).json().id;
      const mail = tools.find((x) => x.tool_key === 'email.send_message')!.id;
      expect((await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: mail, actions: ['invoke'] })).statusCode).toBe(201);
      const from = new Date(Date.now() - 1000).toISOString();
      for (let i = 0; i < 3; i++) {
        const res = await admin.client.post(api('/actions/console'), { agent_id: agentId, tool: 'email.send_message', target: 'mail://x', parameters: { subject: 's' } }, { 'idempotency-key': `embedded-${i}-replay` });
        expect(res.json().decision.decision).toBe('allow');
      }
      const policy = (await developer.client.post(api('/policies'), { key: 'embedded-freeze', name: 'Freeze', rules: DRAFT })).json();
      const res = await developer.client.post(api(`/policies/${policy.id}/versions/1/replay`), { from });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ replayed: 3, changed: 3, transitions: [{ from: 'allow', to: 'deny', count: 3 }] });
    } finally {
      await e.close();
    }
  });
});

describe('replay: what a rule set reads of parameters and what storage lost', () => {
  const compiled = (conditions: unknown[]) => compileRules([{ id: 'r', effect: 'deny', reason_code: 'R_CODE', conditions: conditions as never }]);

  it('finds the parameter paths rules read, in fields and CEL', () => {
    expect(parameterReads(compiled([{ field: 'action.parameters.a.b', op: 'eq', value: 1 }]))).toMatchObject({ all: false, paths: new Set(['a.b']), prefixes: new Set(['a']) });
    expect(parameterReads(compiled([{ field: 'action.amount', op: 'gt', value: 1 }])).paths).toEqual(new Set(['amount']));
    expect(parameterReads(compiled([{ op: 'cel', value: 'has(action.parameters.to) && action.currency == "EUR"' }])).paths).toEqual(new Set(['to', 'currency']));
    expect(parameterReads(compiled([{ op: 'cel', value: 'size(action.parameters) > 2' }])).all).toBe(true);
    expect(parameterReads(compiled([{ field: 'action.parameters', op: 'exists' }])).all).toBe(true);
    expect(parameterReads(compiled([{ field: 'tool.key', op: 'eq', value: 'x' }]))).toMatchObject({ all: false, paths: new Set() });
  });

  it('tells a decision that read a redacted or withheld value from one that did not', () => {
    const reads = parameterReads(compiled([{ field: 'action.parameters.to', op: 'exists' }]));
    expect(readsLostValue(reads, storedParameters({ to: '[redacted:email]', subject: 'x' }))).toBe(true);
    expect(readsLostValue(reads, storedParameters({ to: 'ok', cc: ['[redacted:email]'] }))).toBe(false);
    expect(readsLostValue(reads, storedParameters({ to: { inner: 'a [redacted:email] b' } }))).toBe(true);
    expect(readsLostValue(reads, storedParameters({ redacted: 'metadata_only' }))).toBe(true);
    expect(readsLostValue(parameterReads(), storedParameters({ redacted: 'metadata_only' }))).toBe(false);
    // A masked secret: the scan itself read a value that was not kept.
    expect(readsLostValue(parameterReads(), storedParameters({ key: '[redacted:secret]' }))).toBe(true);
    expect(storedParameters({ redacted: 'metadata_only' }).parameters).toEqual({});
    const above = parameterReads(compiled([{ field: 'action.parameters.to', op: 'exists' }]));
    expect(readsLostValue(above, storedParameters({ to: { address: '[redacted:email]' } }))).toBe(true);
  });

  it('lists at most 100 agents with changes, most changes first, and counts them all', () => {
    const decision = (d: 'allow' | 'deny') => ({ decision: d, reasonCodes: [d === 'allow' ? 'PERMISSION_GRANTED' : 'X_DENIED'], approvalsRequired: 0, trace: [] });
    const tally = new ReplayTally('p');
    for (let a = 0; a < 150; a++) {
      for (let k = 0; k <= a % 3; k++) {
        tally.add({
          id: `${a}-${k}`,
          agentId: `agent-${String(a).padStart(3, '0')}`,
          tool: 't',
          createdAt: new Date(0),
          recorded: 'allow',
          before: decision('allow'),
          after: decision('deny'),
          inexact: false,
          withoutFacts: false,
        });
      }
    }
    const r = tally.result();
    expect(r.agents_changed).toBe(150);
    expect(r.by_agent).toHaveLength(100);
    expect(r.by_agent.slice(0, 50).every((x) => x.changed === 3)).toBe(true);
    expect(r.by_agent[99]!.changed).toBe(2);
    expect(r.examples).toHaveLength(50);
    expect(r.changed).toBe(300);
  });
});
