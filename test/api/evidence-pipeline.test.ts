import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inScope } from '../../api/db/database.js';
import { appendAfter, appendEvidence, chainEvents, HeadMoved, writeChained, type ChainHead, type EvidenceEvent } from '../../api/modules/evidence/chain.js';
import { EvidenceSigner } from '../../api/modules/evidence/signer.js';
import { api, asOwner, onboardAdmin, startTestApp, type TestApp } from '../support/harness.js';

/**
 * The gateway's pipelined appends (D36): a batch chains its records after the head the batch before it
 * hands over, without locking the head, and its write applies only once that batch has committed and
 * only if the head is still the one it chained after. Two real transactions on PostgreSQL.
 */
describe('evidence appended after a head held by another transaction', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let signer: EvidenceSigner;
  let orgId: string;
  let n = 0;
  const event = (): EvidenceEvent => ({ eventType: 'test.pipeline', correlationId: `pipeline-${++n}`, payload: { n } });

  const recordsOf = () =>
    asOwner(t, async (c) => (await c.query(`select count(*)::int as n from evidence_records where org_id = $1`, [orgId])).rows[0].n as number);
  const head = () =>
    asOwner(t, async (c) => {
      const r = (await c.query(`select seq, hash from evidence_heads where org_id = $1`, [orgId])).rows[0];
      return { seq: Number(r.seq), hash: r.hash as string };
    });
  const verify = async () => (await admin.client.get(api('/evidence/verify'))).json();

  /** A transaction that appends one event after the locked head and stays open until `end` settles. */
  function holdingAppend(end: Promise<'commit' | 'rollback'>) {
    let written!: (h: ChainHead) => void;
    const headAfter = new Promise<ChainHead>((resolve) => (written = resolve));
    const done = inScope(t.database.db, { orgId }, async (tx) => {
      const locked = await tx.selectFrom('evidence_heads').select(['seq', 'hash']).where('org_id', '=', orgId).forUpdate().executeTakeFirstOrThrow();
      const records = await appendAfter(tx, signer, orgId, { seq: Number(locked.seq), hash: locked.hash }, [event()], new Date());
      written({ seq: records.at(-1)!.seq, hash: records.at(-1)!.hash });
      if ((await end) === 'rollback') throw new Error('rolled back on purpose');
    }).catch((err: Error) => err.message);
    return { headAfter, done };
  }

  /** Chains two events after `after` and writes them without holding the head. */
  const appendUnlocked = (after: ChainHead) =>
    inScope(t.database.db, { orgId }, async (tx) => {
      const chained = chainEvents(signer, orgId, after, [event(), event()], new Date());
      await writeChained(tx, orgId, chained, [], after);
      return chained.head;
    });

  beforeAll(async () => {
    t = await startTestApp();
    signer = new EvidenceSigner(t.config.evidenceSigningSeed, t.config.evidencePreviousSeeds);
    admin = await onboardAdmin(t.app);
    orgId = admin.tenant.id;
    // The organisation's first record creates its head.
    await inScope(t.database.db, { orgId }, (tx) => appendEvidence(tx, signer, orgId, [event()], new Date()));
  });
  afterAll(() => t?.close());

  it('waits for the transaction holding the head and applies after its commit, the chain in one line', async () => {
    let end!: (how: 'commit' | 'rollback') => void;
    const held = holdingAppend(new Promise((resolve) => (end = resolve)));
    const after = await held.headAfter;
    let settled = false;
    const unlocked = appendUnlocked(after).finally(() => (settled = true));
    // The unlocked write waits on the head's row while the other transaction is open.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(settled).toBe(false);
    end('commit');
    expect(await held.done).toBeUndefined();
    const next = await unlocked;
    expect(next.seq).toBe(after.seq + 2);
    expect(await head()).toEqual(next);
    expect(await verify()).toMatchObject({ valid: true, first_broken: null, head_seq: next.seq });
  });

  it('refuses with HeadMoved when the transaction it followed rolls back, leaving nothing behind', async () => {
    const before = await head();
    const count = await recordsOf();
    let end!: (how: 'commit' | 'rollback') => void;
    const held = holdingAppend(new Promise((resolve) => (end = resolve)));
    const unlocked = appendUnlocked(await held.headAfter).catch((err: unknown) => err);
    await new Promise((resolve) => setTimeout(resolve, 300));
    end('rollback');
    expect(await held.done).toBe('rolled back on purpose');
    expect(await unlocked).toBeInstanceOf(HeadMoved);
    expect(await head()).toEqual(before);
    expect(await recordsOf()).toBe(count);
    expect(await verify()).toMatchObject({ valid: true, first_broken: null, head_seq: before.seq });
  });

  it('refuses with HeadMoved when the head moved on before it, and the append after the true head applies', async () => {
    const stale = await head();
    await appendUnlocked(stale);
    const count = await recordsOf();
    await expect(appendUnlocked(stale)).rejects.toBeInstanceOf(HeadMoved);
    expect(await recordsOf()).toBe(count);
    const next = await appendUnlocked(await head());
    expect(await recordsOf()).toBe(count + 2);
    expect(await verify()).toMatchObject({ valid: true, first_broken: null, head_seq: next.seq });
  });
});
