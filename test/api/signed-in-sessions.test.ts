import { afterEach, describe, expect, it } from 'vitest';
import { addMember, api, Client, onboardAdmin, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/**
 * Signed-in requests read who is calling from a per-process cache (docs/authentication.md, Sessions and
 * their bound): a sign-out, a role change or a disabled member takes effect at once in the process that
 * made the change, and in every other API process within TOKEN_REVOCATION_CACHE_SECONDS. Two apps on one
 * PostgreSQL database stand for two replicas; a hand-moved clock stands for the bound passing.
 */

const BOUND_SECONDS = 1;

/** The same browser, talking to another replica: a copy of its cookies. */
function sameBrowser(app: TestApp['app'], of: Client): Client {
  const c = new Client(app);
  for (const [k, v] of of.cookies) c.cookies.set(k, v);
  return c;
}

describe('signed-in sessions across API processes', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.reverse()) await t.close();
    apps.length = 0;
  });
  const replicas = async (env: Record<string, string> = {}) => {
    const clock = new TestClock(new Date('2026-11-23T09:00:00.000Z'));
    const one = await startTestApp({ clock, env: { TOKEN_REVOCATION_CACHE_SECONDS: String(BOUND_SECONDS), ...env } });
    apps.push(one);
    const two = await startTestApp({ clock, share: one, env: { TOKEN_REVOCATION_CACHE_SECONDS: String(BOUND_SECONDS), ...env } });
    apps.push(two);
    return { clock, one, two };
  };

  it('a signed-out session is refused at once where it signed out, and by another replica within the bound', async () => {
    const { clock, one, two } = await replicas();
    const admin = await onboardAdmin(one.app);
    const onTwo = sameBrowser(two.app, admin.client);
    const stale = sameBrowser(one.app, admin.client);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await stale.get(api('/auth/me'))).statusCode).toBe(200);

    expect((await admin.client.post(api('/auth/logout'))).statusCode).toBe(204);
    // The cookie kept by another tab of the same browser: refused by the process that signed out, at once.
    const refused = await stale.get(api('/auth/me'));
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.code).toBe('unauthenticated');

    // The other replica read the session before the sign-out; it reads it afresh within the bound.
    clock.advance(BOUND_SECONDS);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(401);
    expect((await onTwo.get(api('/users'))).statusCode).toBe(401);
  });

  it("a role change takes the permission away at once where it was made, and on another replica within the bound", async () => {
    const { clock, one, two } = await replicas();
    const admin = await onboardAdmin(one.app);
    const member = await addMember(one.app, admin.client, ['security_admin']);
    const memberOnTwo = sameBrowser(two.app, member.client);
    expect((await member.client.get(api('/users'))).statusCode).toBe(200);
    expect((await memberOnTwo.get(api('/users'))).statusCode).toBe(200);

    const patched = await admin.client.patch(api(`/users/${member.userId}`), { roles: ['approver'] });
    expect(patched.statusCode).toBe(200);

    const here = await member.client.get(api('/users'));
    expect(here.statusCode).toBe(403);
    expect(here.json().error.details).toMatchObject({ required_permission: 'user:read' });
    const me = (await member.client.get(api('/auth/me'))).json();
    expect(me.roles).toEqual(['approver']);
    expect(me.permissions).not.toContain('user:read');

    clock.advance(BOUND_SECONDS);
    expect((await memberOnTwo.get(api('/users'))).statusCode).toBe(403);
    expect((await memberOnTwo.get(api('/auth/me'))).json().roles).toEqual(['approver']);
    // A role given is honoured the same way: at once here.
    await admin.client.patch(api(`/users/${member.userId}`), { roles: ['security_admin'] });
    expect((await member.client.get(api('/users'))).statusCode).toBe(200);
  });

  it('a disabled member is signed out at once where it was done, and on another replica within the bound', async () => {
    const { clock, one, two } = await replicas();
    const admin = await onboardAdmin(one.app);
    const member = await addMember(one.app, admin.client, ['security_admin']);
    const memberOnTwo = sameBrowser(two.app, member.client);
    expect((await member.client.get(api('/auth/me'))).statusCode).toBe(200);
    expect((await memberOnTwo.get(api('/auth/me'))).statusCode).toBe(200);

    expect((await admin.client.patch(api(`/users/${member.userId}`), { status: 'disabled' })).statusCode).toBe(200);
    expect((await member.client.get(api('/auth/me'))).statusCode).toBe(401);

    clock.advance(BOUND_SECONDS);
    expect((await memberOnTwo.get(api('/auth/me'))).statusCode).toBe(401);
    // The administrator's own session was not touched by any of it.
    expect((await admin.client.get(api('/users'))).statusCode).toBe(200);
  });

  it('a change made by another replica is seen on the next request once the bound has passed, not later', async () => {
    const { clock, one, two } = await replicas();
    const admin = await onboardAdmin(one.app);
    const onTwo = sameBrowser(two.app, admin.client);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
    // Signing out of every session through replica one, while replica two keeps serving the person.
    expect((await admin.client.post(api('/auth/logout-all'))).statusCode).toBe(204);
    clock.advance(BOUND_SECONDS / 2);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(200);
    clock.advance(BOUND_SECONDS / 2);
    expect((await onTwo.get(api('/auth/me'))).statusCode).toBe(401);
  });

  it('with TOKEN_REVOCATION_CACHE_SECONDS=0 every replica reads the session on every request', async () => {
    const { one, two } = await replicas({ TOKEN_REVOCATION_CACHE_SECONDS: '0' });
    const admin = await onboardAdmin(one.app);
    const member = await addMember(one.app, admin.client, ['security_admin']);
    const memberOnTwo = sameBrowser(two.app, member.client);
    expect((await memberOnTwo.get(api('/users'))).statusCode).toBe(200);
    await admin.client.patch(api(`/users/${member.userId}`), { roles: ['approver'] });
    expect((await memberOnTwo.get(api('/users'))).statusCode).toBe(403);
    await admin.client.patch(api(`/users/${member.userId}`), { status: 'disabled' });
    expect((await memberOnTwo.get(api('/auth/me'))).statusCode).toBe(401);
  });
});
