import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { openFinding } from '../../api/modules/findings/index.js';
import { addMember, api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type Client, type TestApp } from '../support/harness.js';

/**
 * The Agent Risk Score through the API on real PostgreSQL, with the risk jobs run by the app's in-process worker (as
 * `make run` does): every factor on a fixture agent, the spec's MCP trust points, bands and the risk_band filter of
 * GET /agents, recalculation in the background after each kind of change (polled, never forced), the ruleset's
 * audited switch, what-if saving nothing, permissions and isolation.
 */

type Factor = { key: string; weight: number; enabled: boolean; contribution: number; computed: number; why: string; description: string };
type Score = { agent_id: string; score: number; band: string; raw_total: number; factors: Factor[]; inputs: Record<string, any>; computed_at: string; stale: boolean };

describe('risk scores', () => {
  const clock = new TestClock();
  let t: TestApp;
  let owner: pg.Client;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;
  let viewer: Client;
  let org: string;

  beforeAll(async () => {
    t = await startTestApp({ worker: true, clock, env: { JOB_POLL_INTERVAL_SECONDS: '0.5', SESSION_TTL_SECONDS: String(30 * 86_400) } });
    admin = await onboardAdmin(t.app, 'Risky Org');
    org = admin.tenant.id;
    await setPlan(t, org, 'enterprise');
    other = await onboardAdmin(t.app, 'Other Org');
    viewer = (await addMember(t.app, admin.client, ['viewer'])).client;
    owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
  }, 60_000);
  afterAll(async () => {
    await owner?.end();
    await t?.close();
  });

  const ok = async (res: Promise<{ statusCode: number; body: string; json(): any }>, status = 200) => {
    const r = await res;
    expect(r.statusCode, r.body).toBe(status);
    return r.json();
  };
  const newAgent = (body: Record<string, unknown>) => ok(admin.client.post(api('/agents'), body), 201);
  const newTool = (body: Record<string, unknown>) => ok(admin.client.post(api('/tools'), { name: `Tool ${body.tool_key}`, ...body }), 201);
  const newServer = (name: string) => ok(admin.client.post(api('/mcp-servers'), { name, endpoint: `https://${name}.example.com/mcp` }), 201);
  const bind = (agentId: string, targetId: string, targetKind = 'tool') =>
    ok(admin.client.post(api(`/agents/${agentId}/permissions`), { target_kind: targetKind, target_id: targetId, actions: ['invoke'] }), 201);
  const scoreOf = (agentId: string, client = admin.client): Promise<Score> => ok(client.get(api(`/risks/agents/${agentId}`)));
  const factor = (s: Score, key: string) => s.factors.find((f) => f.key === key)!;

  /** Polls the stored score until `done` holds: the background job recalculated it (nobody calls recalculate). */
  async function until(agentId: string, done: (s: Score) => boolean, what: string): Promise<Score> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const s = await scoreOf(agentId);
      if (!s.stale && done(s)) return s;
      if (Date.now() > deadline) throw new Error(`${what}: not recalculated in 20 s; last ${JSON.stringify(s.factors.map((f) => [f.key, f.contribution]))}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** No recalculation of the organisation pending or running (a delayed daily refresh aside). */
  async function settled(orgId: string): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const { rows } = await owner.query(
        `select (select count(*) from risk_stale where org_id = $1)::int as stale,
                (select count(*) from pgboss.job where name = 'risk.recalculate' and data->>'org_id' = $1::text
                   and state in ('created', 'retry', 'active') and start_after <= now())::int as jobs`,
        [orgId],
      );
      if (rows[0].stale === 0 && rows[0].jobs === 0) return;
      if (Date.now() > deadline) throw new Error(`recalculations of ${orgId} still pending: ${JSON.stringify(rows[0])}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** An agent that scores low: 21 points (approval none 10, internal data 2, never attested 6, no identity 3). */
  const quietAgent = (name: string) => newAgent({ name });

  describe('every factor on one fixture agent', () => {
    let fixture: { id: string };
    let server: { id: string };
    let expected: Record<string, number>;

    beforeAll(async () => {
      fixture = await newAgent({
        name: 'Everything agent',
        environment: 'production',
        purpose: 'Pays suppliers and manages the CRM',
        data_classification: 'confidential',
        owners: [{ name: 'Olga Owner', email: 'olga@example.com' }],
        internet_exposure: 'public',
        code_execution: 'privileged',
        persistent_memory: 'unbounded',
        human_approval_coverage: 'none',
      });
      await ok(admin.client.patch(api(`/agents/${fixture.id}`), { gateway_enforced: false }));
      const vault = await ok(admin.client.post(api('/resources/data'), { name: 'Payroll vault', system: 'hr', classification: 'restricted' }), 201);
      const shared = await ok(admin.client.post(api('/resources/credentials'), { name: 'team-key', provider: 'env', secret_path: 'TEAM_KEY', shared: true }), 201);
      server = await newServer('everything-files');
      const tools = [
        await newTool({ tool_key: 'fx.write_note', privilege_class: 'write', credential_ref_id: shared.id }),
        await newTool({ tool_key: 'fx.pay', privilege_class: 'financial' }),
        await newTool({ tool_key: 'fx.grant_role', privilege_class: 'admin' }),
        await newTool({ tool_key: 'files.read_payroll', mcp_server_id: server.id, data_resource_id: vault.id }),
      ];
      for (const tool of tools) await bind(fixture.id, tool.id);
      for (const who of ['ada', 'bob', 'cy']) {
        await ok(admin.client.post(api(`/agents/${fixture.id}/delegations`), { principal_ref: `user:${who}@example.com`, display_name: who, scopes: ['payments'] }), 201);
      }
      await inScope(t.database.db, { orgId: org }, (tx) =>
        openFinding(tx, org, { category: 'owner_attestation', severity: 'high', title: 'Nobody vouches for it', description: 'x', evidence: {}, agent_id: fixture.id, dedupe_key: `f:${fixture.id}` }),
      );
      // A console submission of a tool it is not granted: a denied decision, its detection.
      const denied = await ok(
        admin.client.post(api('/actions/console'), { agent_id: fixture.id, tool: 'crm.lookup_customer', target: 'crm://customers/1', parameters: { customer_id: '1' } }, { 'idempotency-key': randomUUID() }),
      );
      expect(denied.decision.decision).toBe('deny');
      expected = {
        internet_exposure: 12,
        code_execution: 12,
        persistent_memory: 6,
        human_approval_coverage: 10,
        production_environment: 8,
        data_classification: 10,
        write_tools: 5,
        high_impact_tools: 10,
        privileged_tools: 10,
        delegation_breadth: 8,
        gateway_enforcement: 10,
        owner_attestation: 6,
        open_findings: 5,
        detections: 2,
        mcp_trust: 6,
        identity_scoping: 9,
        containment: 0,
      };
    });

    it('POST .../recalculate answers every factor with its contribution and why, the total and the band', async () => {
      const s: Score = await ok(admin.client.post(api(`/risks/agents/${fixture.id}/recalculate`)));
      expect(Object.fromEntries(s.factors.map((f) => [f.key, f.contribution]))).toEqual(expected);
      expect(s.raw_total).toBe(Object.values(expected).reduce((a, b) => a + b, 0));
      expect(s).toMatchObject({ agent_id: fixture.id, score: 100, band: 'critical', stale: false, computed_at: clock.now().toISOString() });
      for (const f of s.factors) expect(f).toMatchObject({ enabled: true, description: expect.any(String), weight: expect.any(Number) });
      const why = Object.fromEntries(s.factors.map((f) => [f.key, f.why]));
      expect(why.data_classification).toMatch(/restricted \(data it reaches: Payroll vault\)/);
      expect(why.write_tools).toMatch(/fx\.write_note/);
      expect(why.high_impact_tools).toMatch(/fx\.pay/);
      expect(why.privileged_tools).toMatch(/fx\.grant_role/);
      expect(why.delegation_breadth).toMatch(/broad: 3 live delegations/);
      expect(why.open_findings).toMatch(/1 open finding \(1 high\).*Nobody vouches for it/);
      expect(why.detections).toMatch(/1 denied decision in the last 7 days/);
      expect(why.mcp_trust).toBe('MCP servers not approved: everything-files unknown +6.');
      expect(why.identity_scoping).toMatch(/no workload identity.*4 of 4 bindings not tied.*team-key/);
      expect(s.inputs).toMatchObject({ environment: 'production', mcp_servers: [{ name: 'everything-files', trust_state: 'unknown' }] });
      // The agent shows the band; GET answers what was stored.
      expect((await ok(admin.client.get(api(`/agents/${fixture.id}`)))).risk_band).toBe('critical');
      expect(await scoreOf(fixture.id)).toEqual(s);
    });

    it('what-if applies every WhatIf field to a copy, answers the difference per factor, and saves nothing', async () => {
      await settled(org);
      const snapshot = async () => {
        const q = async (sql: string) => (await owner.query(sql, [org])).rows;
        return {
          scores: await q('select * from risk_scores where org_id = $1 order by agent_id'),
          history: await q('select * from risk_history where org_id = $1 order by agent_id, day'),
          agents: await q('select * from agents where org_id = $1 order by id'),
          stale: await q('select * from risk_stale where org_id = $1'),
          overrides: await q('select * from risk_factor_overrides where org_id = $1'),
        };
      };
      const before = await snapshot();
      expect(before.scores.length).toBeGreaterThan(0);
      const res = await ok(
        admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), {
          internet_exposure: 'none',
          code_execution: 'none',
          approval_coverage: 'strong',
          persistent_memory: 'none',
          production: false,
          has_high_impact_tools: false,
          has_privileged_tools: false,
          has_write_tools: false,
          gateway_enforced: true,
          attestation_current: true,
          delegation_breadth: 'none',
          max_data_classification: 'internal',
          resolve_findings: true,
          clear_detections: true,
          approve_mcp_servers: true,
          use_scoped_identity: true,
        }),
      );
      expect(res).toMatchObject({ agent_id: fixture.id, current: { score: 100, band: 'critical' }, proposed: { score: 2, band: 'low' }, difference: -98, saved: false });
      expect(res.applied).toHaveLength(16);
      const diff = Object.fromEntries(res.factors.map((f: { key: string; difference: number }) => [f.key, f.difference]));
      expect(diff).toEqual({ ...Object.fromEntries(Object.entries(expected).map(([k, v]) => [k, -v])), data_classification: -8, containment: 0 });
      expect(res.factors.find((f: { key: string }) => f.key === 'data_classification')).toMatchObject({ current: 10, proposed: 2 });
      // A partial what-if: one field.
      const one = await ok(admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), { approve_mcp_servers: true }));
      expect(one).toMatchObject({ applied: ['approve_mcp_servers'], current: { score: 100 }, proposed: { score: 100 } });
      expect(one.factors.find((f: { key: string }) => f.key === 'mcp_trust')).toMatchObject({ current: 6, proposed: 0, difference: -6 });
      // An empty body changes nothing.
      expect(await ok(admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), {}))).toMatchObject({ applied: [], difference: 0 });
      expect(await snapshot()).toEqual(before);
    });

    it('what-if validates its fields (422 in the envelope)', async () => {
      expectValidation(await admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), { internet_exposure: 'everywhere' }), 'internet_exposure');
      expectValidation(await admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), { delegation_breadth: 'wide' }), 'delegation_breadth');
      expectValidation(await admin.client.post(api(`/risks/agents/${fixture.id}/what-if`), { resolve_findings: 'yes' }), 'resolve_findings');
    });

    it('history: one row per day, the day’s last score; days bounded 1-365, default 90', async () => {
      clock.advance(86_400);
      await ok(admin.client.post(api(`/risks/agents/${fixture.id}/recalculate`)));
      const h = await ok(admin.client.get(api(`/risks/agents/${fixture.id}/history`)));
      expect(h.days).toBe(90);
      const today = clock.now().toISOString().slice(0, 10);
      const yesterday = new Date(clock.now().getTime() - 86_400_000).toISOString().slice(0, 10);
      expect(h.items.map((i: { day: string }) => i.day)).toEqual([yesterday, today]);
      expect(h.items.every((i: { score: number; band: string }) => i.score === 100 && i.band === 'critical')).toBe(true);
      expect((await ok(admin.client.get(api(`/risks/agents/${fixture.id}/history?days=1`)))).items.map((i: { day: string }) => i.day)).toEqual([today]);
      expectValidation(await admin.client.get(api(`/risks/agents/${fixture.id}/history?days=0`)), 'query.days');
      expectValidation(await admin.client.get(api(`/risks/agents/${fixture.id}/history?days=366`)), 'query.days');
    });
  });

  it('MCP trust adds exactly +6 unknown, +12 unsigned, +12 quarantined, 0 approved, recalculated after each change', async () => {
    const a = await quietAgent('MCP user');
    const server = await newServer('trusty');
    const tool = await newTool({ tool_key: 'trusty.read', mcp_server_id: server.id });
    await bind(a.id, tool.id);
    await until(a.id, (s) => factor(s, 'mcp_trust').contribution === 6, 'unknown');
    for (const [state, points] of [['unsigned', 12], ['quarantined', 12], ['approved', 0], ['unknown', 6]] as const) {
      await ok(admin.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: state, reason: `now ${state}` }));
      const s = await until(a.id, (x) => factor(x, 'mcp_trust').contribution === points && x.inputs.mcp_servers[0].trust_state === state, state);
      expect(factor(s, 'mcp_trust').why).toBe(points ? `MCP servers not approved: trusty ${state} +${points}.` : 'Every MCP server it uses is approved (trusty).');
    }
  });

  it('bands show on agents and the risk_band filter of GET /agents selects them (low 0-24, medium 25-49, high 50-74, critical 75+)', async () => {
    const low = await quietAgent('Band low'); // 21
    const medium = await newAgent({ name: 'Band medium', internet_exposure: 'controlled' }); // 27
    const high = await newAgent({ name: 'Band high', internet_exposure: 'public', code_execution: 'privileged', persistent_memory: 'unbounded' }); // 51
    const critical = await newAgent({ name: 'Band critical', internet_exposure: 'public', code_execution: 'privileged', persistent_memory: 'unbounded', data_classification: 'restricted' }); // 59 + ...
    await ok(admin.client.patch(api(`/agents/${critical.id}`), { gateway_enforced: false })); // 69
    const fin = (await ok(admin.client.get(api('/tools')))).items.find((x: { tool_key: string }) => x.tool_key === 'payments.create_payment');
    await bind(critical.id, fin.id); // +10 high impact, +3 unscoped binding: 82
    const expected = { [low.id]: [21, 'low'], [medium.id]: [27, 'medium'], [high.id]: [51, 'high'], [critical.id]: [82, 'critical'] } as Record<string, [number, string]>;
    for (const [id, [points, band]] of Object.entries(expected)) {
      await until(id, (s) => s.score === points && s.band === band, `band ${band}`);
    }
    await settled(org);
    for (const band of ['low', 'medium', 'high', 'critical']) {
      const listed = (await ok(admin.client.get(api(`/agents?risk_band=${band}&limit=200`)))).items as Array<{ id: string; risk_band: string }>;
      expect(listed.every((x) => x.risk_band === band), band).toBe(true);
      const ours = Object.entries(expected).filter(([, [, b]]) => b === band).map(([id]) => id);
      expect(listed.map((x) => x.id).filter((id) => expected[id]), band).toEqual(ours);
    }
    expectValidation(await admin.client.get(api('/agents?risk_band=severe')), 'query.risk_band');
  });

  describe('recalculation in the background, without calling recalculate', () => {
    let a: { id: string };
    beforeAll(async () => {
      a = await quietAgent('Changing agent');
      await until(a.id, (s) => s.score === 21, 'first score');
    });

    it('after a binding is added and removed', async () => {
      const fin = (await ok(admin.client.get(api('/tools')))).items.find((x: { tool_key: string }) => x.tool_key === 'payments.create_payment');
      const binding = await bind(a.id, fin.id);
      await until(a.id, (s) => factor(s, 'high_impact_tools').contribution === 10, 'bound');
      expect((await admin.client.delete(api(`/agents/${a.id}/permissions/${binding.id}?reason=not%20needed`))).statusCode).toBe(204);
      await until(a.id, (s) => factor(s, 'high_impact_tools').contribution === 0, 'unbound');
    });

    it('after suspension and restoration (containment)', async () => {
      await ok(admin.client.post(api(`/agents/${a.id}/suspend`), { reason: 'investigating', confirm: true }));
      const s = await until(a.id, (x) => factor(x, 'containment').contribution === -30, 'suspended');
      expect(s).toMatchObject({ score: 0, band: 'low' });
      expect(factor(s, 'containment').why).toBe('Agent is suspended: it cannot act.');
      await ok(admin.client.post(api(`/agents/${a.id}/restore`), { reason: 'cleared', confirm: true }));
      await until(a.id, (x) => factor(x, 'containment').contribution === 0 && x.score === 21, 'restored');
    });

    it('after a finding opens and is triaged', async () => {
      const f = await inScope(t.database.db, { orgId: org }, (tx) =>
        openFinding(tx, org, { category: 'owner_attestation', severity: 'critical', title: 'Unknown owner', description: 'x', evidence: {}, agent_id: a.id, dedupe_key: `t:${a.id}` }),
      );
      await until(a.id, (s) => factor(s, 'open_findings').contribution === 8, 'opened');
      await ok(admin.client.patch(api(`/findings/${f.id}`), { status: 'in_progress' }));
      await ok(admin.client.patch(api(`/findings/${f.id}`), { status: 'resolved', note: 'owner found' }));
      await until(a.id, (s) => factor(s, 'open_findings').contribution === 0, 'resolved');
    });

    it('after the owner attests, and again once the attestation is older than 90 days', async () => {
      await ok(admin.client.post(api(`/agents/${a.id}/attest`), { statement: 'I own this agent and its purpose.' }));
      const s = await until(a.id, (x) => factor(x, 'owner_attestation').contribution === 0, 'attested');
      expect(factor(s, 'owner_attestation').why).toBe('Attested 0 days ago (current up to 90).');
      // An attestation older than 90 days (set as the owner would find it after three months).
      const old = new Date(clock.now().getTime() - 91 * 86_400_000);
      await owner.query('update agents set last_attested_at = $1 where id = $2', [old, a.id]);
      const again = await until(a.id, (x) => factor(x, 'owner_attestation').contribution === 6, 'out of date');
      expect(factor(again, 'owner_attestation').why).toBe('Last attested 91 days ago, more than 90.');
    });

    it('after a discovery run: every agent of the organisation, touched or not', async () => {
      await settled(org);
      const before = await scoreOf(a.id);
      const asked = async () => (await owner.query('select full_generation::int as n from risk_orgs where org_id = $1', [org])).rows[0].n as number;
      const askedBefore = await asked();
      clock.advance(3600);
      const integration = await ok(admin.client.post(api('/integrations'), { kind: 'mcp', name: 'Mock MCP for risk' }), 201);
      const run = await ok(admin.client.post(api(`/connectors/${integration.connector.id}/run`), {}));
      const deadline = Date.now() + 20_000;
      while ((await ok(admin.client.get(api(`/connectors/${integration.connector.id}/runs`)))).items[0].status === 'running') {
        if (Date.now() > deadline) throw new Error(`run ${run.id} still running`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const after = await until(a.id, (s) => s.computed_at > before.computed_at, 'after discovery');
      expect(after.computed_at).toBe(clock.now().toISOString());
      // The run that landed asked for the whole organisation (its trigger), nothing else did.
      expect(await asked()).toBe(askedBefore + 1);
    });

    it('the daily refresh: once due, a job recalculates every agent and queues the next refresh a day ahead', async () => {
      await settled(org);
      const before = await scoreOf(a.id);
      clock.advance(60);
      await owner.query(`update risk_orgs set refresh_due_at = now() - interval '1 minute' where org_id = $1`, [org]);
      await owner.query('select risk_enqueue($1, 0)', [org]);
      const after = await until(a.id, (s) => s.computed_at > before.computed_at, 'refreshed');
      expect(after.computed_at).toBe(clock.now().toISOString());
      const { rows } = await owner.query(
        `select refresh_due_at > now() + interval '23 hours' as ahead,
                (select count(*)::int from pgboss.job where name = 'risk.recalculate' and data->>'org_id' = $2
                   and state = 'created' and start_after > now() + interval '23 hours') as queued
           from risk_orgs where org_id = $1`,
        [org, org],
      );
      expect(rows[0].ahead).toBe(true);
      expect(rows[0].queued).toBeGreaterThanOrEqual(1);
    });
  });

  it('writers whose triggers fire in either order (risk-only table first, or a registry table first) never deadlock', async () => {
    const agents = await Promise.all([0, 1, 2, 3].map((i) => quietAgent(`Concurrent ${i}`)));
    const write = (agentId: string, findingFirst: boolean, n: number) =>
      inScope(t.database.db, { orgId: org }, async (tx) => {
        // Five findings: a long stretch of risk-only triggers at commit, before or after the registry's.
        const finding = async () => {
          for (let k = 0; k < 5; k++) {
            await openFinding(tx, org, { category: 'owner_attestation', severity: 'low', title: `c${n}.${k}`, description: 'x', evidence: {}, agent_id: agentId, dedupe_key: `c:${n}:${k}` });
          }
        };
        const agent = () => tx.updateTable('agents').set({ persistent_memory: n % 4 < 2 ? 'bounded' : 'none' }).where('id', '=', agentId).execute();
        if (findingFirst) {
          await finding();
          await agent();
        } else {
          await agent();
          await finding();
        }
      });
    const results = await Promise.allSettled(Array.from({ length: 40 }, (_, n) => write(agents[n % 4]!.id, n % 2 === 0, n)));
    expect(results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason))).toEqual([]);
    for (const a of agents) await until(a.id, (s) => factor(s, 'open_findings').contribution === 15, 'fifty low findings each, up to the weight');
  });

  describe('the ruleset', () => {
    it('GET /risks/ruleset lists every factor with its weight and the band thresholds', async () => {
      const r = await ok(viewer.get(api('/risks/ruleset')));
      expect(r.factors.map((f: { key: string }) => f.key)).toContain('mcp_trust');
      expect(r.factors.find((f: { key: string }) => f.key === 'mcp_trust')).toMatchObject({
        weight: 36,
        enabled: true,
        default_enabled: true,
        override: null,
        parameters: { points: { approved: 0, unknown: 6, unsigned: 12, quarantined: 12 } },
      });
      expect(r.bands).toEqual([
        { band: 'low', from: 0, to: 24 },
        { band: 'medium', from: 25, to: 49 },
        { band: 'high', from: 50, to: 74 },
        { band: 'critical', from: 75, to: 100 },
      ]);
    });

    it('PATCH switches a factor off with a reason: audited with evidence, every score recalculated in the background', async () => {
      const a = await newAgent({ name: 'Exposed agent', internet_exposure: 'public' });
      await until(a.id, (s) => factor(s, 'internet_exposure').contribution === 12, 'exposed');
      const res = await ok(admin.client.patch(api('/risks/ruleset/internet_exposure'), { enabled: false, reason: 'Behind our own proxy' }));
      expect(res).toMatchObject({ key: 'internet_exposure', enabled: false, default_enabled: true, override: { enabled: false, reason: 'Behind our own proxy', changed_by: admin.userId } });
      const s = await until(a.id, (x) => !factor(x, 'internet_exposure').enabled, 'disabled');
      expect(factor(s, 'internet_exposure')).toMatchObject({ contribution: 0, computed: 12 });
      const audit = (await ok(admin.client.get(api('/audit?target_id=internet_exposure')))).items;
      expect(audit[0]).toMatchObject({ action: 'risk.factor_changed', details: { reason: 'Behind our own proxy', enabled: { from: true, to: false } } });
      const evidence = (await ok(admin.client.get(api('/evidence?event_type=risk_ruleset_change')))).items;
      expect(evidence[0].payload).toMatchObject({ factor_key: 'internet_exposure', enabled: { from: true, to: false } });
      // Another organisation keeps the default.
      expect((await ok(other.client.get(api('/risks/ruleset')))).factors.find((f: { key: string }) => f.key === 'internet_exposure').enabled).toBe(true);
      await ok(admin.client.patch(api('/risks/ruleset/internet_exposure'), { enabled: true, reason: 'Proxy retired' }));
      await until(a.id, (x) => factor(x, 'internet_exposure').contribution === 12, 'enabled again');
    });

    it('PATCH validates enabled and reason (5-1000), and answers 404 for an unknown factor', async () => {
      expectValidation(await admin.client.patch(api('/risks/ruleset/internet_exposure'), { enabled: false, reason: 'no' }), 'reason');
      expectValidation(await admin.client.patch(api('/risks/ruleset/internet_exposure'), { enabled: false, reason: 'x'.repeat(1001) }), 'reason');
      expectValidation(await admin.client.patch(api('/risks/ruleset/internet_exposure'), { reason: 'A good reason' }), 'enabled');
      const unknown = await admin.client.patch(api('/risks/ruleset/no_such_factor'), { enabled: false, reason: 'A good reason' });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().error.code).toBe('not_found');
    });
  });

  describe('permissions and isolation', () => {
    let a: { id: string };
    beforeAll(async () => {
      a = await quietAgent('Guarded agent');
    });

    it('a viewer reads scores, history, the ruleset and what-if, and is refused recalculate and ruleset changes (403)', async () => {
      expect((await viewer.get(api(`/risks/agents/${a.id}`))).statusCode).toBe(200);
      expect((await viewer.get(api(`/risks/agents/${a.id}/history`))).statusCode).toBe(200);
      expect((await viewer.post(api(`/risks/agents/${a.id}/what-if`), { gateway_enforced: false })).statusCode).toBe(200);
      for (const res of [
        await viewer.post(api(`/risks/agents/${a.id}/recalculate`)),
        await viewer.patch(api('/risks/ruleset/internet_exposure'), { enabled: false, reason: 'I would like to' }),
      ]) {
        expect(res.statusCode).toBe(403);
        expect(res.json().error).toMatchObject({ code: 'forbidden', details: { required_permission: 'risk:configure' } });
      }
    });

    it('another organisation’s agent, or none, is 404 on every operation; a malformed id 422', async () => {
      for (const id of [a.id, randomUUID()]) {
        for (const res of [
          await other.client.get(api(`/risks/agents/${id}`)),
          await other.client.get(api(`/risks/agents/${id}/history`)),
          await other.client.post(api(`/risks/agents/${id}/recalculate`)),
          await other.client.post(api(`/risks/agents/${id}/what-if`), {}),
        ]) {
          expect(res.statusCode, res.body).toBe(404);
          expect(res.json().error.code).toBe('not_found');
        }
      }
      expectValidation(await admin.client.get(api('/risks/agents/not-a-uuid')), 'path.agent_id');
    });
  });
});
