import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * GET /dashboard on an exact fixture: agents in each environment, status and risk band; decisions through the
 * gateway on chosen days (one outside the window); approvals pending and expired; findings open, in progress
 * and resolved; MCP servers in three trust states; daily risk history. Every number of the answer is checked.
 */

const DAY = 86_400;

describe('GET /dashboard', () => {
  let t: TestApp;
  // 10:00 UTC, 40 days before the day the dashboard is read.
  const clock = new TestClock(new Date('2026-10-14T10:00:00.000Z'));
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let other: Awaited<ReturnType<typeof onboardAdmin>>;
  const agents: Record<string, string> = {};
  const denyReasons: string[] = [];
  let pendingAt = '';
  let keyN = 0;

  const owner = async (text: string, values: unknown[] = []) => {
    const c = new pg.Client({ connectionString: t.ownerUrl });
    await c.connect();
    try {
      await c.query(text, values);
    } finally {
      await c.end();
    }
  };
  const day = (offset: number) => new Date(Date.parse('2026-11-23T00:00:00.000Z') + offset * DAY * 1000).toISOString().slice(0, 10);

  beforeAll(async () => {
    t = await startTestApp({ clock, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app, 'Dashboard Org');
    await setPlan(t, admin.tenant.id, 'enterprise');
    other = await onboardAdmin(t.app, 'Other Org');
    const c = admin.client;

    for (const [name, environment] of [
      ['prod-a', 'production'],
      ['prod-b', 'production'],
      ['stage-a', 'staging'],
      ['dev-a', 'development'],
      ['dev-b', 'development'],
    ]) {
      const production = { purpose: 'Runs in production', data_classification: 'internal', owners: [{ name: 'Olga Owner', email: 'olga@example.com' }] };
      const res = await c.post(api('/agents'), { name, environment, ...(environment === 'production' ? production : {}) });
      expect(res.statusCode, res.body).toBe(201);
      agents[name!] = res.json().id;
    }
    const tools = Object.fromEntries((await c.get(api('/tools'))).json().items.map((x: { tool_key: string; id: string }) => [x.tool_key, x.id]));
    for (const [toolKey, constraints] of [
      ['crm.lookup_customer', {}],
      ['payments.create_payment', { max_amount: 500, currency: 'EUR' }],
    ] as const) {
      expect((await c.post(api(`/agents/${agents['prod-a']}/permissions`), { target_kind: 'tool', target_id: tools[toolKey], actions: ['invoke'], constraints })).statusCode).toBe(201);
    }
    const identity = (await c.post(api(`/agents/${agents['prod-a']}/identities`))).json();

    /** Submits as prod-a with a fresh token (the clock moves days between calls). */
    const submit = async (body: Record<string, unknown>) => {
      const token = (
        await t.app.inject({
          method: 'POST',
          url: api('/identities/token'),
          payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
        })
      ).json().access_token;
      const res = await t.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': `dash-${++keyN}-${randomUUID()}` },
        payload: body,
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json();
    };
    const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/1', parameters: {} };
    const payment = (amount: number) => ({ tool: 'payments.create_payment', target: 'payee://acme', parameters: { amount, currency: 'EUR' } });
    const deny = async (body: Record<string, unknown>) => {
      const r = await submit(body);
      expect(r.decision.decision).toBe('deny');
      return r.decision.reason_codes as string[];
    };

    // 40 days ago: outside a 30-day window.
    await submit(lookup);
    await deny(payment(900));
    // Two days ago: 2 allow, 1 deny.
    clock.advance(38 * DAY);
    await submit(lookup);
    await submit(lookup);
    denyReasons.push(...(await deny(payment(900))));
    // Yesterday: 1 deny, 1 approval requested (it will have expired by today).
    clock.advance(DAY);
    denyReasons.push(...(await deny({ ...lookup, tool: 'crm.export_all' })));
    expect((await submit(payment(100))).decision.decision).toBe('require_approval');
    // Today, 10:00: 1 allow, 1 deny, 1 approval pending.
    clock.advance(DAY);
    // Sessions last hours, not weeks: sign in again.
    for (const who of [admin, other]) {
      expect((await who.client.post(api('/auth/dev-login'), { email: who.email, tenant_id: who.tenant.id })).statusCode).toBe(200);
    }
    await submit(lookup);
    denyReasons.push(...(await deny(payment(700))));
    pendingAt = clock.now().toISOString();
    expect((await submit(payment(200))).decision.decision).toBe('require_approval');

    // Containment: one suspended, one revoked.
    expect((await c.post(api(`/agents/${agents['stage-a']}/suspend`), { reason: 'under review', confirm: true })).statusCode).toBe(200);
    expect((await c.post(api(`/agents/${agents['dev-b']}/revoke`), { reason: 'decommissioned', confirm: true })).statusCode).toBe(200);

    // MCP servers: unknown (as registered), approved, quarantined.
    for (const [name, trust] of [
      ['One', null],
      ['Two', 'approved'],
      ['Three', 'quarantined'],
    ] as const) {
      const server = (await c.post(api('/mcp-servers'), { name: `MCP ${name}`, endpoint: `https://mcp-${name.toLowerCase()}.example.com/mcp` })).json();
      if (trust) expect((await c.patch(api(`/mcp-servers/${server.id}`), { trust_state: trust, reason: 'security review' })).statusCode).toBe(200);
    }

    // What the risk module and discovery write, written here as they would: bands, history, findings.
    for (const [name, band] of [
      ['prod-a', 'high'],
      ['prod-b', 'low'],
      ['stage-a', 'critical'],
    ]) {
      await owner('update agents set risk_band = $1 where id = $2', [band, agents[name!]]);
    }
    for (const [agent, offset, score] of [
      ['prod-a', -45, 99],
      ['prod-a', -2, 40],
      ['prod-b', -2, 61],
      ['prod-a', -1, 50],
    ] as const) {
      await owner(
        `insert into risk_history (org_id, agent_id, day, score, band, computed_at) values ($1, $2, $3, $4, 'medium', now())`,
        [admin.tenant.id, agents[agent], day(offset), score],
      );
    }
    for (const [severity, status] of [
      ['high', 'open'],
      ['high', 'open'],
      ['medium', 'in_progress'],
      ['low', 'open'],
      ['critical', 'resolved'],
    ]) {
      await owner(
        `insert into findings (id, org_id, category, severity, status, title, dedupe_key) values ($1::uuid, $2, 'test_case', $3, $4, 'A finding', $1::text)`,
        [randomUUID(), admin.tenant.id, severity, status],
      );
    }
  }, 60_000);
  afterAll(async () => t?.close());

  it('answers every section exactly, for the default 30 days', async () => {
    const res = await admin.client.get(api('/dashboard'));
    expect(res.statusCode, res.body).toBe(200);
    const d = res.json();
    expect(d).toMatchObject({ days: 30, since: day(-29), generated_at: clock.now().toISOString() });
    expect(d.agents).toEqual({
      total: 5,
      by_environment: { production: 2, staging: 1, development: 2 },
      by_risk_band: { low: 1, medium: 0, high: 1, critical: 1, unscored: 2 },
      by_status: { active: 3, suspended: 1, revoked: 1 },
    });
    expect(d.decisions.total).toEqual({ allow: 3, deny: 3, require_approval: 2 });
    expect(d.decisions.per_day).toHaveLength(30);
    expect(d.decisions.per_day[0].day).toBe(day(-29));
    expect(d.decisions.per_day.slice(-3)).toEqual([
      { day: day(-2), allow: 2, deny: 1, require_approval: 0 },
      { day: day(-1), allow: 0, deny: 1, require_approval: 1 },
      { day: day(0), allow: 1, deny: 1, require_approval: 1 },
    ]);
    expect(d.decisions.per_day.slice(0, -3).every((x: Record<string, unknown>) => x.allow === 0 && x.deny === 0 && x.require_approval === 0)).toBe(true);

    const expected = new Map<string, number>();
    for (const r of denyReasons) expected.set(r, (expected.get(r) ?? 0) + 1);
    expect(expected.get('PERMISSION_CONSTRAINT_EXCEEDED')).toBe(2);
    expect(d.top_deny_reasons).toEqual(
      [...expected].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([reason_code, count]) => ({ reason_code, count })),
    );
    expect(d.top_deny_reasons[0]).toEqual({ reason_code: 'PERMISSION_CONSTRAINT_EXCEEDED', count: 2 });

    // Yesterday's approval has expired; today's is pending.
    expect(d.pending_approvals).toEqual({ count: 1, oldest_requested_at: pendingAt });
    expect(d.open_findings).toEqual({ total: 4, by_severity: { low: 1, medium: 1, high: 2, critical: 0 } });
    expect(d.mcp_servers).toEqual({ total: 3, by_trust_state: { approved: 1, unknown: 1, unsigned: 0, quarantined: 1 } });
    expect(d.risk_trend).toEqual([
      { day: day(-2), average_score: 50.5, max_score: 61, agents: 2 },
      { day: day(-1), average_score: 50, max_score: 50, agents: 1 },
    ]);
  });

  it('`days` sets the window: 1 is today only, 60 reaches the oldest decisions and risk', async () => {
    const today = (await admin.client.get(api('/dashboard?days=1'))).json();
    expect(today.since).toBe(day(0));
    expect(today.decisions).toEqual({ total: { allow: 1, deny: 1, require_approval: 1 }, per_day: [{ day: day(0), allow: 1, deny: 1, require_approval: 1 }] });
    expect(today.risk_trend).toEqual([]);
    // What is "now" does not depend on the window.
    expect(today.agents.total).toBe(5);
    expect(today.pending_approvals.count).toBe(1);

    const wide = (await admin.client.get(api('/dashboard?days=60'))).json();
    expect(wide.decisions.total).toEqual({ allow: 4, deny: 4, require_approval: 2 });
    expect(wide.decisions.per_day.find((x: { day: string }) => x.day === day(-40))).toEqual({ day: day(-40), allow: 1, deny: 1, require_approval: 0 });
    expect(wide.risk_trend.map((x: { day: string }) => x.day)).toEqual([day(-45), day(-2), day(-1)]);
    expect(wide.top_deny_reasons[0]).toEqual({ reason_code: 'PERMISSION_CONSTRAINT_EXCEEDED', count: 3 });
  });

  it('another organisation sees its own (empty) dashboard; any signed-in role with agent:read may read it', async () => {
    const d = (await other.client.get(api('/dashboard'))).json();
    expect(d.agents.total).toBe(0);
    expect(d.decisions.total).toEqual({ allow: 0, deny: 0, require_approval: 0 });
    expect(d).toMatchObject({ top_deny_reasons: [], pending_approvals: { count: 0, oldest_requested_at: null }, open_findings: { total: 0 }, mcp_servers: { total: 0 }, risk_trend: [] });
    const viewer = await addMember(t.app, admin.client, ['viewer']);
    expect((await viewer.client.get(api('/dashboard'))).json().agents.total).toBe(5);
    expect((await t.app.inject({ url: api('/dashboard') })).statusCode).toBe(401);
  });

  it('answers 422 in the envelope for bad input', async () => {
    for (const days of ['0', '366', '1.5', 'many']) expectValidation(await admin.client.get(api(`/dashboard?days=${days}`)), 'query.days');
  });
});
