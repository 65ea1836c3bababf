import { createPublicKey, verify as verifySignature } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_EVIDENCE_SIGNING_SEED, DEV_TOKEN_SIGNING_SEED } from '../../api/config.js';
import { EvidenceSigner } from '../../api/modules/evidence/index.js';
import { api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, type TestApp } from '../support/harness.js';

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

  it('stores the id of the signing key in every record', async () => {
    const org = await orgWithChain(2);
    const records = (await org.client.get(api('/evidence'))).json().items as { kid: string }[];
    expect(records.map((r) => r.kid)).toEqual(records.map(() => t.app.deps.evidence.kid));
  });
});

/**
 * Key rotation: several API processes on one database, each with its own evidence seeds, as a
 * deployment is before and after a rotation. The current seed signs; previous seeds only verify.
 */
describe('evidence keys and their rotation', () => {
  // What versions before the evidence seed signed with: a key derived from TOKEN_SIGNING_SEED.
  const TOKEN_SEED = 'old-token-seed-7Hq2Lx9Vd4Rb8Nc1';
  const A = 'evidence-seed-a-Kp3Wz8Tg5Ym2Qs6';
  const B = 'evidence-seed-b-Fj7Uc1Xe9Ro4Dh3';
  const apps: TestApp[] = [];
  let first: TestApp;
  let owner: pg.Client;

  async function app(env: Record<string, string>): Promise<TestApp> {
    const a = await startTestApp({ share: first, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', ...env } });
    apps.push(a);
    return a;
  }
  /** The same signed-in person, calling another process. */
  function on(a: TestApp, client: Client): Client {
    const c = new Client(a.app);
    for (const [k, v] of client.cookies) c.cookies.set(k, v);
    return c;
  }
  async function contain(c: Client, agentId: string, n: number) {
    for (let i = 0; i < n; i++) {
      const res = await c.post(api(`/agents/${agentId}/revoke-sessions`), { reason: `rotation check ${i}`, confirm: true });
      expect(res.statusCode).toBe(200);
    }
  }
  const records = async (c: Client) => [...(await c.get(api('/evidence?limit=200'))).json().items].reverse() as { id: string; seq: number; kid: string }[];
  const verify = async (c: Client) => (await c.get(api('/evidence/verify'))).json();

  beforeAll(async () => {
    // The version before: evidence signed with the token seed's key.
    first = await startTestApp({ env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000', TOKEN_SIGNING_SEED: TOKEN_SEED, EVIDENCE_SIGNING_SEED: TOKEN_SEED } });
    owner = new pg.Client({ connectionString: first.ownerUrl });
    await owner.connect();
  });
  afterAll(async () => {
    await owner?.end();
    for (const a of apps.splice(0).reverse()) await a.close();
    await first?.close();
  });

  it('verifies records of the old and the new key after a rotation, each with the key its kid names', async () => {
    const kid = (seed: string) => new EvidenceSigner(seed).kid;
    const admin = await onboardAdmin(first.app);
    await setPlan(first, admin.tenant.id, 'enterprise');
    const agent = (await admin.client.post(api('/agents'), { name: 'Rotated' })).json();
    await contain(admin.client, agent.id, 2);

    // The upgrade: a seed of its own, the token seed kept to verify what it signed, a new token seed.
    const upgraded = await app({ TOKEN_SIGNING_SEED: 'new-token-seed-5Gm8Pw2Zk7Cv3Jn0', EVIDENCE_SIGNING_SEED: A, EVIDENCE_SIGNING_PREVIOUS_SEEDS: TOKEN_SEED });
    await contain(on(upgraded, admin.client), agent.id, 2);
    // A rotation: B signs, A and the token seed still verify.
    const rotated = await app({ EVIDENCE_SIGNING_SEED: B, EVIDENCE_SIGNING_PREVIOUS_SEEDS: `${A}, ${TOKEN_SEED}` });
    const c = on(rotated, admin.client);
    await contain(c, agent.id, 2);

    const chain = await records(c);
    expect(chain.map((r) => [r.seq, r.kid])).toEqual([
      [1, kid(TOKEN_SEED)],
      [2, kid(TOKEN_SEED)],
      [3, kid(A)],
      [4, kid(A)],
      [5, kid(B)],
      [6, kid(B)],
    ]);
    expect(await verify(c)).toEqual({ valid: true, records_checked: 6, head_seq: 6, first_broken: null });

    // The keys, for verifying offline: each record's signature checks against the key its kid names.
    const keys = (await c.get(api('/evidence/keys'))).json().items as { kid: string; public_key: string; current: boolean }[];
    expect(keys.map((k) => [k.kid, k.current])).toEqual([
      [kid(B), true],
      [kid(A), false],
      [kid(TOKEN_SEED), false],
    ]);
    const full = (await c.get(api('/evidence?limit=200'))).json().items as { kid: string; hash: string; signature: string }[];
    for (const r of full) {
      const key = createPublicKey({ key: Buffer.from(keys.find((k) => k.kid === r.kid)!.public_key, 'base64url'), format: 'der', type: 'spki' });
      expect(verifySignature(null, Buffer.from(r.hash, 'hex'), key, Buffer.from(r.signature, 'base64url'))).toBe(true);
    }

    // Without the old seeds, the first record they signed is where the chain stops being proven.
    const forgetful = on(await app({ EVIDENCE_SIGNING_SEED: B }), admin.client);
    expect(await verify(forgetful)).toEqual({
      valid: false,
      records_checked: 0,
      head_seq: 6,
      first_broken: { id: chain[0]!.id, seq: 1, reason: 'unknown_key' },
    });
    const withoutA = on(await app({ EVIDENCE_SIGNING_SEED: B, EVIDENCE_SIGNING_PREVIOUS_SEEDS: TOKEN_SEED }), admin.client);
    expect((await verify(withoutA)).first_broken).toEqual({ id: chain[2]!.id, seq: 3, reason: 'unknown_key' });
    // A process still on the old key does not know the new one.
    const behind = on(await app({ EVIDENCE_SIGNING_SEED: A, EVIDENCE_SIGNING_PREVIOUS_SEEDS: TOKEN_SEED }), admin.client);
    expect((await verify(behind)).first_broken).toEqual({ id: chain[4]!.id, seq: 5, reason: 'unknown_key' });
  });

  it('names a record whose kid was changed: to an unknown key, or to another known key', async () => {
    const a = await app({ EVIDENCE_SIGNING_SEED: B, EVIDENCE_SIGNING_PREVIOUS_SEEDS: A });
    const admin = await onboardAdmin(a.app);
    await setPlan(a, admin.tenant.id, 'enterprise');
    const agent = (await admin.client.post(api('/agents'), { name: 'Relabelled' })).json();
    await contain(admin.client, agent.id, 3);
    const chain = await records(admin.client);
    await owner.query('update evidence_records set kid = $1 where id = $2', ['not-a-key-we-hold', chain[1]!.id]);
    expect((await verify(admin.client)).first_broken).toEqual({ id: chain[1]!.id, seq: 2, reason: 'unknown_key' });
    await owner.query('update evidence_records set kid = $1 where id = $2', [new EvidenceSigner(A).kid, chain[1]!.id]);
    expect((await verify(admin.client)).first_broken).toEqual({ id: chain[1]!.id, seq: 2, reason: 'signature_invalid' });
  });

  it('keeps verifying development records signed before the evidence seed existed, under the development defaults', async () => {
    // Earlier versions signed a development database's evidence with the development token seed's key.
    const before = await app({ EVIDENCE_SIGNING_SEED: DEV_TOKEN_SIGNING_SEED });
    const admin = await onboardAdmin(before.app);
    await setPlan(before, admin.tenant.id, 'enterprise');
    const agent = (await admin.client.post(api('/agents'), { name: 'Development' })).json();
    await contain(admin.client, agent.id, 1);
    const now = on(await app({}), admin.client);
    await contain(now, agent.id, 1);
    expect(await verify(now)).toEqual({ valid: true, records_checked: 2, head_seq: 2, first_broken: null });
    expect((await records(now)).map((r) => r.kid)).toEqual([new EvidenceSigner(DEV_TOKEN_SIGNING_SEED).kid, new EvidenceSigner(DEV_EVIDENCE_SIGNING_SEED).kid]);
  });
});

