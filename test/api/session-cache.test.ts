import { describe, expect, it } from 'vitest';
import { SessionCache } from '../../api/platform/auth.js';
import type { PersonPrincipal } from '../../api/platform/context.js';
import { TestClock } from '../support/harness.js';

/**
 * What is remembered with a session (SessionCache.remembered, behind GET /auth/me) lives and dies with the
 * session's entry: read once per entry, never past the bound, never put back by a read that began before a
 * change. The process-level behaviour, on PostgreSQL and two replicas, is test/api/signed-in-me.test.ts.
 */

const TTL_MS = 1000;

function person(orgId: string): PersonPrincipal {
  return {
    kind: 'person',
    sessionId: 's',
    userId: 'u',
    email: 'ada@example.com',
    displayName: 'Ada',
    orgId,
    roles: ['viewer'],
    permissions: new Set(),
    csrfToken: 'c',
  };
}

/** A cache over a session store whose one session acts in `org.current`, and a view that counts its reads. */
function setup(ttlMs = TTL_MS) {
  const clock = new TestClock();
  const org = { current: 'org-1' };
  const cache = new SessionCache(ttlMs, clock, async () => person(org.current));
  let reads = 0;
  const view = (p: PersonPrincipal) => async () => {
    reads++;
    return `view of ${p.orgId} #${reads}`;
  };
  const me = async () => {
    const p = (await cache.person('token'))!;
    return cache.remembered('token', p, 'me', view(p));
  };
  return { clock, org, cache, me, reads: () => reads };
}

describe('what is remembered with a session', () => {
  it('is read once while the session is remembered, and again once the bound has passed', async () => {
    const { clock, me, reads } = setup();
    expect(await me()).toBe('view of org-1 #1');
    expect(await me()).toBe('view of org-1 #1');
    clock.advance(TTL_MS / 1000 - 0.001);
    expect(await me()).toBe('view of org-1 #1');
    clock.advance(0.001);
    expect(await me()).toBe('view of org-1 #2');
    expect(reads()).toBe(2);
  });

  it('is forgotten with the session on a change, and a read begun before the change does not come back', async () => {
    const { org, cache, me } = setup();
    expect(await me()).toBe('view of org-1 #1');
    // A read in flight (the entry was forgotten, a new one read) when the session moves.
    cache.clear();
    const before = me();
    org.current = 'org-2';
    cache.clear();
    await before;
    expect(await me()).toMatch(/^view of org-2 #/);
    expect(await me()).toBe(await me());
  });

  it('is not remembered when its read fails', async () => {
    const clock = new TestClock();
    const cache = new SessionCache(TTL_MS, clock, async () => person('org-1'));
    const p = (await cache.person('token'))!;
    let calls = 0;
    const flaky = async () => {
      calls++;
      if (calls === 1) throw new Error('database unreachable');
      return 'view';
    };
    await expect(cache.remembered('token', p, 'me', flaky)).rejects.toThrow('database unreachable');
    expect(await cache.remembered('token', p, 'me', flaky)).toBe('view');
    expect(await cache.remembered('token', p, 'me', flaky)).toBe('view');
    expect(calls).toBe(2);
  });

  it('is not kept for a principal the cache no longer holds, nor with TOKEN_REVOCATION_CACHE_SECONDS=0', async () => {
    const { cache, me, reads } = setup();
    const stale = (await cache.person('token'))!;
    cache.clear();
    await me();
    // The request that authenticated before the change reads afresh, and leaves nothing behind.
    await cache.remembered('token', stale, 'me', async () => 'stale view');
    expect(await me()).toBe('view of org-1 #1');
    expect(reads()).toBe(1);

    const none = setup(0);
    await none.me();
    await none.me();
    expect(none.reads()).toBe(2);
  });
});
