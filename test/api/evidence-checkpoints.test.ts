import { createHash, createPublicKey, verify } from 'node:crypto';
import { createRequire } from 'node:module';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyOf, type EvidenceRow } from '../../api/modules/evidence/chain.js';
import { buildEvidenceBundle, verifyBundle, writeDueCheckpoints, type Checkpoint } from '../../api/modules/evidence/index.js';
import { addMember, asOwner, api, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { fileOf, tollgateEvidence } from '../support/evidence-bundle.js';

const canonicalize = createRequire(import.meta.url)('canonicalize') as (input: unknown) => string;

/**
 * Signed checkpoints of the chain head on real PostgreSQL, with the in-process worker: the job (scheduled every
 * 15 minutes) writes one for each organisation whose chain grew, and none without appends; the endpoints answer
 * them newest first, to the organisation only; and `tollgate evidence verify --checkpoint old --checkpoint new`
 * proves a bundle's chain extends the one to the other, and fails once history between them is rewritten, even
 * by someone holding the signing key.
 */

type Admin = Awaited<ReturnType<typeof onboardAdmin>>;
const HOUR = 3600;

describe('evidence checkpoints', () => {
  let t: TestApp;
  const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
  const whole = { since: new Date('2026-11-01T00:00:00.000Z'), until: new Date('2026-12-31T00:00:00.000Z') };

  const owner = <T>(fn: (c: pg.Client) => Promise<T>) => asOwner(t, fn);

  async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** An organisation with an agent, and `append(n)` adding n containment records to its chain. */
  async function orgWithChain(name: string) {
    const a = await onboardAdmin(t.app, name);
    await setPlan(t, a.tenant.id, 'enterprise');
    const agent = (await a.client.post(api('/agents'), { name: `${name} agent` })).json();
    let n = 0;
    const append = async (k: number) => {
      for (let i = 0; i < k; i++) {
        const res = await a.client.post(api(`/agents/${agent.id}/revoke-sessions`), { reason: `rotation ${++n}`, confirm: true });
        expect(res.statusCode, res.body).toBe(200);
      }
    };
    return { ...a, append };
  }

  const checkpoints = async (a: Admin, query = 'limit=200') => {
    const res = await a.client.get(api(`/evidence/checkpoints?${query}`));
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { items: Checkpoint[]; next_cursor: string | null };
  };
  const head = async (a: Admin) => {
    const items = (await a.client.get(api('/evidence?limit=1'))).json().items as { seq: number; hash: string }[];
    return items[0]!;
  };
  const checkpointNow = () => writeDueCheckpoints({ db: t.database.db, evidence: t.app.deps.evidence, clock });

  beforeAll(async () => {
    t = await startTestApp({
      clock,
      worker: true,
      env: { JOB_POLL_INTERVAL_SECONDS: '0.5', RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' },
    });
  }, 60_000);
  afterAll(async () => t?.close());

  it('is written by the evidence.checkpoint job, scheduled every 15 minutes, after appends and not again without', async () => {
    const schedule = await owner(async (c) => (await c.query(`select cron, timezone from pgboss.schedule where name = 'evidence.checkpoint'`)).rows[0]);
    expect(schedule).toEqual({ cron: '*/15 * * * *', timezone: 'UTC' });
    // From here on the runs are the test's own: no scheduled one runs between its steps.
    await owner((c) => c.query(`delete from pgboss.schedule where name = 'evidence.checkpoint'`));

    const org = await orgWithChain('Checkpointed');
    expect((await org.client.get(api('/evidence/checkpoints/latest'))).statusCode).toBe(404);
    await org.append(3);
    const jobDone = async (id: string | null) =>
      eventually('the job to complete', async () =>
        (await owner(async (c) => (await c.query(`select state from pgboss.job where id = $1`, [id])).rows[0]?.state)) === 'completed' ? true : undefined,
      );
    await jobDone(await t.app.deps.jobs.send('evidence.checkpoint', {}));
    const first = (await org.client.get(api('/evidence/checkpoints/latest'))).json() as Checkpoint;
    const h = await head(org);
    expect(first).toEqual({ org_id: org.tenant.id, seq: 3, hash: h.hash, created_at: clock.now().toISOString(), kid: t.app.deps.evidence.kid, signature: expect.any(String) });

    // The signature verifies by hand: Ed25519 over the SHA-256 of the canonical JSON of the four fields.
    const keys = (await org.client.get(api('/evidence/keys'))).json().items as { kid: string; public_key: string }[];
    const key = createPublicKey({ key: Buffer.from(keys.find((k) => k.kid === first.kid)!.public_key, 'base64url'), format: 'der', type: 'spki' });
    const digest = createHash('sha256')
      .update(canonicalize({ org_id: first.org_id, seq: first.seq, hash: first.hash, created_at: first.created_at }))
      .digest();
    expect(verify(null, digest, key, Buffer.from(first.signature, 'base64url'))).toBe(true);

    // Without appends, nothing new: by the job again, and by a run of its own.
    clock.advance(HOUR);
    await jobDone(await t.app.deps.jobs.send('evidence.checkpoint', {}));
    await checkpointNow();
    expect((await checkpoints(org)).items).toEqual([first]);

    // After appends, one more; the newest first.
    await org.append(2);
    expect((await checkpointNow()).written).toBeGreaterThanOrEqual(1);
    expect((await checkpointNow()).written).toBe(0);
    const listed = (await checkpoints(org)).items;
    expect(listed.map((c) => [c.seq, c.created_at])).toEqual([
      [5, clock.now().toISOString()],
      [3, first.created_at],
    ]);
    expect((await org.client.get(api('/evidence/checkpoints/latest'))).json()).toEqual(listed[0]);
  });

  it('lists checkpoints paged, to holders of evidence:read in their own organisation only', async () => {
    const org = await orgWithChain('Paged');
    for (let i = 0; i < 3; i++) {
      await org.append(1);
      clock.advance(60);
      await checkpointNow();
    }
    const page = await checkpoints(org, 'limit=2');
    expect(page.items.map((c) => c.seq)).toEqual([3, 2]);
    const next = await checkpoints(org, `limit=2&cursor=${encodeURIComponent(page.next_cursor!)}`);
    expect(next).toEqual({ items: [expect.objectContaining({ seq: 1 })], next_cursor: null });

    const auditor = await addMember(t.app, org.client, ['auditor']);
    expect((await auditor.client.get(api('/evidence/checkpoints'))).json().items).toHaveLength(3);
    const viewer = await addMember(t.app, org.client, ['viewer']);
    for (const path of ['/evidence/checkpoints', '/evidence/checkpoints/latest']) {
      const res = await viewer.client.get(api(path));
      expect(res.statusCode).toBe(403);
      expect(res.json().error.details).toEqual({ required_permission: 'evidence:read' });
    }

    const other = await onboardAdmin(t.app, 'Elsewhere');
    expect((await checkpoints(other)).items).toEqual([]);
    expect((await other.client.get(api('/evidence/checkpoints/latest'))).statusCode).toBe(404);
    // Another organisation's cursor is no cursor here.
    expect((await other.client.get(api(`/evidence/checkpoints?cursor=${encodeURIComponent(page.next_cursor!)}`))).json().error.code).toBe('invalid_cursor');
    expectValidation(await org.client.get(api('/evidence/checkpoints?limit=0')), 'query.limit');
    expect((await org.client.get(api('/evidence/checkpoints?cursor=garbage'))).statusCode).toBe(422);
  });

  it('is append-only for the runtime role, which sees one organisation at a time', async () => {
    const org = await orgWithChain('Append only');
    await org.append(1);
    await checkpointNow();
    const runtime = new pg.Client({ connectionString: t.runtimeUrl });
    await runtime.connect();
    try {
      const orgsSeen = async (orgId: string | null) => {
        await runtime.query('begin');
        if (orgId) await runtime.query(`select set_config('app.org_id', $1, true)`, [orgId]);
        const { rows } = await runtime.query('select distinct org_id from evidence_checkpoints');
        await runtime.query('rollback');
        return rows.map((r: { org_id: string }) => r.org_id);
      };
      expect(await orgsSeen(null)).toEqual([]);
      expect(await orgsSeen(org.tenant.id)).toEqual([org.tenant.id]);
      for (const statement of ['delete from evidence_checkpoints', `update evidence_checkpoints set hash = repeat('0', 64)`]) {
        await runtime.query('begin');
        await runtime.query(`select set_config('app.org_id', $1, true)`, [org.tenant.id]);
        await expect(runtime.query(statement)).rejects.toThrow(/permission denied/);
        await runtime.query('rollback');
      }
    } finally {
      await runtime.end();
    }
  });

  describe('the two-checkpoint proof', () => {
    let org: Awaited<ReturnType<typeof orgWithChain>>;
    let older: Checkpoint;
    let newer: Checkpoint;
    let olderFile: string;
    let newerFile: string;

    beforeAll(async () => {
      org = await orgWithChain('Witnessed');
      await org.append(3);
      await checkpointNow();
      clock.advance(HOUR);
      await org.append(3);
      await checkpointNow();
      clock.advance(HOUR);
      await org.append(2); // after the newer checkpoint
      [newer, older] = (await checkpoints(org)).items as [Checkpoint, Checkpoint];
      expect([older.seq, newer.seq]).toEqual([3, 6]);
      // What an auditor stored, elsewhere, as the endpoint answered it.
      olderFile = fileOf(older, 'older.json');
      newerFile = fileOf(newer, 'newer.json');
    }, 60_000);

    const bundleOf = async (window = whole) => fileOf((await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, window)).bytes);

    it('passes for an honest chain: the bundle links the older head to the newer', async () => {
      const file = await bundleOf();
      const cli = await tollgateEvidence('verify', file, '--checkpoint', olderFile, '--checkpoint', newerFile);
      expect(cli.status, cli.stdout + cli.stderr).toBe(0);
      expect(cli.stdout).toContain('OK: 8 records, seq 1..8');
      expect(cli.stdout).toContain(`checkpoint ${olderFile}: seq 3 at ${older.created_at}, signed by ${older.kid}, lies on this chain`);
      expect(cli.stdout).toContain('the chain extends checkpoint seq 3 to checkpoint seq 6');
      // The order given does not matter.
      expect((await tollgateEvidence('verify', file, '--checkpoint', newerFile, '--checkpoint', olderFile)).status).toBe(0);

      // A bundle whose window starts at the older checkpoint's head covers it (its head before the window).
      const fromOlder = await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, { since: new Date(clock.now().getTime() - 3600_000), until: whole.until });
      const v = await verifyBundle(fromOlder.bytes, [
        { name: 'older', value: older },
        { name: 'newer', value: newer },
      ]);
      expect(v).toMatchObject({ valid: true, manifest: { head_before: { seq: 3, hash: older.hash } } });
      // One that starts after it does not: build one whose window covers it.
      const late = await verifyBundle(
        (await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, { since: new Date(clock.now().getTime()), until: whole.until })).bytes,
        [{ name: 'older', value: older }],
      );
      expect(late.broken).toMatchObject({ reason: 'checkpoint_not_covered', seq: 3 });
    }, 60_000);

    it('refuses a checkpoint altered, of another organisation, or signed after another at a lower seq', async () => {
      const bytes = (await buildEvidenceBundle(t.database.db, t.app.deps.evidence, org.tenant.id, whole)).bytes;
      const check = async (value: unknown) => (await verifyBundle(bytes, [{ name: 'stored.json', value }])).broken;
      expect(await check({ ...older, seq: 4 })).toMatchObject({ reason: 'checkpoint_signature_invalid', file: 'stored.json' });
      expect(await check({ ...older, created_at: newer.created_at })).toMatchObject({ reason: 'checkpoint_signature_invalid' });
      expect(await check({ ...older, org_id: newer.org_id.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) })).toMatchObject({ reason: 'checkpoint_invalid' });
      expect(await check({ seq: 3 })).toMatchObject({ reason: 'checkpoint_invalid' });
      // An operator who cut the chain back and signed the shorter head: signed later, at a lower seq.
      const cutBack = { ...older, created_at: new Date(Date.parse(newer.created_at) + 1000).toISOString() };
      const signer = t.app.deps.evidence;
      cutBack.signature = signer.sign(createHash('sha256').update(canonicalize({ org_id: cutBack.org_id, seq: cutBack.seq, hash: cutBack.hash, created_at: cutBack.created_at })).digest('hex'));
      const order = await verifyBundle(bytes, [
        { name: 'newer', value: newer },
        { name: 'cut', value: cutBack },
      ]);
      expect(order.broken).toMatchObject({ reason: 'checkpoint_order', file: 'cut' });

      // On the command line: a file that is not JSON is bad usage; a checkpoint that does not verify, a failure.
      const file = fileOf(bytes);
      expect((await tollgateEvidence('verify', file, '--checkpoint', fileOf(Buffer.from('not json'), 'bad.json'))).status).toBe(2);
      const forged = await tollgateEvidence('verify', file, '--checkpoint', fileOf({ ...newer, seq: 7 }, 'forged.json'));
      expect(forged.status).toBe(1);
      expect(forged.stdout).toMatch(/^BROKEN: checkpoint .*forged\.json \(seq 7, .*\): signature does not verify/);
    }, 60_000);

    it('fails once a record between them is altered, and once the history after the older is rewritten and re-signed', async () => {
      const rows = await owner(async (c) => (await c.query(`select * from evidence_records where org_id = $1 order by seq`, [org.tenant.id])).rows as EvidenceRow[]);
      const between = rows[4]!; // seq 5, between the two checkpoints
      expect(Number(between.seq)).toBe(5);

      // Altered in the database: the record no longer matches its hash.
      await owner((c) => c.query(`update evidence_records set payload = jsonb_set(payload, '{reason}', '"nothing happened"') where id = $1`, [between.id]));
      const altered = await tollgateEvidence('verify', await bundleOf(), '--checkpoint', olderFile, '--checkpoint', newerFile);
      expect(altered.status).toBe(1);
      expect(altered.stdout).toContain(`BROKEN: record 5 (id ${between.id}): hash does not match its body`);

      // Rewritten by someone holding the signing key: that record and every one after it hashed, linked and
      // signed again, the head moved. The chain is whole again and its bundle verifies on its own...
      const signer = t.app.deps.evidence;
      await owner(async (c) => {
        const current = (await c.query(`select * from evidence_records where org_id = $1 and seq >= 5 order by seq`, [org.tenant.id])).rows as EvidenceRow[];
        let prev = rows[3]!.hash;
        await c.query('begin');
        for (const r of current) {
          const body = { ...bodyOf(r), prev_hash: prev };
          const hash = signer.hash(body);
          await c.query('update evidence_records set prev_hash = $1, hash = $2, signature = $3, kid = $4 where id = $5', [prev, hash, signer.sign(hash), signer.kid, r.id]);
          prev = hash;
        }
        await c.query('update evidence_heads set hash = $1 where org_id = $2', [prev, org.tenant.id]);
        await c.query('commit');
      });
      const rewritten = await bundleOf();
      const alone = await tollgateEvidence('verify', rewritten);
      expect(alone.status, alone.stdout).toBe(0);
      expect((await tollgateEvidence('verify', rewritten, '--checkpoint', olderFile)).status).toBe(0);
      // ...but not through the newer checkpoint an auditor stored before the rewrite.
      const witnessed = await tollgateEvidence('verify', rewritten, '--checkpoint', olderFile, '--checkpoint', newerFile);
      expect(witnessed.status).toBe(1);
      expect(witnessed.stdout).toContain(
        `BROKEN: checkpoint ${newerFile} (seq 6, ${newer.created_at}): the bundle's chain has another hash at seq 6: the history was rewritten after the checkpoint`,
      );
    }, 60_000);
  });
});
