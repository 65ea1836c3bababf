import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, Client, startTestApp, type TestApp } from '../support/harness.js';

describe('sign-in, onboarding and the first user (PostgreSQL, runtime role)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => t.close());

  it('walks a newcomer from development sign-in to a second user', async () => {
    const c = new Client(t.app);
    const login = await c.post(api('/auth/dev-login'), { email: 'walk@example.com' });
    expect(login.statusCode).toBe(200);
    expect(login.json().status).toBe('onboarding');

    const onboarding = await c.get(api('/auth/onboarding'));
    expect(onboarding.statusCode).toBe(200);
    expect(onboarding.json().user.email).toBe('walk@example.com');

    const org = await c.post(api('/tenants/onboard'), {
      name: 'Walkthrough Ltd',
      slug: 'walkthrough',
      primary_region: 'eu-west',
      admin_display_name: 'Walk Er',
    });
    expect(org.statusCode).toBe(201);

    const me = await c.get(api('/auth/me'));
    expect(me.statusCode).toBe(200);
    expect(me.json().roles).toEqual(['org_admin']);
    expect(me.json().permissions).toHaveLength(40);

    const user = await c.post(api('/users'), { email: 'second@example.com', display_name: 'Sec Ond', roles: ['auditor'] });
    expect(user.statusCode).toBe(201);
    expect(user.json()).toMatchObject({ email: 'second@example.com', roles: ['auditor'], status: 'active', version: 1 });
  });
});
