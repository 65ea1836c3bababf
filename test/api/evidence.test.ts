import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, expectValidation, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

describe('evidence chain', () => {
  let t: TestApp;
  let owner: pg.Client;
  beforeAll(async () => {
    t = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    owner = new pg.Client({ connectionString: t.ownerUrl });
    await owner.connect();
  });
  afterAll(async () => {
    await owner.end();
    await t.close();
  });

  /** An organisation with `n` containment records and one trust change in its chain. */
  async function orgWithChain(n = 4) {
    const a = await onboardAdmin(t.app);
    await setPlan(t, a.tenant.id, 'enterprise');
    const agent = (await a.client.post(api('/agents'), { name: 'Evidenced' })).json();
    for (let i = 0; i < n; i++) {
      await a.client.post(api(`/agents/${agent.id}/revoke-sessions`), { reason: `rotation ${i}`, confirm: true }, { 'x-correlation-id': `evidence-${i}-corr` });
    }
    const server = (await a.client.post(api('/mcp-servers'), { name: 'Server', endpoint: `https://mcp.example.com/${a.tenant.id}` })).json();
    await a.client.patch(api(`/mcp-servers/${server.id}`), { trust_state: 'approved', reason: 'publisher verified' });
    const records = (await a.client.get(api('/evidence?limit=200'))).json().items as Array<{ id: string; seq: number }>;
    return { ...a, agent, server, records: [...records].reverse() };
  }
  const verify = async (c: Awaited<ReturnType<typeof onboardAdmin>>['client']) => (await c.get(api('/evidence/verify'))).json();

  it('records containment and trust changes, signed and hash-linked, and lists them with filters', async () => {
    const org = await orgWithChain(2);
    expect(org.records.map((r) => r.seq)).toEqual([1, 2, 3]);
    const all = (await org.client.get(api('/evidence'))).json().items;
    expect(all[0]).toMatchObject({ seq: 3, event_type: 'mcp_trust_change', payload: { trust_state: { from: 'unknown', to: 'approved' }, reason: 'publisher verified' } });
    expect(all[2]).toMatchObject({ seq: 1, event_type: 'containment', agent_id: org.agent.id, correlation_id: 'evidence-0-corr', prev_hash: '0'.repeat(64) });
    expect(all[1].prev_hash).toBe(all[2].hash);
    expect(all[0].signature).toMatch(/^[A-Za-z0-9_-]{86}$/);

    const containment = (await org.client.get(api(`/evidence?event_type=containment&agent_id=${org.agent.id}`))).json().items;
    expect(containment.map((r: { seq: number }) => r.seq)).toEqual([2, 1]);
    expect((await org.client.get(api('/evidence?event_type=decision'))).json().items).toEqual([]);
    const page = (await org.client.get(api('/evidence?limit=2'))).json();
    const next = (await org.client.get(api(`/evidence?limit=2&cursor=${encodeURIComponent(page.next_cursor)}`))).json();
    expect([...page.items, ...next.items].map((r: { seq: number }) => r.seq)).toEqual([3, 2, 1]);

    const one = await org.client.get(api(`/evidence/${all[1].id}`));
    expect(one.json()).toEqual(all[1]);
    expect(await verify(org.client)).toEqual({ valid: true, records_checked: 3, head_seq: 3, first_broken: null });

    const b = await onboardAdmin(t.app);
    expect((await b.client.get(api(`/evidence/${all[1].id}`))).statusCode).toBe(404);
    expect((await b.client.get(api('/evidence'))).json().items).toEqual([]);
    expect(await verify(b.client)).toEqual({ valid: true, records_checked: 0, head_seq: 0, first_broken: null });
    expectValidation(await org.client.get(api('/evidence?agent_id=x')), 'query.agent_id');
    expectValidation(await org.client.get(api('/evidence/x')), 'path.evidence_id');
  });

  it('detects an edited payload at that record', async () => {
    const org = await orgWithChain();
    const target = org.records[2]!;
    await owner.query(`update evidence_records set payload = jsonb_set(payload, '{reason}', '"nothing to see"') where id = $1`, [target.id]);
    expect((await verify(org.client)).first_broken).toEqual({ id: target.id, seq: 3, reason: 'hash_mismatch' });
  });

  it('detects a deleted record at the record after it', async () => {
    const org = await orgWithChain();
    await owner.query('delete from evidence_records where id = $1', [org.records[1]!.id]);
    expect((await verify(org.client)).first_broken).toEqual({ id: org.records[2]!.id, seq: 3, reason: 'sequence_gap' });
  });

  it('detects two records swapped at the first of them', async () => {
    const org = await orgWithChain();
    const [x, y] = [org.records[1]!, org.records[2]!];
    await owner.query('begin');
    await owner.query('update evidence_records set seq = -1 where id = $1', [x.id]);
    await owner.query('update evidence_records set seq = $1 where id = $2', [x.seq, y.id]);
    await owner.query('update evidence_records set seq = $1 where id = $2', [y.seq, x.id]);
    await owner.query('commit');
    expect((await verify(org.client)).first_broken).toEqual({ id: y.id, seq: 2, reason: 'prev_hash_mismatch' });
  });

  it('detects swapped payloads, a forged signature and removed newest records', async () => {
    const swapped = await orgWithChain();
    const [a, b] = [swapped.records[0]!, swapped.records[1]!];
    await owner.query(
      `update evidence_records r set payload = o.payload from evidence_records o
       where (r.id, o.id) in (($1::uuid, $2::uuid), ($2::uuid, $1::uuid))`,
      [a.id, b.id],
    );
    expect((await verify(swapped.client)).first_broken).toEqual({ id: a.id, seq: 1, reason: 'hash_mismatch' });

    const forged = await orgWithChain();
    await owner.query(`update evidence_records set signature = $1 where id = $2`, ['A'.repeat(86), forged.records[3]!.id]);
    expect((await verify(forged.client)).first_broken).toEqual({ id: forged.records[3]!.id, seq: 4, reason: 'signature_invalid' });

    const truncated = await orgWithChain();
    const last = truncated.records[truncated.records.length - 1]!;
    await owner.query('delete from evidence_records where id = $1', [last.id]);
    expect((await verify(truncated.client)).first_broken).toEqual({ id: null, seq: last.seq, reason: 'missing_records' });
  });

  it('is append-only for the runtime role', async () => {
    const org = await orgWithChain(1);
    const runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
    try {
      await runtime.query('begin');
      await runtime.query(`select set_config('app.org_id', $1, true)`, [org.tenant.id]);
      await expect(runtime.query('delete from evidence_records')).rejects.toThrow(/permission denied/);
      await runtime.query('rollback');
      await runtime.query('begin');
      await runtime.query(`select set_config('app.org_id', $1, true)`, [org.tenant.id]);
      await expect(runtime.query(`update evidence_records set payload = '{}'`)).rejects.toThrow(/permission denied/);
      await runtime.query('rollback');
    } finally {
      await runtime.end();
    }
  });

  it('stays a single unbroken chain under concurrent appends', async () => {
    const a = await onboardAdmin(t.app);
    await setPlan(t, a.tenant.id, 'enterprise');
    const agents = [];
    for (let i = 0; i < 6; i++) agents.push((await a.client.post(api('/agents'), { name: `Concurrent ${i}` })).json());
    const results = await Promise.all(
      agents.flatMap((ag) => [1, 2].map((k) => a.client.post(api(`/agents/${ag.id}/revoke-sessions`), { reason: `burst ${k}`, confirm: true }))),
    );
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(await verify(a.client)).toEqual({ valid: true, records_checked: 12, head_seq: 12, first_broken: null });
  });
});
