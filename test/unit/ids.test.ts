import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../api/db/ids.js';

describe('timeOrderedId', () => {
  it('is a UUID of version 7 whose first 48 bits are the time in milliseconds', () => {
    const before = Date.now();
    const id = timeOrderedId();
    const after = Date.now();
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  it('increases from one id to the next, within a millisecond too, and never repeats', () => {
    const ids = Array.from({ length: 10_000 }, () => timeOrderedId());
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('carries fresh random bits in every id, across the refills of its pool of random bytes (256 ids each)', () => {
    const ids = Array.from({ length: 10_000 }, () => timeOrderedId());
    // The last 48 bits are random bytes only (the counter is in the bits before them).
    const tails = ids.map((id) => id.slice(-12));
    expect(new Set(tails).size).toBe(ids.length);
    // And the counter starts from random bits in each new millisecond: the first ids of five milliseconds.
    const firsts: string[] = [];
    for (let ms = Date.now(); firsts.length < 5; ) {
      while (Date.now() === ms);
      ms = Date.now();
      firsts.push(timeOrderedId());
    }
    expect(new Set(firsts.map((id) => id.slice(14, 23))).size).toBe(5);
  });
});
