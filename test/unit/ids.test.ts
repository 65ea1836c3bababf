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
});
