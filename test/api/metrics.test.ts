import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiMetrics, DECISION_SECONDS_BUCKETS, ENGINE_REASON_CODES } from '../../api/platform/metrics.js';
import { addMember, api, asOwner, freshDatabase, onboardAdmin, setPlan, startEmbeddedApp, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { freePort } from '../support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../support/processes.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text exposition format, samples only (HELP and TYPE lines checked apart). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    samples.push({ name: m[1]!, labels, value: m[3] === '+Inf' ? Infinity : Number(m[3]) });
  }
  return samples;
}

/** The value of the one series of `name` with exactly these labels (0 when absent). */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const hits = samples.filter(
    (s) => s.name === name && Object.keys(s.labels).length === Object.keys(labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (hits.length > 1) throw new Error(`${name} ${JSON.stringify(labels)}: ${hits.length} series`);
  return hits[0]?.value ?? 0;
}

describe('GET /metrics on the API (docs/metrics.md)', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let approver: Awaited<ReturnType<typeof addMember>>;
  let tools: Record<string, { id: string }>;
  let keyN = 0;
  const key = () => `metrics-${Date.now()}-${++keyN}`;
  const GATEWAY_LIMIT = 8;
  const TOKEN_LIMIT = 3;
  // Everything that names an organisation or an agent: none of it may appear on /metrics.
  const secrets: string[] = [];

  const scrape = async () => {
    const res = await t.app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return { text: res.body, samples: parse(res.body) };
  };
  const exchange = (clientId: string, clientSecret: string) =>
    t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret },
    });
  const submit = (bearer: string, body: Record<string, unknown>, idempotencyKey = key()) =>
    t.app.inject({
      method: 'POST',
      url: api('/actions'),
      headers: { authorization: `Bearer ${bearer}`, 'idempotency-key': idempotencyKey },
      payload: body,
    });
  async function agentWithIdentity(name: string) {
    const agent = (await admin.client.post(api('/agents'), { name })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    secrets.push(agent.id, identity.id, identity.client_id, agent.slug ?? name);
    return { agentId: agent.id as string, identity: identity as { id: string; client_id: string; client_secret: string } };
  }
  async function bind(agentId: string, toolKey: string) {
    const res = await admin.client.post(api(`/agents/${agentId}/permissions`), {
      target_kind: 'tool',
      target_id: tools[toolKey]!.id,
      actions: ['invoke'],
      constraints: {},
    });
    expect(res.statusCode).toBe(201);
  }

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      env: {
        RATE_LIMIT_SIGNIN_PER_MINUTE: '1000',
        TOKEN_REVOCATION_CACHE_SECONDS: '0',
        RATE_LIMIT_GATEWAY_PER_MINUTE: String(GATEWAY_LIMIT),
        RATE_LIMIT_TOKEN_PER_MINUTE: String(TOKEN_LIMIT),
      },
    });
    admin = await onboardAdmin(t.app, 'Metrics Org Visible Name');
    secrets.push(admin.tenant.id, admin.tenant.slug, 'Metrics Org Visible Name', admin.email);
    await setPlan(t, admin.tenant.id, 'enterprise');
    approver = await addMember(t.app, admin.client, ['approver']);
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
  });
  afterAll(async () => t?.close());

  it('counts decisions by outcome and reason, replays excluded, with the latency each action records', async () => {
    const { agentId, identity } = await agentWithIdentity('Payments agent');
    await bind(agentId, 'crm.lookup_customer');
    await bind(agentId, 'payments.create_payment');
    const token = (await exchange(identity.client_id, identity.client_secret)).json().access_token as string;
    const before = await scrape();

    const expected = new Map<string, number>();
    const tally = (res: { json(): any }) => {
      const { decision, reason_codes: codes } = res.json().decision as { decision: string; reason_codes: string[] };
      expected.set(decision, (expected.get(decision) ?? 0) + 1);
      for (const c of codes) expected.set(`${decision} ${c}`, (expected.get(`${decision} ${c}`) ?? 0) + 1);
    };
    const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
    const k = key();
    const allowed = await submit(token, lookup, k);
    expect(allowed.json().decision.decision).toBe('allow');
    tally(allowed);
    // A replay answers the stored decision: no new decision to count.
    expect((await submit(token, lookup, k)).json().replayed).toBe(true);
    for (const body of [
      { ...lookup, tool: 'crm.export_all' },
      { tool: 'email.send_message', target: 'mailto://x', parameters: {} },
    ]) {
      const denied = await submit(token, body);
      expect(denied.json().decision.decision).toBe('deny');
      tally(denied);
    }
    const payment = { tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount: 120, currency: 'EUR', payee: 'acme' } };
    const pk = key();
    const asked = await submit(token, payment, pk);
    expect(asked.json().decision.decision).toBe('require_approval');
    tally(asked);
    const approvalId = asked.json().approval.id as string;
    expect((await approver.client.post(api(`/approvals/${approvalId}/decision`), { decision: 'approve', reason: 'checked' })).statusCode).toBe(200);
    const view = await t.app.inject({ url: api(`/actions/gateway/${asked.json().action.id}`), headers: { authorization: `Bearer ${token}` } });
    // A redemption is a decision of its own, counted with its own latency.
    const redeemed = await submit(token, { ...payment, approval_token: view.json().approval.approval_token }, pk);
    expect(redeemed.json()).toMatchObject({ decision: { decision: 'allow' }, replayed: false });
    tally(redeemed);

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => valueOf(after.samples, name, labels) - valueOf(before.samples, name, labels);
    expect(delta('tollgate_decisions_total', { decision: 'allow' })).toBe(2);
    expect(delta('tollgate_decisions_total', { decision: 'deny' })).toBe(2);
    expect(delta('tollgate_decisions_total', { decision: 'require_approval' })).toBe(1);
    expect(delta('tollgate_decision_reasons_total', { decision: 'allow', reason_code: 'PERMISSION_GRANTED' })).toBe(2);
    expect(delta('tollgate_decision_reasons_total', { decision: 'allow', reason_code: 'APPROVAL_GRANTED' })).toBe(1);
    expect(delta('tollgate_decision_reasons_total', { decision: 'require_approval', reason_code: 'TOOL_APPROVAL_REQUIRED' })).toBe(1);
    // Every reason series moved by exactly what the answers said, and no other.
    const reasonSeries = after.samples.filter((s) => s.name === 'tollgate_decision_reasons_total');
    for (const s of reasonSeries) {
      expect(delta(s.name, s.labels), `${s.labels.decision} ${s.labels.reason_code}`).toBe(expected.get(`${s.labels.decision} ${s.labels.reason_code}`) ?? 0);
    }
    for (const [k2, n] of expected) if (k2.includes(' ')) expect(reasonSeries.some((s) => `${s.labels.decision} ${s.labels.reason_code}` === k2), k2).toBe(n > 0);

    // The histogram holds the latencies the database recorded: action rows' decision_ms, and the events of
    // first decisions that a redemption rewrote (D26).
    const recorded = await asOwner(t, async (c) => {
      const { rows } = await c.query<{ decision: string; ms: number }>(
        `select decision, decision_ms as ms from action_requests where agent_id = $1 and decision_ms is not null
         union all
         select attributes->>'decision', (attributes->>'latency_ms')::float8 from telemetry_events
          where agent_id = $1 and event_type = 'gateway.decision'`,
        [agentId],
      );
      return rows;
    });
    expect(recorded).toHaveLength(5);
    for (const decision of ['allow', 'deny', 'require_approval']) {
      const seconds = recorded.filter((r) => r.decision === decision).map((r) => r.ms / 1000);
      expect(delta('tollgate_decision_duration_seconds_count', { decision })).toBe(seconds.length);
      expect(delta('tollgate_decision_duration_seconds_sum', { decision })).toBeCloseTo(
        seconds.reduce((a, b) => a + b, 0),
        9,
      );
      for (const le of DECISION_SECONDS_BUCKETS) {
        expect(delta('tollgate_decision_duration_seconds_bucket', { decision, le: String(le) }), `${decision} le=${le}`).toBe(
          seconds.filter((s) => s <= le).length,
        );
      }
      expect(delta('tollgate_decision_duration_seconds_bucket', { decision, le: '+Inf' })).toBe(seconds.length);
    }
    // One at a time, each submission (the replay and the redemption included) was a batch of one.
    expect(delta('tollgate_decision_batch_size_count')).toBe(6);
    expect(delta('tollgate_decision_batch_size_sum')).toBe(6);
    expect(delta('tollgate_decision_batch_size_bucket', { le: '1' })).toBe(6);
    // And each went in a transaction of its own.
    expect(delta('tollgate_decision_transaction_batches_count')).toBe(6);
    expect(delta('tollgate_decision_transaction_batches_sum')).toBe(6);
  });

  it("counts a burst's group-commit batches and the gateway limit's refusals", async () => {
    const { identity } = await agentWithIdentity('Bursty agent');
    const token = (await exchange(identity.client_id, identity.client_secret)).json().access_token as string;
    const before = await scrape();
    const burst = GATEWAY_LIMIT + 3;
    const answers = await Promise.all(
      Array.from({ length: burst }, () => submit(token, { tool: 'email.send_message', target: 'mailto://x', parameters: {} })),
    );
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(GATEWAY_LIMIT);
    expect(answers.filter((r) => r.statusCode === 429)).toHaveLength(3);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => valueOf(after.samples, name, labels) - valueOf(before.samples, name, labels);
    expect(delta('tollgate_rate_limit_refusals_total', { limit: 'gateway' })).toBe(3);
    expect(delta('tollgate_rate_limit_refusals_total', { limit: 'token' })).toBe(0);
    // Every submission went through exactly one batch, whatever the grouping; refused ones decide nothing.
    expect(delta('tollgate_decision_batch_size_sum')).toBe(burst);
    const batches = delta('tollgate_decision_batch_size_count');
    expect(batches).toBeGreaterThanOrEqual(1);
    expect(batches).toBeLessThanOrEqual(burst);
    expect(delta('tollgate_decisions_total', { decision: 'deny' })).toBe(GATEWAY_LIMIT);
    expect(delta('tollgate_decision_reasons_total', { decision: 'deny', reason_code: 'PERMISSION_NOT_GRANTED' })).toBe(GATEWAY_LIMIT);
  });

  it('counts token exchanges by outcome, and the per-client limit as its own refusal', async () => {
    const ok = await agentWithIdentity('Exchanging agent');
    const suspended = await agentWithIdentity('Suspended agent');
    const revokedIdentity = await agentWithIdentity('Agent with a revoked identity');
    const revokedAgent = await agentWithIdentity('Revoked agent');
    expect((await admin.client.post(api(`/agents/${suspended.agentId}/suspend`), { reason: 'odd behaviour', confirm: true })).statusCode).toBe(200);
    expect((await admin.client.post(api(`/identities/${revokedIdentity.identity.id}/revoke`), { reason: 'leaked', confirm: true })).statusCode).toBe(200);
    // Revoking an agent through the API revokes its identities too (answered as identity_revoked); an agent
    // revoked while an identity stayed active is the exchange's own check, reached here by hand.
    await asOwner(t, (c) => c.query(`update agents set status = 'revoked' where id = $1`, [revokedAgent.agentId]));
    const before = await scrape();

    for (let i = 0; i < TOKEN_LIMIT; i++) expect((await exchange(ok.identity.client_id, ok.identity.client_secret)).statusCode).toBe(200);
    const limited = await exchange(ok.identity.client_id, ok.identity.client_secret);
    expect(limited.statusCode).toBe(429);
    expect((await exchange(suspended.identity.client_id, 'tgs_wrong-secret-of-the-right-length-000000')).json().error.code).toBe('invalid_client');
    expect((await exchange('tgc_no-such-client-anywhere', 'whatever-secret')).json().error.code).toBe('invalid_client');
    expect((await exchange(suspended.identity.client_id, suspended.identity.client_secret)).json().error.code).toBe('session_revoked');
    expect((await exchange(revokedIdentity.identity.client_id, revokedIdentity.identity.client_secret)).json().error.code).toBe('identity_revoked');
    expect((await exchange(revokedAgent.identity.client_id, revokedAgent.identity.client_secret)).json().error.code).toBe('identity_revoked');

    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => valueOf(after.samples, name, labels) - valueOf(before.samples, name, labels);
    expect({
      issued: delta('tollgate_token_exchanges_total', { outcome: 'issued' }),
      unknown_client: delta('tollgate_token_exchanges_total', { outcome: 'unknown_client' }),
      wrong_secret: delta('tollgate_token_exchanges_total', { outcome: 'wrong_secret' }),
      identity_revoked: delta('tollgate_token_exchanges_total', { outcome: 'identity_revoked' }),
      agent_suspended: delta('tollgate_token_exchanges_total', { outcome: 'agent_suspended' }),
      agent_revoked: delta('tollgate_token_exchanges_total', { outcome: 'agent_revoked' }),
    }).toEqual({ issued: TOKEN_LIMIT, unknown_client: 1, wrong_secret: 1, identity_revoked: 1, agent_suspended: 1, agent_revoked: 1 });
    // The refused exchange never reached the exchange: it is the limiter's.
    expect(delta('tollgate_rate_limit_refusals_total', { limit: 'token' })).toBe(1);
    expect(delta('tollgate_rate_limit_refusals_total', { limit: 'gateway' })).toBe(0);
  });

  it("shows the database pool, every series typed, and nothing that names an organisation or an agent", async () => {
    const { text, samples } = await scrape();
    // startTestApp sets DATABASE_POOL_MAX=4.
    expect(valueOf(samples, 'tollgate_db_pool_max')).toBe(4);
    const total = valueOf(samples, 'tollgate_db_pool_connections', { state: 'total' });
    const idle = valueOf(samples, 'tollgate_db_pool_connections', { state: 'idle' });
    expect(total).toBeGreaterThanOrEqual(1);
    expect(total).toBeLessThanOrEqual(4);
    expect(idle).toBeLessThanOrEqual(total);
    expect(valueOf(samples, 'tollgate_db_pool_connections', { state: 'waiting' })).toBe(0);

    const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
    expect(Object.fromEntries([...types].filter(([name]) => name!.startsWith('tollgate_')))).toEqual({
      tollgate_decisions_total: 'counter',
      tollgate_decision_reasons_total: 'counter',
      tollgate_decision_duration_seconds: 'histogram',
      tollgate_decision_batch_size: 'histogram',
      tollgate_decision_transaction_batches: 'histogram',
      tollgate_token_exchanges_total: 'counter',
      tollgate_rate_limit_refusals_total: 'counter',
      tollgate_db_pool_connections: 'gauge',
      tollgate_db_pool_max: 'gauge',
    });
    // The tests before this one made decisions, exchanged tokens and were refused: all that shows as counts only.
    expect(valueOf(samples, 'tollgate_decisions_total', { decision: 'allow' })).toBeGreaterThan(0);
    expect(secrets.length).toBeGreaterThan(10);
    for (const s of secrets) expect(text, s).not.toContain(s);
    expect(text).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/);
  });

  it('answers without a credential, stays out of the OpenAPI document and the request log', async () => {
    const res = await t.app.inject({ url: '/metrics', headers: { cookie: 'tollgate_session=not-a-session' } });
    expect(res.statusCode).toBe(200);
    const doc = (await t.app.inject({ url: api('/openapi.json') })).json();
    expect(Object.keys(doc.paths).filter((p) => p.includes('metrics'))).toEqual([]);
    expect(t.logs.filter((l) => l.includes('/metrics'))).toEqual([]);
    expect(t.logs.some((l) => l.includes('/api/v1/openapi.json'))).toBe(true);
  });

  it('is not served with METRICS_ENABLED=false', async () => {
    const off = await startTestApp({ share: t, env: { METRICS_ENABLED: 'false' } });
    try {
      const res = await off.app.inject({ url: '/metrics' });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('not_found');
    } finally {
      await off.app.close();
      await off.database.close();
    }
  });

  it('refuses a METRICS_ENABLED that is not a boolean', async () => {
    await expect(startTestApp({ share: t, env: { METRICS_ENABLED: 'sometimes' } })).rejects.toThrow(/METRICS_ENABLED/);
  });
});

describe('GET /metrics on the embedded database', () => {
  it('answers, without pool metrics', async () => {
    const e = await startEmbeddedApp();
    try {
      const res = await e.app.inject({ url: '/metrics' });
      expect(res.statusCode).toBe(200);
      const samples = parse(res.body);
      expect(valueOf(samples, 'tollgate_decisions_total', { decision: 'allow' })).toBe(0);
      expect(res.body).not.toContain('tollgate_db_pool');
    } finally {
      await e.close();
    }
  });
});

describe('`tollgate api` as a process', () => {
  it("adds the process's own metrics to the pool's and the app's; METRICS_ENABLED=false serves none", async () => {
    const db = await freshDatabase();
    const start = async (env: Record<string, string>) => {
      const port = await freePort();
      const child = spawnTollgate(['api'], { DATABASE_URL: db.runtimeUrl, DATABASE_POOL_MAX: '3', PORT: String(port), LOG_LEVEL: 'warn', ...env });
      await waitForHttp(`http://127.0.0.1:${port}/readyz`, 60_000, child);
      return { child, base: `http://127.0.0.1:${port}` };
    };
    try {
      const on = await start({});
      try {
        const res = await fetch(`${on.base}/metrics`);
        expect(res.status).toBe(200);
        const samples = parse(await res.text());
        const names = new Set(samples.map((s) => s.name));
        for (const n of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'tollgate_decisions_total']) {
          expect(names, n).toContain(n);
        }
        expect(valueOf(samples, 'tollgate_db_pool_max')).toBe(3);
      } finally {
        await stop(on.child);
      }
      const off = await start({ METRICS_ENABLED: 'false' });
      try {
        expect((await fetch(`${off.base}/metrics`)).status).toBe(404);
      } finally {
        await stop(off.child);
      }
    } finally {
      await db.drop();
    }
  }, 120_000);
});

describe('ApiMetrics', () => {
  it("counts a policy rule's own reason code as other, and ignores an outcome the engine never gives", async () => {
    const m = new ApiMetrics();
    m.decided('deny', ['ACME_SECRET_PROJECT_FALCON', 'SECRET_DETECTED'], 0.003);
    m.decided('maybe', ['PERMISSION_GRANTED'], 0.003);
    const samples = parse(await m.scrape());
    expect(valueOf(samples, 'tollgate_decision_reasons_total', { decision: 'deny', reason_code: 'other' })).toBe(1);
    expect(valueOf(samples, 'tollgate_decision_reasons_total', { decision: 'deny', reason_code: 'SECRET_DETECTED' })).toBe(1);
    expect(samples.filter((s) => s.name === 'tollgate_decision_reasons_total')).toHaveLength(2);
    expect(samples.filter((s) => s.name === 'tollgate_decisions_total').map((s) => s.labels.decision).sort()).toEqual(['allow', 'deny', 'require_approval']);
    expect(await m.scrape()).not.toContain('FALCON');
  });

  it("knows every reason code the decision engine gives (its sources' codes)", () => {
    const root = path.resolve(import.meta.dirname, '../../api/modules/gateway');
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((f) => (statSync(path.join(dir, f)).isDirectory() ? files(path.join(dir, f)) : [path.join(dir, f)]));
    const sources = [...files(path.join(root, 'engine')), path.join(root, 'snapshot.ts')].filter((f) => f.endsWith('.ts'));
    const named = new Set(sources.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)'/g)].map((m) => m[1]!)));
    expect([...named].sort()).toEqual([...ENGINE_REASON_CODES].sort());
  });
});
