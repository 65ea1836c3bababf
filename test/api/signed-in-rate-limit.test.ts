import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { api, Client, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * The per-person rate limit under concurrent load on two API processes sharing one PostgreSQL database
 * (docs/decisions.md, D9): hits take positions in the window's shared count, claimed ahead under load,
 * so never more than the limit is admitted across processes, and a person is refused early by at most
 * 3/16 of the limit per process (positions claimed ahead and not used).
 */

const LIMIT = 160;
/** What positions claimed ahead and not used can cost per process, at most (rate-limit.ts, PositionClaims). */
const EARLY_PER_PROCESS = Math.floor((3 * LIMIT) / 16);

describe('the person rate limit under concurrent load on two API processes', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.reverse()) await t.close();
    apps.length = 0;
  });

  it('never admits more than the limit across both, counts every hit in the shared table, and refuses early by at most its bound', async () => {
    const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
    const env = { RATE_LIMIT_PERSON_PER_MINUTE: String(LIMIT) };
    const one = await startTestApp({ clock, env });
    apps.push(one);
    const two = await startTestApp({ clock, env, share: one });
    apps.push(two);
    const admin = await onboardAdmin(one.app);
    const onTwo = new Client(two.app);
    for (const [k, v] of admin.client.cookies) onTwo.cookies.set(k, v);
    clock.advance(60); // a fresh window: sign-in's requests are not in it

    // 16 callers on each process, each sending requests back to back: hits queue behind claims in flight.
    const perCaller = 10;
    const statuses: number[] = [];
    const callers = [admin.client, onTwo].flatMap((c) =>
      Array.from({ length: 16 }, async () => {
        for (let i = 0; i < perCaller; i++) statuses.push((await c.get(api('/auth/me'))).statusCode);
      }),
    );
    await Promise.all(callers);

    const sent = 2 * 16 * perCaller;
    expect(statuses).toHaveLength(sent);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    const admitted = statuses.filter((s) => s === 200).length;
    expect(admitted).toBeLessThanOrEqual(LIMIT);
    expect(admitted).toBeGreaterThanOrEqual(LIMIT - 2 * EARLY_PER_PROCESS);

    // Every hit reached the shared count (refusals too), plus at most the positions claimed ahead. A refusal
    // answered without a round trip is counted by the next claim, which may still be on its way when the last
    // answer arrives: the count gets there within a round trip or two, and never beyond the bound.
    const owner = new pg.Client({ connectionString: one.ownerUrl });
    await owner.connect();
    try {
      const shared = async () =>
        (await owner.query<{ count: number }>(`select count from rate_limit_buckets where key = $1`, [`person:${admin.userId}`])).rows[0]!.count;
      await expect.poll(shared, { timeout: 5000, interval: 20 }).toBeGreaterThanOrEqual(sent);
      expect(await shared()).toBeLessThanOrEqual(sent + 2 * EARLY_PER_PROCESS);
    } finally {
      await owner.end();
    }

    // Refused on both processes now, and answered again in the next window.
    expect((await admin.client.get(api('/auth/me'))).statusCode).toBe(429);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(429);
    clock.advance(60);
    expect((await admin.client.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
  });
});
