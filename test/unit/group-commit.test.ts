import { describe, expect, it } from 'vitest';
import { GroupCommit, type Pipeline } from '../../api/modules/gateway/submission/group-commit.js';
import { seeded } from '../support/seeded.js';

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


/**
 * A stand-in for the gateway's batches that keeps a chain as the evidence chain is kept: each batch
 * builds on the value the batch before hands over (or on the committed value when none is in flight),
 * writes after the one before has committed, and fails if what it built on is not the committed value.
 */
function chainOfBatches(seed: number, opts: { failEvery?: number } = {}) {
  const rnd = seeded(seed).next;
  let committed = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let batches = 0;
  const order: number[] = [];
  const failures: string[] = [];
  let writeLock = Promise.resolve();
  const run = async (_org: string, jobs: number[], { after, release, handOver }: Pipeline<number>) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const n = ++batches;
    try {
      await tick(rnd() * 3);
      const base = after ? await after : undefined;
      const start = base ?? committed;
      const next = start + jobs.length;
      release();
      // Writes queue as the head's row lock queues them.
      const mine = writeLock.then(async () => {
        await tick(rnd() * 3);
        if (opts.failEvery && n % opts.failEvery === 0) throw new Error('rolled back');
        if (start !== committed) throw new Error(`built on ${start}, committed is ${committed}`);
        committed = next;
        order.push(...jobs);
      });
      writeLock = mine.catch(() => undefined);
      handOver(next);
      await mine;
      // The commit's answer can come after the next batch's (one connection each).
      await tick(rnd() * 4);
    } catch (err) {
      failures.push((err as Error).message);
    } finally {
      inFlight--;
    }
  };
  return { run, stats: () => ({ committed, maxInFlight, batches, order, failures }) };
}

describe('GroupCommit, pipelined', () => {
  it('runs at most two batches of one organisation at once, each building on the hand-over of the one before', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const chain = chainOfBatches(seed);
      const group = new GroupCommit<number, number>(chain.run, 8, 2);
      const rnd = seeded(seed * 31).next;
      for (let i = 0; i < 300; i++) {
        group.add('org', i);
        if (rnd() < 0.3) await tick(rnd() * 2);
      }
      for (let waited = 0; chain.stats().committed < 300 && waited < 5000; waited += 10) await tick(10);
      const s = chain.stats();
      expect(s.failures).toEqual([]);
      expect(s.committed).toBe(300);
      // Every job once, in arrival order.
      expect(s.order).toEqual(Array.from({ length: 300 }, (_, i) => i));
      expect(s.maxInFlight).toBeLessThanOrEqual(2);
      expect(s.maxInFlight).toBe(2);
      // Jobs went together: fewer batches than jobs, none larger than the maximum.
      expect(s.batches).toBeLessThan(300);
    }
  });

  it('lets a batch build on the committed value when the one before ended without handing over', async () => {
    // A batch that fails hands over nothing; the next one then reads the committed value itself.
    const chain = chainOfBatches(7, { failEvery: 3 });
    const group = new GroupCommit<number, number>(chain.run, 4, 2);
    for (let i = 0; i < 100; i++) {
      group.add('org', i);
      if (i % 5 === 0) await tick(1);
    }
    await tick(1500);
    const s = chain.stats();
    // Only the deliberate rollbacks, and the batch each one's hand-over misled, failed.
    for (const f of s.failures) expect(f === 'rolled back' || f.startsWith('built on')).toBe(true);
    expect(s.failures.filter((f) => f === 'rolled back').length).toBeGreaterThan(0);
  });

  it('starts a batch beside one in flight only for enough jobs, and otherwise waits for it to end', async () => {
    const started: number[][] = [];
    let finish!: () => void;
    const first = new Promise<void>((resolve) => (finish = resolve));
    const group = new GroupCommit<number, number>(
      async (_org, jobs, { release, handOver }) => {
        started.push(jobs);
        release();
        if (started.length === 1) await first;
        handOver(jobs.length);
      },
      128,
      2,
      4,
    );
    group.add('org', 0);
    await tick(5);
    for (const j of [1, 2, 3]) group.add('org', j);
    await tick(5);
    // Three jobs wait for the batch in flight rather than go as a small batch beside it.
    expect(started).toEqual([[0]]);
    group.add('org', 4);
    await tick(5);
    expect(started).toEqual([[0], [1, 2, 3, 4]]);
    group.add('org', 5);
    await tick(5);
    expect(started).toHaveLength(2);
    finish();
    await tick(5);
    expect(started).toEqual([[0], [1, 2, 3, 4], [5]]);
  });

  it('starts an idle organisation\'s batch with every job added in the same turn of the event loop', async () => {
    const started: number[][] = [];
    const group = new GroupCommit<number, number>(async (_org, jobs, { release, handOver }) => {
      started.push(jobs);
      release();
      await tick(1);
      handOver(jobs.length);
    });
    // Requests read in one turn (the process was busy while they arrived) go as one batch, not as a batch of
    // the first and then one of the rest.
    for (const j of [0, 1, 2]) group.add('org', j);
    expect(started).toEqual([]);
    await tick(5);
    expect(started).toEqual([[0, 1, 2]]);
    group.add('org', 3);
    await tick(5);
    expect(started).toEqual([[0, 1, 2], [3]]);
  });

  it('keeps organisations apart and forgets an organisation once its queue is empty', async () => {
    const seen = new Map<string, number[]>();
    const group = new GroupCommit<number, number>(async (org, jobs, { release, handOver }) => {
      await tick(1);
      release();
      seen.set(org, [...(seen.get(org) ?? []), ...jobs]);
      handOver(jobs.length);
    });
    for (let i = 0; i < 20; i++) group.add(i % 2 ? 'a' : 'b', i);
    await tick(100);
    expect(seen.get('a')).toEqual([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
    expect(seen.get('b')).toEqual([0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
    expect((group as unknown as { orgs: Map<string, unknown> }).orgs.size).toBe(0);
  });
});
