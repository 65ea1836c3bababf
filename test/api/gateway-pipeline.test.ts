import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };

/**
 * The pipelined group commit (D36) under a burst on two API processes sharing one database: batches of one
 * organisation overlap in each process and the two processes append to one chain, and still every
 * acknowledged decision is stored with its evidence, the budgets are exact, a key holds one action, and
 * the chain verifies.
 */
describe('gateway batches pipelined on two processes', () => {
  const LIMIT = 25;
  let one: TestApp;
  let two: TestApp;
  let owner: pg.Client;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  const tokens: string[] = [];

  beforeAll(async () => {
    ({ one, two, owner } = await twoProcesses(LIMIT));
    admin = await onboardAdmin(one.app);
    tokens.push(...(await agentTokens(one, admin, 4)));
  });
  afterAll(async () => {
    await owner?.end();
    await two?.close();
    await one?.close();
  });

  it('stores every acknowledged decision once, with its evidence, within each budget, on one valid chain', async () => {
    // Each agent sends 40 at once, alternating processes; every fifth key is sent twice.
    const sends = tokens.flatMap((token, a) =>
      Array.from({ length: 40 }, (_, i) => ({ token, agent: a, key: `burst-${a}-${i % 5 === 4 ? i - 1 : i}`, via: i % 2 ? one : two })),
    );
    const answers = await burst(sends);

    for (let a = 0; a < tokens.length; a++) {
      const mine = answers.filter((x) => x.agent === a);
      // Every submission is counted once on its agent's budget, repeated keys too.
      expect(mine.filter((x) => x.status === 200)).toHaveLength(LIMIT);
      expect(mine.filter((x) => x.status === 429).every((x) => x.body.error.code === 'rate_limited')).toBe(true);
      expect(mine.filter((x) => x.status !== 200 && x.status !== 429)).toEqual([]);
    }
    const actionIds = [...actionsByKey(answers).values()];
    const { rows: actions } = await owner.query(`select id from action_requests where org_id = $1 and idempotency_key like 'burst-%'`, [admin.tenant.id]);
    expect(actions.map((r) => r.id).sort()).toEqual([...actionIds].sort());
    const { rows: decisions } = await owner.query(
      `select action_request_id, count(*)::int as n from evidence_records
        where org_id = $1 and event_type = 'decision' and action_request_id = any($2::uuid[]) group by action_request_id`,
      [admin.tenant.id, actionIds],
    );
    expect(decisions).toHaveLength(actionIds.length);
    expect(decisions.every((d) => d.n === 1)).toBe(true);

    const verify = (await admin.client.get(api('/evidence/verify'))).json();
    expect(verify).toMatchObject({ valid: true, first_broken: null });
  });
});

/**
 * Many organisations of few agents each (D36): their batches that start together share one transaction
 * and one commit, and still each organisation's decisions, budgets and chain are its own, as if each
 * batch had had a transaction of its own, on two processes.
 */
describe("organisations' batches sharing transactions on two processes", () => {
  const LIMIT = 12;
  const ORGS = 6;
  let one: TestApp;
  let two: TestApp;
  let owner: pg.Client;
  const orgs: Array<{ admin: Awaited<ReturnType<typeof onboardAdmin>>; tokens: string[] }> = [];

  beforeAll(async () => {
    ({ one, two, owner } = await twoProcesses(LIMIT));
    for (let o = 0; o < ORGS; o++) {
      const admin = await onboardAdmin(one.app, `Shared ${o}`);
      orgs.push({ admin, tokens: await agentTokens(one, admin, 2) });
    }
  });
  afterAll(async () => {
    await owner?.end();
    await two?.close();
    await one?.close();
  });

  it("keeps each organisation's decisions, budgets and chain its own", async () => {
    const transactions = async () => (await Promise.all([one, two].map((t) => histogram(t, 'tollgate_decision_transaction_batches'))));
    const before = await transactions();
    // Each agent of each organisation sends 20 at once, alternating processes; every fifth key is sent twice.
    const sends = orgs.flatMap((org, o) =>
      org.tokens.flatMap((token, a) =>
        Array.from({ length: 20 }, (_, i) => ({ org: o, token, agent: `${o} ${a}`, key: `shared-${a}-${i % 5 === 4 ? i - 1 : i}`, via: i % 2 ? one : two })),
      ),
    );
    const answers = await burst(sends);
    const after = await transactions();
    // Some transactions carried more than one organisation's batch: more batches than transactions.
    const carried = after.map((h, i) => ({ count: h.count - before[i]!.count, sum: h.sum - before[i]!.sum }));
    expect(carried.some((c) => c.sum > c.count)).toBe(true);

    for (const [o, org] of orgs.entries()) {
      const mine = answers.filter((x) => x.org === o);
      for (const agent of new Set(mine.map((x) => x.agent))) {
        const its = mine.filter((x) => x.agent === agent);
        expect(its.filter((x) => x.status === 200)).toHaveLength(LIMIT);
        expect(its.filter((x) => x.status !== 200 && x.status !== 429)).toEqual([]);
      }
      const byKey = actionsByKey(mine);
      // Its actions, and only its, are stored under it, each with one decision record on its own chain.
      const { rows } = await owner.query(
        `select a.id, (select count(*)::int from evidence_records e where e.org_id = a.org_id and e.action_request_id = a.id and e.event_type = 'decision') as decisions
           from action_requests a where a.org_id = $1 and a.idempotency_key like 'shared-%'`,
        [org.admin.tenant.id],
      );
      expect(rows.map((r) => r.id).sort()).toEqual([...byKey.values()].sort());
      expect(rows.every((r) => r.decisions === 1)).toBe(true);
      expect((await org.admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
    }
  });
});

/**
 * A batch whose write fails inside a transaction it shares (D36): the others it shared with run again on
 * their own and are stored; only the failing submission is refused. The failure is real: a trigger, created
 * by the schema's owner for this test, refuses one idempotency key.
 */
describe("a failing batch in a shared transaction", () => {
  let t: TestApp;
  let owner: pg.Client;
  const agents: Array<{ admin: Awaited<ReturnType<typeof onboardAdmin>>; token: string }> = [];

  beforeAll(async () => {
    t = await startTestApp();
    owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
    await owner.query(`create function refuse_key() returns trigger language plpgsql as $$
      begin
        if new.idempotency_key = 'refused-by-trigger' then raise exception 'refused by the test''s trigger'; end if;
        return new;
      end $$`);
    await owner.query(`create trigger refuse_key before insert on action_requests for each row execute function refuse_key()`);
    for (let o = 0; o < 4; o++) {
      const admin = await onboardAdmin(t.app, `Failing ${o}`);
      agents.push({ admin, token: (await agentTokens(t, admin, 1))[0]! });
    }
  });
  afterAll(async () => {
    await owner?.end();
    await t?.close();
  });

  it('stores the batches it shared with, and refuses only the failing submission', async () => {
    const send = (token: string, key: string) =>
      t.app.inject({ method: 'POST', url: api('/actions'), headers: { authorization: `Bearer ${token}`, 'idempotency-key': key }, payload: lookup });
    // Each agent's token is verified once first, so that the burst's submissions reach the gateway in one turn.
    for (const a of agents) expect((await send(a.token, 'warm-up-key')).statusCode).toBe(200);
    const before = await histogram(t, 'tollgate_decision_transaction_batches');
    const answers = await Promise.all(agents.map((a, i) => send(a.token, i === 1 ? 'refused-by-trigger' : 'stored-key')));
    const after = await histogram(t, 'tollgate_decision_transaction_batches');
    // They went in one shared transaction first (the three others then each in one of their own).
    expect(after.sum - before.sum).toBeGreaterThan(after.count - before.count);

    expect(answers[1]!.statusCode).toBe(500);
    expect(answers[1]!.json().error.code).toBe('internal_error');
    for (const i of [0, 2, 3]) {
      expect(answers[i]!.statusCode).toBe(200);
      const { rows } = await owner.query(
        `select a.id from action_requests a join evidence_records e on e.action_request_id = a.id and e.event_type = 'decision'
          where a.org_id = $1 and a.idempotency_key = 'stored-key'`,
        [agents[i]!.admin.tenant.id],
      );
      expect(rows.map((r) => r.id)).toEqual([answers[i]!.json().action.id]);
    }
    const { rows: refused } = await owner.query(`select count(*)::int as n from action_requests where idempotency_key = 'refused-by-trigger'`);
    expect(refused[0].n).toBe(0);
    for (const a of agents) expect((await a.admin.client.get(api('/evidence/verify'))).json()).toMatchObject({ valid: true, first_broken: null });
  });
});

/**
 * Two API processes on one database, with the gateway budget `limit`, and the schema owner's connection to it.
 * Their clock stands still, so that a burst never straddles two budget windows.
 */
async function twoProcesses(limit: number) {
  const env = { RATE_LIMIT_GATEWAY_PER_MINUTE: String(limit) };
  const clock = new TestClock();
  const one = await startTestApp({ env, clock });
  const two = await startTestApp({ env, clock, share: one });
  const owner = new pg.Client({ connectionString: one.ownerUrl });
  await owner.connect();
  return { one, two, owner };
}

/** Every submission sent at once, each through the process it names; their answers. */
function burst<S extends { token: string; key: string; via: TestApp }>(sends: S[]) {
  return Promise.all(
    sends.map(async (s) => {
      const res = await s.via.app.inject({
        method: 'POST',
        url: api('/actions'),
        headers: { authorization: `Bearer ${s.token}`, 'idempotency-key': s.key },
        payload: lookup,
      });
      return { ...s, status: res.statusCode, body: res.json() };
    }),
  );
}

/** The action of each accepted (agent, key): a key answered twice is one action, the second answer its replay. */
function actionsByKey(answers: Array<{ agent: unknown; key: string; status: number; body: { action: { id: string } } }>): Map<string, string> {
  const byKey = new Map<string, string>();
  for (const x of answers.filter((a) => a.status === 200)) {
    const seen = byKey.get(`${x.agent} ${x.key}`);
    if (seen) expect(x.body.action.id).toBe(seen);
    else byKey.set(`${x.agent} ${x.key}`, x.body.action.id);
  }
  return byKey;
}

/** `n` agents of the admin's organisation bound to the read-only sample tool, and a token for each. */
async function agentTokens(t: TestApp, admin: Awaited<ReturnType<typeof onboardAdmin>>, n: number): Promise<string[]> {
  const tools = (await admin.client.get(api('/tools'))).json().items as Array<{ id: string; tool_key: string }>;
  const toolId = tools.find((x) => x.tool_key === 'crm.lookup_customer')!.id;
  const tokens: string[] = [];
  for (let a = 0; a < n; a++) {
    const agent = (await admin.client.post(api('/agents'), { name: `Burst agent ${a}` })).json();
    await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: toolId, actions: ['invoke'] });
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    const res = await t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      payload: { grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret },
    });
    tokens.push(res.json().access_token);
  }
  return tokens;
}

/** A histogram's count and sum on a process's /metrics. */
async function histogram(t: TestApp, name: string): Promise<{ count: number; sum: number }> {
  const text = (await t.app.inject({ url: '/metrics' })).body;
  const value = (suffix: string) => Number(new RegExp(`^${name}_${suffix} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
  return { count: value('count'), sum: value('sum') };
}
