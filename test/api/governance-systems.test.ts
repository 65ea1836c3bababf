import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { openFinding } from '../../api/modules/findings/index.js';
import { CATALOGUE } from '../../api/modules/governance/index.js';
import { addMember, api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * Remediation tasks and the AI-system register on real PostgreSQL through the API: tasks hold their control
 * unmet while open, move only forward, and a classification opens one task per evidence gap of the agent's class,
 * never twice. Frameworks, mappings and exceptions are in governance.test.ts.
 */

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
type Member = Awaited<ReturnType<typeof addMember>>;
type Task = { id: string; status: string; control_id: string | null; agent_id: string | null; gap: string | null; priority: string; source: string; [k: string]: unknown };
type Gap = { key: string; control_id: string; control_key: string; why: string; exception_id: string | null; remediation_task_id: string | null };
type System = { agent_id: string; classification: string; rationale: string | null; gaps: Gap[]; remediation_tasks?: Task[]; [k: string]: unknown };

const control = (key: string) => CATALOGUE.byKey.get(key)!;
const ENV = { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' };
let keyN = 0;
const key = () => `govsys-${Date.now()}-${++keyN}`;

describe('governance: remediation and the AI-system register', () => {
  const clock = new TestClock();
  let t: TestApp;
  let admin: Admin;
  let sec: Member;
  let auditor: Member;
  let viewer: Member;
  let other: Admin;
  let tools: Record<string, string>;

  beforeAll(async () => {
    t = await startTestApp({ clock, env: ENV });
    admin = await onboardAdmin(t.app, 'Register Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    sec = await addMember(t.app, admin.client, ['security_admin']);
    auditor = await addMember(t.app, admin.client, ['auditor']);
    viewer = await addMember(t.app, admin.client, ['viewer']);
    other = await onboardAdmin(t.app, 'Other Org');
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string; id: string }) => [x.tool_key, x.id]));
  });
  afterAll(async () => t?.close());

  const newAgent = async (name: string, body: Record<string, unknown> = {}) => {
    clock.advance(1);
    const res = await admin.client.post(api('/agents'), { name, ...body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const submit = async (agentId: string, body: Record<string, unknown>) => {
    const res = await admin.client.post(api('/actions/console'), { ...body, agent_id: agentId }, { 'idempotency-key': key() });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const createTask = (client: Client, body: Record<string, unknown>) => client.post(api('/governance/remediation'), { title: 'Put the control right', ...body });
  const patch = (client: Client, id: string, body: Record<string, unknown>) => client.patch(api(`/governance/remediation/${id}`), body);
  const classify = (client: Client, agentId: string, classification: string, rationale = 'Assessed against the organisation’s criteria.') =>
    client.post(api(`/governance/systems/${agentId}/classify`), { classification, rationale });
  const statusOf = async (controlKey: string) => {
    const c = control(controlKey);
    const f = (await admin.client.get(api('/governance/frameworks'))).json().items.find((x: { key: string }) => x.key === c.framework);
    return f.controls.find((x: { id: string }) => x.id === c.id) as { status: string; why: string };
  };
  const register = async (client: Client = admin.client, query = ''): Promise<{ items: System[]; next_cursor: string | null }> => {
    const res = await client.get(api(`/governance/systems${query}`));
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const tasksOf = async (agentId: string): Promise<Task[]> => (await admin.client.get(api(`/governance/remediation?agent_id=${agentId}&limit=200`))).json().items;

  describe('remediation tasks', () => {
    let agentId: string;
    let findingId: string;

    beforeAll(async () => {
      agentId = await newAgent('Remediated agent');
      const res = await admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: 'tool', target_id: tools['crm.lookup_customer'], actions: ['invoke'], constraints: {} });
      expect(res.statusCode).toBe(201);
      await submit(agentId, { tool: 'crm.lookup_customer', target: 'crm://customers/1', parameters: {} });
      // A finding to link a task to, opened as a detector (discovery's reconciliation) would.
      findingId = (
        await inScope(t.database.db, { orgId: admin.tenant.id }, (tx) =>
          openFinding(tx, admin.tenant.id, { category: 'tool_poisoning', severity: 'medium', title: 'A finding', description: 'To remediate.', evidence: {}, dedupe_key: 'rem-1' }),
        )
      ).id;
    });

    it('opens a task: while open or in progress its control is not met, done puts it back; audited', async () => {
      expect((await statusOf('eu-ai-act:Art.12')).status).toBe('met');
      const res = await createTask(sec.client, {
        title: 'Keep decision records for the batch jobs',
        description: 'The nightly batch bypasses the gateway.',
        control_id: control('eu-ai-act:Art.12').id,
        agent_id: agentId,
        finding_id: findingId,
        assignee_email: viewer.email,
        due_at: '2026-12-31T00:00:00.000Z',
        priority: 'high',
      });
      expect(res.statusCode, res.body).toBe(201);
      const task = res.json();
      expect(task).toEqual({
        id: expect.any(String),
        title: 'Keep decision records for the batch jobs',
        description: 'The nightly batch bypasses the gateway.',
        control_id: control('eu-ai-act:Art.12').id,
        control_key: 'eu-ai-act:Art.12',
        agent_id: agentId,
        finding_id: findingId,
        assignee_email: viewer.email,
        due_at: '2026-12-31T00:00:00.000Z',
        priority: 'high',
        status: 'open',
        source: 'manual',
        gap: null,
        created_by: sec.userId,
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
        closed_at: null,
        version: 1,
      });
      expect(await statusOf('eu-ai-act:Art.12')).toEqual(
        expect.objectContaining({ status: 'not_met', why: `open remediation task "Keep decision records for the batch jobs" (${task.id})` }),
      );
      clock.advance(60);
      const started = await patch(sec.client, task.id, { status: 'in_progress' });
      expect(started.json()).toMatchObject({ status: 'in_progress', closed_at: null, version: 2, updated_at: clock.now().toISOString() });
      expect((await statusOf('eu-ai-act:Art.12')).status).toBe('not_met');
      clock.advance(60);
      const done = await patch(sec.client, task.id, { status: 'done' });
      expect(done.json()).toMatchObject({ status: 'done', closed_at: clock.now().toISOString(), version: 3 });
      expect((await statusOf('eu-ai-act:Art.12')).status).toBe('met');
      const audit = (await admin.client.get(api(`/audit?target_id=${task.id}`))).json().items.map((e: { action: string; details: unknown }) => [e.action, e.details]);
      expect(audit).toEqual([
        ['remediation.updated', { status: { from: 'in_progress', to: 'done' } }],
        ['remediation.updated', { status: { from: 'open', to: 'in_progress' } }],
        ['remediation.created', expect.objectContaining({ title: 'Keep decision records for the batch jobs', priority: 'high' })],
      ]);
    });

    it.each<[string, string[], string, number]>([
      ['open to done, skipping the work', [], 'done', 409],
      ['in_progress back to open', ['in_progress'], 'open', 409],
      ['done to anything', ['in_progress', 'done'], 'cancelled', 409],
      ['cancelled to anything', ['cancelled'], 'in_progress', 409],
      ['open to cancelled', [], 'cancelled', 200],
      ['in_progress to cancelled', ['in_progress'], 'cancelled', 200],
    ])('moves %s: %i', async (_what, path, to, expected) => {
      const task = (await createTask(admin.client, {})).json();
      for (const step of path) expect((await patch(admin.client, task.id, { status: step })).statusCode).toBe(200);
      const res = await patch(admin.client, task.id, { status: to });
      expect(res.statusCode, res.body).toBe(expected);
      if (expected === 409) {
        const from = path.at(-1) ?? 'open';
        expect(res.json().error).toMatchObject({ code: 'conflict', details: { field: 'status', from, to, allowed: { open: ['in_progress', 'cancelled'], in_progress: ['done', 'cancelled'], done: [], cancelled: [] }[from] } });
      } else {
        expect(res.json()).toMatchObject({ status: 'cancelled', closed_at: expect.any(String) });
      }
    });

    it('changes the assignee (an empty one clears it), writes nothing when nothing changes, and a closed task changes no more', async () => {
      const task = (await createTask(admin.client, {})).json();
      expect((await patch(admin.client, task.id, { assignee_email: sec.email })).json()).toMatchObject({ assignee_email: sec.email, version: 2 });
      expect((await patch(admin.client, task.id, { assignee_email: null, status: null })).json()).toMatchObject({ assignee_email: sec.email, version: 2 });
      expect((await patch(admin.client, task.id, { status: 'open' })).json()).toMatchObject({ status: 'open', version: 2 });
      expect((await patch(admin.client, task.id, { assignee_email: '' })).json()).toMatchObject({ assignee_email: null, version: 3 });
      await patch(admin.client, task.id, { status: 'cancelled' });
      const late = await patch(admin.client, task.id, { assignee_email: sec.email });
      expect(late.statusCode).toBe(409);
      expect(late.json().error.code).toBe('conflict');
      expectValidation(await patch(admin.client, task.id, { assignee_email: 'nobody' }), 'assignee_email');
      expectValidation(await patch(admin.client, task.id, { status: 'closed' }), 'status');
    });

    it('validates a new task and its references, which must be the organisation’s', async () => {
      expectValidation(await createTask(admin.client, { title: 'Fix' }), 'title');
      expectValidation(await createTask(admin.client, { description: 'x'.repeat(4001) }), 'description');
      expectValidation(await createTask(admin.client, { priority: 'urgent' }), 'priority');
      expectValidation(await createTask(admin.client, { due_at: 'tomorrow' }), 'due_at');
      // An offset must not carry a time outside the years ISO text can say once in UTC.
      expectValidation(await createTask(admin.client, { due_at: '9999-12-31T23:59:59-23:59' }), 'due_at');
      expectValidation(await createTask(admin.client, { due_at: '0000-01-01T00:00:00+14:00' }), 'due_at');
      expectValidation(await createTask(admin.client, { assignee_email: 'someone' }), 'assignee_email');
      expectValidation(await createTask(admin.client, { control_id: randomUUID() }), 'control_id');
      const foreignAgent = (await other.client.post(api('/agents'), { name: 'Foreign agent' })).json().id;
      expectValidation(await createTask(admin.client, { agent_id: foreignAgent }), 'agent_id');
      const res = await createTask(admin.client, { finding_id: randomUUID(), agent_id: randomUUID() });
      expectValidation(res, 'finding_id');
      expectValidation(res, 'agent_id');
      expect((await createTask(admin.client, {})).json()).toMatchObject({ priority: 'medium', description: '', control_id: null, control_key: null });
    });

    it('lists tasks newest first, filtered by status and agent, paged; another organisation’s are 404 and unseen', async () => {
      const mine = await tasksOf(agentId);
      expect(mine.map((x) => x.agent_id)).toEqual(mine.map(() => agentId));
      expect(mine.length).toBe(1);
      const cancelled = (await auditor.client.get(api('/governance/remediation?status=cancelled'))).json().items as Task[];
      expect(cancelled.length).toBeGreaterThanOrEqual(3);
      expect(cancelled.every((x) => x.status === 'cancelled')).toBe(true);
      const all = (await auditor.client.get(api('/governance/remediation?limit=200'))).json().items as Task[];
      const first = (await auditor.client.get(api('/governance/remediation?limit=3'))).json();
      const second = (await auditor.client.get(api(`/governance/remediation?limit=3&cursor=${first.next_cursor}`))).json();
      expect([...first.items, ...second.items].map((x: Task) => x.id)).toEqual(all.slice(0, 6).map((x) => x.id));
      expectValidation(await auditor.client.get(api('/governance/remediation?status=closed')), 'query.status');
      expectValidation(await auditor.client.get(api('/governance/remediation?agent_id=nope')), 'query.agent_id');
      expect((await other.client.get(api('/governance/remediation'))).json().items).toEqual([]);
      expect((await patch(other.client, all[0]!.id, { status: 'cancelled' })).statusCode).toBe(404);
      expect((await patch(admin.client, randomUUID(), { status: 'cancelled' })).statusCode).toBe(404);
    });

    it('needs governance:write to open or change a task, governance:read to list them', async () => {
      const denied = await createTask(auditor.client, {});
      expect(denied.statusCode).toBe(403);
      expect(denied.json().error.details).toEqual({ required_permission: 'governance:write' });
      const task = (await tasksOf(agentId))[0]!;
      expect((await patch(auditor.client, task.id, { status: 'cancelled' })).statusCode).toBe(403);
      expect((await viewer.client.get(api('/governance/remediation'))).statusCode).toBe(403);
    });
  });

  describe('classification and the register', () => {
    let bare: string;

    beforeAll(async () => {
      bare = await newAgent('Bare agent');
    });

    it('lists every agent, unclassified until classified, without gaps', async () => {
      const { items } = await register(auditor.client, '?limit=200');
      const row = items.find((s) => s.agent_id === bare)!;
      expect(row).toEqual({
        agent_id: bare,
        agent_name: 'Bare agent',
        agent_slug: 'bare-agent',
        environment: 'development',
        agent_status: 'active',
        classification: 'unclassified',
        rationale: null,
        classified_at: null,
        classified_by: null,
        gaps: [],
      });
      // Another organisation's register lists its own agents only.
      const foreign = (await register(other.client, '?limit=200')).items.map((s) => s.agent_id);
      expect(foreign).not.toContain(bare);
    });

    it('classifies a bare agent high: a task per gap, human oversight among them; audited, with evidence', async () => {
      const res = await classify(sec.client, bare, 'high', 'Decides refunds for customers without a person in the loop.');
      expect(res.statusCode, res.body).toBe(200);
      const out = res.json() as System;
      expect(out).toMatchObject({
        agent_id: bare,
        classification: 'high',
        rationale: 'Decides refunds for customers without a person in the loop.',
        classified_at: clock.now().toISOString(),
        classified_by: sec.userId,
      });
      const expected = ['accountable_owner', 'transparency', 'owner_attestation', 'risk_management', 'gateway_enforcement', 'record_keeping', 'human_oversight'];
      // gateway_enforced is true by default: no gap there.
      expect(out.gaps.map((g) => g.key)).toEqual(expected.filter((k) => k !== 'gateway_enforcement'));
      expect(out.remediation_tasks).toHaveLength(6);
      const oversight = out.remediation_tasks!.find((x) => x.gap === 'human_oversight')!;
      expect(oversight).toMatchObject({
        title: 'No human-oversight evidence: Bare agent',
        control_id: control('eu-ai-act:Art.14').id,
        control_key: 'eu-ai-act:Art.14',
        agent_id: bare,
        priority: 'high',
        status: 'open',
        source: 'classification',
        created_by: sec.userId,
      });
      expect(oversight.description).toContain('no approval decided by a person for the agent in the last 90 days');
      for (const gap of out.gaps) {
        const task = out.remediation_tasks!.find((x) => x.gap === gap.key)!;
        expect(gap).toMatchObject({ exception_id: null, remediation_task_id: task.id, control_id: task.control_id });
      }
      const evidence = (await admin.client.get(api(`/evidence?event_type=ai_system_classification&agent_id=${bare}`))).json().items;
      expect(evidence).toHaveLength(1);
      expect(evidence[0].payload).toMatchObject({
        classification: { from: 'unclassified', to: 'high' },
        gaps: out.gaps.map((g) => g.key),
        remediation_task_ids: out.remediation_tasks!.map((x) => x.id),
        actor_id: sec.userId,
      });
      const audit = (await admin.client.get(api(`/audit?action=ai_system.classified&target_id=${bare}`))).json().items;
      expect(audit).toHaveLength(1);
      // The organisation's Art.14 is now held unmet by the open task.
      expect((await statusOf('eu-ai-act:Art.14')).why).toContain(oversight.id);
    });

    it('opens nothing twice when classified again; the register names the open tasks', async () => {
      const before = await tasksOf(bare);
      const again = (await classify(admin.client, bare, 'high', 'Reviewed again, same conclusion.')).json() as System;
      expect(again.remediation_tasks).toEqual([]);
      expect(again.gaps.map((g) => g.remediation_task_id).sort()).toEqual(before.map((x) => x.id).sort());
      expect((await tasksOf(bare)).map((x) => x.id).sort()).toEqual(before.map((x) => x.id).sort());
      // Concurrent classifications of one agent queue on it: still no duplicate.
      await Promise.all([classify(admin.client, bare, 'high'), classify(sec.client, bare, 'high')]);
      expect(await tasksOf(bare)).toHaveLength(before.length);
      const row = (await register(auditor.client, '?classification=high')).items.find((s) => s.agent_id === bare)!;
      expect(row).toMatchObject({ classification: 'high', rationale: 'Assessed against the organisation’s criteria.' });
      expect(row.gaps.every((g) => g.remediation_task_id !== null)).toBe(true);
      // A task closed opens the gap again, and the next classification opens a new task for it.
      const oversight = before.find((x) => x.gap === 'human_oversight')!;
      await patch(admin.client, oversight.id, { status: 'cancelled' });
      const gap = (await register(auditor.client, '?classification=high')).items.find((s) => s.agent_id === bare)!.gaps.find((g) => g.key === 'human_oversight')!;
      expect(gap.remediation_task_id).toBeNull();
      const third = (await classify(admin.client, bare, 'high')).json() as System;
      expect(third.remediation_tasks!.map((x) => x.gap)).toEqual(['human_oversight']);
    });

    it('clears the gaps of a high system as the evidence and the registry fill in', async () => {
      const agent = await newAgent('Complete agent', {
        purpose: 'Pays approved supplier invoices',
        description: 'Finance agent acting through the gateway',
        owners: [{ name: 'Ada Owner', email: 'ada.owner@example.com', owner_type: 'accountable' }],
      });
      await admin.client.post(api(`/agents/${agent}/permissions`), { target_kind: 'tool', target_id: tools['payments.create_payment'], actions: ['invoke'], constraints: { max_amount: 500, currency: 'EUR' } });
      const keys = async () => (await register(auditor.client, '?limit=200')).items.find((s) => s.agent_id === agent)!.gaps.map((g) => g.key);
      // Limited: owner and purpose are there, nothing to do.
      expect((await classify(admin.client, agent, 'limited')).json()).toMatchObject({ gaps: [], remediation_tasks: [] });
      // A high system also needs a current attestation, a risk score, decisions and a person's approval.
      await admin.client.post(api(`/agents/${agent}/attest`), { statement: 'I own this agent and its registration is accurate.' });
      expect((await admin.client.post(api(`/risks/agents/${agent}/recalculate`))).statusCode).toBe(200);
      const held = await submit(agent, { tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount: 100, currency: 'EUR' } });
      expect(held.decision.decision).toBe('require_approval');
      expect((await sec.client.post(api(`/approvals/${held.approval.id}/decision`), { decision: 'approve', reason: 'Invoice checked.' })).statusCode).toBe(200);
      const high = (await classify(admin.client, agent, 'high', 'Moves money: high risk under our policy.')).json() as System;
      expect(high.gaps).toEqual([]);
      expect(high.remediation_tasks).toEqual([]);
      // Switching gateway enforcement off opens that gap.
      await admin.client.patch(api(`/agents/${agent}`), { gateway_enforced: false });
      expect(await keys()).toEqual(['gateway_enforcement']);
    });

    it('lets an approved exception cover a gap, for the agent or the whole organisation: no task for it', async () => {
      const agent = await newAgent('Excused agent', { purpose: 'Reports', description: 'Reporting agent', owners: [{ name: 'Bo', email: 'bo@example.com' }] });
      const except = async (controlKey: string, agentId: string | null) => {
        const e = (
          await admin.client.post(api('/exceptions'), {
            control_id: control(controlKey).id,
            agent_id: agentId,
            title: `Waive ${controlKey}`,
            justification: 'Read-only reporting agent; the control does not apply for now.',
            owner_email: admin.email,
            expires_at: new Date(clock.now().getTime() + 30 * 86_400_000).toISOString(),
          })
        ).json();
        expect((await sec.client.post(api(`/exceptions/${e.id}/decision`), { decision: 'approve', note: 'Accepted.' })).statusCode).toBe(200);
        return e.id as string;
      };
      const forAgent = await except('eu-ai-act:Art.14', agent);
      const forAll = await except('eu-ai-act:Art.11', null);
      const out = (await classify(admin.client, agent, 'high')).json() as System;
      const byKey = Object.fromEntries(out.gaps.map((g) => [g.key, g]));
      expect(byKey.human_oversight).toMatchObject({ exception_id: forAgent, remediation_task_id: null });
      expect(byKey.owner_attestation).toMatchObject({ exception_id: forAll, remediation_task_id: null });
      expect(out.remediation_tasks!.map((x) => x.gap).sort()).toEqual(['record_keeping', 'risk_management']);
    });

    it('counts an open task opened by hand on the agent and control: the classification opens none beside it', async () => {
      const agent = await newAgent('Tracked agent', { purpose: 'Answers', description: 'Support agent' });
      const manual = (await createTask(admin.client, { title: 'Find an owner for it', control_id: control('iso-42001:A.3').id, agent_id: agent })).json();
      const out = (await classify(admin.client, agent, 'minimal')).json() as System;
      expect(out.gaps).toEqual([expect.objectContaining({ key: 'accountable_owner', remediation_task_id: manual.id })]);
      expect(out.remediation_tasks).toEqual([]);
    });

    it('wants a prohibited system out of service: a critical task while it is active, no gap once suspended', async () => {
      const agent = await newAgent('Scoring agent');
      const out = (await classify(sec.client, agent, 'prohibited', 'Scores citizens’ social behaviour: a prohibited practice.')).json() as System;
      expect(out.gaps.map((g) => g.key)).toEqual(['prohibited_in_service']);
      expect(out.remediation_tasks).toEqual([expect.objectContaining({ priority: 'critical', control_key: 'eu-ai-act:Art.5', gap: 'prohibited_in_service' })]);
      expect((await admin.client.post(api(`/agents/${agent}/suspend`), { reason: 'Prohibited practice', confirm: true })).statusCode).toBe(200);
      const row = (await register(auditor.client, '?classification=prohibited')).items.find((s) => s.agent_id === agent)!;
      expect(row).toMatchObject({ agent_status: 'suspended', gaps: [] });
      // Minimal and limited check less, at lower priority.
      const light = await newAgent('Light agent');
      const minimal = (await classify(sec.client, light, 'minimal')).json() as System;
      expect(minimal.remediation_tasks).toEqual([expect.objectContaining({ gap: 'accountable_owner', priority: 'low' })]);
      // Back to unclassified: no gaps are checked.
      expect((await classify(sec.client, light, 'unclassified')).json()).toMatchObject({ classification: 'unclassified', gaps: [], remediation_tasks: [] });
    });

    it('pages the register in the order agents were registered, and filters by class', async () => {
      const all = (await register(auditor.client, '?limit=200')).items.map((s) => s.agent_id);
      expect(all.length).toBeGreaterThanOrEqual(7);
      const first = await register(auditor.client, '?limit=2');
      const second = await register(auditor.client, `?limit=2&cursor=${encodeURIComponent(first.next_cursor!)}`);
      expect([...first.items, ...second.items].map((s) => s.agent_id)).toEqual(all.slice(0, 4));
      const unclassified = (await register(auditor.client, '?classification=unclassified&limit=200')).items;
      expect(unclassified.every((s) => s.classification === 'unclassified')).toBe(true);
      expect(unclassified.map((s) => s.agent_id)).toContain((await register(auditor.client, '?classification=unclassified&limit=1')).items[0]!.agent_id);
      expectValidation(await auditor.client.get(api('/governance/systems?classification=medium')), 'query.classification');
      // A cursor belongs to its list.
      expect((await auditor.client.get(api(`/governance/systems?classification=high&cursor=${encodeURIComponent(first.next_cursor!)}`))).json().error.code).toBe('invalid_cursor');
    });

    it('answers 404 for another organisation’s agent, 422 for a bad body, 403 without the permission', async () => {
      const foreign = (await other.client.post(api('/agents'), { name: 'Foreign agent' })).json().id;
      expect((await classify(admin.client, foreign, 'high')).statusCode).toBe(404);
      expect((await classify(admin.client, randomUUID(), 'high')).statusCode).toBe(404);
      expectValidation(await admin.client.post(api('/governance/systems/nope/classify'), { classification: 'high', rationale: 'Long enough rationale.' }), 'path.agent_id');
      expectValidation(await classify(admin.client, bare, 'medium'), 'classification');
      expectValidation(await classify(admin.client, bare, 'high', 'too short'), 'rationale');
      expectValidation(await admin.client.post(api(`/governance/systems/${bare}/classify`), { classification: 'high' }), 'rationale');
      const denied = await classify(auditor.client, bare, 'high');
      expect(denied.statusCode).toBe(403);
      expect(denied.json().error.details).toEqual({ required_permission: 'governance:write' });
      expect((await viewer.client.get(api('/governance/systems'))).statusCode).toBe(403);
      // The other organisation's register and tasks are untouched.
      expect((await register(other.client, '?limit=200')).items.map((s) => s.agent_id)).toContain(foreign);
      expect((await register(other.client, '?limit=200')).items.map((s) => s.agent_id)).not.toContain(bare);
      expect((await other.client.get(api('/governance/remediation'))).json().items).toEqual([]);
    });
  });
});
