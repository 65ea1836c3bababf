import { describe, expect, it } from 'vitest';
import type { Clock, Timers } from '../../lib/clock.js';
import { WorkQueue } from '../../controller/queue.js';

/** A clock that moves only when the test says so. */
class FakeClock implements Clock, Timers {
  private t = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  now = () => new Date(this.t);
  setTimeout = (fn: () => void, ms: number) => {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  };
  clearTimeout = (h: unknown) => void this.timers.delete(h as number);
  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const end = this.t + ms;
    for (;;) {
      const next = [...this.timers.entries()].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = end;
  }
  get pending(): number {
    return this.timers.size;
  }
}

const tick = () => new Promise((r) => setImmediate(r));

/** A promise with its resolve, to hold a reconcile open. */
function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

describe('WorkQueue', () => {
  it('queues a key once however often it is added, in order of first add', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    for (const k of ['ns/a', 'ns/b', 'ns/a', 'ns/a', 'ns/c', 'ns/b']) q.add(k);
    expect(q.length).toBe(3);
    expect([await q.get(), await q.get(), await q.get()]).toEqual(['ns/a', 'ns/b', 'ns/c']);
    expect(q.length).toBe(0);
  });

  it('processes a key added while in flight again after done, never twice at once', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('ns/a');
    expect(await q.get()).toBe('ns/a');
    q.add('ns/a');
    q.add('ns/a');
    expect(q.length).toBe(0); // not handed out while in flight
    q.done('ns/a');
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('ns/a');
    q.done('ns/a');
    expect(q.length).toBe(0);
  });

  it('with many workers, runs one reconcile per key at a time and catches up with changes made meanwhile', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    const inFlight = new Set<string>();
    let overlap = false;
    const runs: string[] = [];
    const first = gate();
    const running = q.run(4, async (key) => {
      if (inFlight.has(key)) overlap = true;
      inFlight.add(key);
      runs.push(key);
      if (runs.length === 1) await first.p;
      await tick();
      inFlight.delete(key);
    });
    q.add('ns/a');
    await tick();
    expect(runs).toEqual(['ns/a']);
    q.add('ns/a'); // changed while being reconciled
    q.add('ns/b');
    await tick();
    await tick();
    expect(runs).toEqual(['ns/a', 'ns/b']); // b goes to another worker, a waits
    first.open();
    for (let i = 0; i < 10; i++) await tick();
    expect(runs).toEqual(['ns/a', 'ns/b', 'ns/a']);
    expect(overlap).toBe(false);
    await q.shutDown();
    await running;
  });

  it('backs off per key, doubling from the base to the cap, and forget resets it', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, baseDelayMs: 100, maxDelayMs: 1000 });
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      q.addRateLimited('ns/a');
      const start = clock.now().getTime();
      while (q.length === 0) clock.advance(1);
      delays.push(clock.now().getTime() - start);
      q.done((await q.get())!);
    }
    expect(delays).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(q.numRequeues('ns/a')).toBe(6);
    expect(q.numRequeues('ns/b')).toBe(0); // per key
    q.forget('ns/a');
    expect(q.numRequeues('ns/a')).toBe(0);
    q.addRateLimited('ns/a');
    clock.advance(99);
    expect(q.length).toBe(0);
    clock.advance(1);
    expect(q.length).toBe(1);
  });

  it('run retries a throwing reconcile with backoff and forgets after success; requeueAfterMs comes back later', async () => {
    const clock = new FakeClock();
    const errors: string[] = [];
    const q = new WorkQueue({ clock, baseDelayMs: 100, onError: (k, e) => errors.push(`${k}: ${(e as Error).message}`) });
    let calls = 0;
    const running = q.run(1, async (key) => {
      calls++;
      if (key === 'ns/flaky' && calls <= 2) throw new Error('registry down');
      if (key === 'ns/poll') return { requeueAfterMs: 30_000 };
    });
    q.add('ns/flaky');
    await tick();
    expect(calls).toBe(1);
    expect(q.numRequeues('ns/flaky')).toBe(1);
    clock.advance(99);
    await tick();
    expect(calls).toBe(1);
    clock.advance(1);
    await tick();
    expect(calls).toBe(2);
    clock.advance(200);
    await tick();
    expect(calls).toBe(3);
    expect(q.numRequeues('ns/flaky')).toBe(0); // succeeded: forgotten
    expect(errors).toEqual(['ns/flaky: registry down', 'ns/flaky: registry down']);

    q.add('ns/poll');
    await tick();
    expect(calls).toBe(4);
    clock.advance(29_999);
    await tick();
    expect(calls).toBe(4);
    clock.advance(1);
    await tick();
    expect(calls).toBe(5);
    await q.shutDown();
    await running;
    expect(clock.pending).toBe(0); // the next poll's timer is cancelled
  });

  it('addAfter delays a key and keeps the earliest deadline', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('ns/a', 1000);
    q.addAfter('ns/a', 5000); // later: ignored
    q.addAfter('ns/b', 500);
    q.addAfter('ns/b', 200); // earlier: wins
    q.addAfter('ns/c', 0); // now
    expect(q.length).toBe(1);
    clock.advance(200);
    expect(q.length).toBe(2);
    clock.advance(800);
    expect(q.length).toBe(3);
    clock.advance(10_000);
    expect(q.length).toBe(3);
  });

  it('shutDown waits for work in flight, drops what is queued, and ends the workers', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    const hold = gate();
    const seen: string[] = [];
    let finished = 0;
    const running = q.run(2, async (key) => {
      seen.push(key);
      await hold.p;
      finished++;
    });
    q.add('ns/a');
    q.add('ns/b');
    q.add('ns/c');
    q.addAfter('ns/d', 1000);
    await tick();
    expect(seen).toEqual(['ns/a', 'ns/b']);
    let drained = false;
    const stopping = q.shutDown().then(() => (drained = true));
    await tick();
    expect(drained).toBe(false); // a and b are still running
    q.add('ns/e'); // ignored after shutdown
    hold.open();
    await stopping;
    await running;
    expect(finished).toBe(2);
    expect(seen).toEqual(['ns/a', 'ns/b']);
    expect(clock.pending).toBe(0);
    expect(await q.get()).toBeUndefined();
  });
});
