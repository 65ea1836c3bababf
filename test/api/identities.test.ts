import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyObject } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { caller } from '../../api/platform/route.js';
import { agentOf } from '../../api/platform/auth.js';
import { TokenService } from '../../api/modules/identities/tokens.js';
import { api, Client, expectValidation, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';
import { eventually } from '../support/kubectl.js';

/** A gateway-style operation for the tests: agent tokens are accepted by gateway operations only. */
function whoami(app: FastifyInstance) {
  app.get(api('/test/whoami'), caller('agent'), async (req) => agentOf(req));
}

const asAgent = (t: TestApp, token: string) =>
  t.app.inject({ method: 'GET', url: api('/test/whoami'), headers: { authorization: `Bearer ${token}` } });

describe('workload identities, token exchange and containment', () => {
  let t: TestApp;
  const clock = new TestClock();
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;

  beforeAll(async () => {
    t = await startTestApp({ clock, routes: whoami, env: { RATE_LIMIT_SIGNIN_PER_MINUTE: '1000' } });
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
  });
  afterAll(async () => t.close());

  async function agentWithIdentity(client: Client = admin.client) {
    const agent = (await client.post(api('/agents'), { name: `Agent ${Math.random().toString(36).slice(2, 8)}` })).json();
    const identity = (await client.post(api(`/agents/${agent.id}/identities`))).json();
    return { agent, identity };
  }
  const exchange = (client_id: string, client_secret: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: api('/identities/token'),
      headers,
      payload: { grant_type: 'client_credentials', client_id, client_secret },
    });
  async function tokenFor(identity: { client_id: string; client_secret: string }) {
    const res = await exchange(identity.client_id, identity.client_secret);
    expect(res.statusCode).toBe(200);
    return res.json().access_token as string;
  }

  describe('POST /agents/{id}/identities and GET /identities', () => {
    it('issues a prefixed client ID and a secret shown once, stored only as a slow hash', async () => {
      const { agent, identity } = await agentWithIdentity();
      expect(identity).toMatchObject({ agent_id: agent.id, status: 'active' });
      expect(identity.client_id).toMatch(/^tgc_[0-9a-f]{24}$/);
      expect(identity.client_secret).toMatch(/^tgs_[A-Za-z0-9_-]{43}$/);

      const listed = (await admin.client.get(api(`/identities?agent_id=${agent.id}`))).json().items;
      expect(listed).toEqual([expect.objectContaining({ id: identity.id, client_id: identity.client_id })]);
      expect(JSON.stringify(listed)).not.toContain(identity.client_secret);
      expect(listed[0]).not.toHaveProperty('client_secret');

      const owner = new pg.Client({ connectionString: t.ownerUrl });
      await owner.connect();
      const { rows } = await owner.query('select * from workload_identities where id = $1', [identity.id]);
      await owner.end();
      expect(rows[0].secret_hash).toMatch(/^hmac256\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      expect(JSON.stringify(rows)).not.toContain(identity.client_secret);
      expect(JSON.stringify(rows)).not.toContain(identity.client_secret.slice(4));

      await tokenFor(identity);
      expect(t.logs.join('\n')).not.toContain(identity.client_secret);
    });

    it("answers 404 for another organisation's agent, 409 for a revoked agent, and lists only this organisation's", async () => {
      const b = await onboardAdmin(t.app);
      const { agent } = await agentWithIdentity();
      expect((await b.client.post(api(`/agents/${agent.id}/identities`))).statusCode).toBe(404);
      expect((await b.client.get(api(`/identities?agent_id=${agent.id}`))).json().items).toEqual([]);
      expectValidation(await admin.client.get(api('/identities?agent_id=nope')), 'query.agent_id');
      await admin.client.post(api(`/agents/${agent.id}/revoke`), { reason: 'gone for good', confirm: true });
      expect((await admin.client.post(api(`/agents/${agent.id}/identities`))).statusCode).toBe(409);
    });
  });

  describe('POST /identities/token', () => {
    it('returns a 300-second Ed25519 token for the gateway audience, with a key id and the agent URI', async () => {
      const { agent, identity } = await agentWithIdentity();
      const res = await exchange(identity.client_id, identity.client_secret);
      expect(res.json()).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 300,
        agent_uri: `agent://${admin.tenant.slug}/${agent.slug}`,
      });
      const token = res.json().access_token;
      expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'EdDSA', kid: expect.any(String) });
      const claims = decodeJwt(token);
      expect(claims).toMatchObject({ aud: 'svc-gateway', agt: agent.id, idn: identity.id });
      expect(claims.exp! - claims.iat!).toBe(300);

      const me = await asAgent(t, token);
      expect(me.statusCode).toBe(200);
      expect(me.json()).toMatchObject({ kind: 'agent', agentId: agent.id, orgId: admin.tenant.id, agentUri: res.json().agent_uri });
      // The token can be used again until it expires.
      expect((await asAgent(t, token)).statusCode).toBe(200);
    });

    it('answers invalid_client alike for an unknown client and a wrong secret, and audits the wrong secret', async () => {
      const { identity } = await agentWithIdentity();
      const unknown = await exchange('tgc_000000000000000000000000', identity.client_secret);
      const wrong = await exchange(identity.client_id, `${identity.client_secret}x`);
      for (const res of [unknown, wrong]) {
        expect(res.statusCode).toBe(401);
        expect(res.json().error.code).toBe('invalid_client');
      }
      expect(unknown.json().error.message).toBe(wrong.json().error.message);
      // The entry is written once the answer is on its way (so that it does not show in the answer's time).
      const denied = await eventually(async () => {
        const items = (await admin.client.get(api(`/audit?action=identity.token_denied&target_id=${identity.id}`))).json().items;
        return items.length > 0 ? items : undefined;
      });
      expect(denied).toEqual([expect.objectContaining({ outcome: 'denied' })]);
    });

    it.each([
      ['grant_type', { grant_type: 'password', client_id: 'a', client_secret: 'b' }],
      ['client_id', { grant_type: 'client_credentials', client_id: 'x'.repeat(81), client_secret: 'b' }],
      ['client_secret', { grant_type: 'client_credentials', client_id: 'a', client_secret: 'x'.repeat(201) }],
      ['client_secret', { grant_type: 'client_credentials', client_id: 'a' }],
    ])('answers 422 naming %s', async (field, payload) => {
      expectValidation(await t.app.inject({ method: 'POST', url: api('/identities/token'), payload }), field);
    });

    it('answers identity_revoked for a revoked identity, at exchange and for tokens issued before', async () => {
      const { identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      const revoke = await admin.client.post(api(`/identities/${identity.id}/revoke`), { reason: 'leaked in a log', confirm: true });
      expect(revoke.json()).toMatchObject({ status: 'revoked', revoked_at: expect.any(String) });
      expect((await asAgent(t, token)).json().error.code).toBe('identity_revoked');
      expect((await exchange(identity.client_id, identity.client_secret)).json().error.code).toBe('identity_revoked');
      expect((await admin.client.post(api(`/identities/${identity.id}/revoke`), { reason: 'again', confirm: true })).statusCode).toBe(409);
      const b = await onboardAdmin(t.app);
      expect((await b.client.post(api(`/identities/${identity.id}/revoke`), { reason: 'not mine', confirm: true })).statusCode).toBe(404);
    });

    it('answers session_revoked once the agent is suspended, even for a token issued a moment before', async () => {
      const { agent, identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      expect((await asAgent(t, token)).statusCode).toBe(200);
      await admin.client.post(api(`/agents/${agent.id}/suspend`), { reason: 'odd behaviour', confirm: true });
      const after = await asAgent(t, token);
      expect(after.statusCode).toBe(401);
      expect(after.json().error.code).toBe('session_revoked');
      expect((await exchange(identity.client_id, identity.client_secret)).json().error.code).toBe('session_revoked');
      await admin.client.post(api(`/agents/${agent.id}/restore`), { reason: 'cleared', confirm: true });
      // The old token stays dead; a new one works.
      expect((await asAgent(t, token)).json().error.code).toBe('session_revoked');
      expect((await asAgent(t, await tokenFor(identity))).statusCode).toBe(200);
    });

    it('answers session_revoked after revoke-sessions, while new tokens work', async () => {
      const { agent, identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      await admin.client.post(api(`/agents/${agent.id}/revoke-sessions`), { reason: 'rotate everything', confirm: true });
      expect((await asAgent(t, token)).json().error.code).toBe('session_revoked');
      expect((await asAgent(t, await tokenFor(identity))).statusCode).toBe(200);
    });

    it('answers identity_revoked for every identity of a revoked agent', async () => {
      const { agent, identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      await admin.client.post(api(`/agents/${agent.id}/revoke`), { reason: 'decommissioned', confirm: true });
      expect((await asAgent(t, token)).json().error.code).toBe('identity_revoked');
      const listed = (await admin.client.get(api(`/identities?agent_id=${agent.id}`))).json().items;
      expect(listed.map((i: { status: string }) => i.status)).toEqual(['revoked']);
    });

    it('answers token_expired after 300 seconds', async () => {
      const { identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      clock.advance(299);
      expect((await asAgent(t, token)).statusCode).toBe(200);
      clock.advance(2);
      expect((await asAgent(t, token)).json().error.code).toBe('token_expired');
    });

    it('answers invalid_token for a forged, garbled or foreign-signed token, and invalid_audience for another audience', async () => {
      const { identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      const [h, p, s] = token.split('.');
      const tampered = `${h}.${p}.${s!.slice(0, -2)}${s!.endsWith('AA') ? 'BB' : 'AA'}`;
      const foreign = await new TokenService('some-other-deployment-seed', () => clock.now()).issue(
        { org: admin.tenant.id, agt: 'x', idn: 'y', epc: 0, uri: 'agent://x/y' },
        'agent://x/y',
      );
      for (const bad of [tampered, 'not.a.token', foreign.token]) {
        const res = await asAgent(t, bad);
        expect(res.statusCode).toBe(401);
        expect(res.json().error.code).toBe('invalid_token');
      }
      // Same key, another audience: reaches into the service's key, as another Tollgate service would sign.
      const key = (t.app.deps.tokens as unknown as { privateKey: KeyObject }).privateKey;
      const other = await new SignJWT({ ...decodeJwt(token) })
        .setProtectedHeader({ alg: 'EdDSA', kid: t.app.deps.tokens.kid })
        .setAudience('svc-portal')
        .sign(key);
      expect((await asAgent(t, other)).json().error.code).toBe('invalid_audience');
    });

    it('is accepted by gateway operations only: a person operation ignores it, a gateway one needs it', async () => {
      const { identity } = await agentWithIdentity();
      const token = await tokenFor(identity);
      const person = await t.app.inject({ url: api('/auth/me'), headers: { authorization: `Bearer ${token}` } });
      expect(person.statusCode).toBe(401);
      expect((await t.app.inject({ url: api('/test/whoami') })).json().error.code).toBe('unauthenticated');
      const withCookie = await admin.client.get(api('/test/whoami'));
      expect(withCookie.statusCode).toBe(401);
    });
  });

  describe('token exchange rate limit', () => {
    it('allows 30 exchanges a minute per client by default; the limit is per client', async () => {
      const limited = await startTestApp({ env: { RATE_LIMIT_TOKEN_PER_MINUTE: '3' } });
      try {
        const a = await onboardAdmin(limited.app);
        const agent = (await a.client.post(api('/agents'), { name: 'Busy agent' })).json();
        const one = (await a.client.post(api(`/agents/${agent.id}/identities`))).json();
        const two = (await a.client.post(api(`/agents/${agent.id}/identities`))).json();
        const go = (i: { client_id: string; client_secret: string }) =>
          limited.app.inject({ method: 'POST', url: api('/identities/token'), payload: { grant_type: 'client_credentials', ...i } });
        const codes = [];
        for (let i = 0; i < 4; i++) codes.push((await go(one)).statusCode);
        expect(codes).toEqual([200, 200, 200, 429]);
        expect((await go(two)).statusCode).toBe(200);
      } finally {
        await limited.close();
      }
      expect(t.config.rateLimits.tokenPerMinute).toBe(30);
    });

    it('also limits exchanges per client address, so unknown client IDs cannot buy unlimited secret checks', async () => {
      const limited = await startTestApp({ env: { RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: '3' } });
      try {
        const codes = [];
        for (let i = 0; i < 4; i++) {
          const res = await limited.app.inject({
            method: 'POST',
            url: api('/identities/token'),
            payload: { grant_type: 'client_credentials', client_id: `tgc_unknown${i}`, client_secret: 'x' },
          });
          codes.push(res.statusCode);
        }
        expect(codes).toEqual([401, 401, 401, 429]);
      } finally {
        await limited.close();
      }
    });
  });

  describe('containment operations', () => {
    it('need confirm: true and a reason, and keep a history of who did what, when and why', async () => {
      const { agent } = await agentWithIdentity();
      const unconfirmed = await admin.client.post(api(`/agents/${agent.id}/suspend`), { reason: 'just checking' });
      expect(unconfirmed.statusCode).toBe(422);
      expect(unconfirmed.json().error.code).toBe('confirmation_required');
      expect((await admin.client.get(api(`/agents/${agent.id}`))).json().status).toBe('active');
      expectValidation(await admin.client.post(api(`/agents/${agent.id}/suspend`), { confirm: true }), 'reason');
      expectValidation(await admin.client.post(api(`/agents/${agent.id}/suspend`), { reason: 'x'.repeat(2001), confirm: true }), 'reason');

      const steps: Array<[string, Record<string, unknown>, number, Record<string, unknown>]> = [
        ['suspend', {}, 200, { status: 'suspended' }],
        ['suspend', {}, 409, {}],
        ['restore', {}, 200, { status: 'active' }],
        ['restore', {}, 409, {}],
        ['gateway-access', { enabled: false }, 200, { gateway_access: false }],
        ['gateway-access', { enabled: true }, 200, { gateway_access: true }],
        ['revoke-sessions', {}, 200, { status: 'active' }],
        ['revoke', {}, 200, { status: 'revoked', gateway_access: false }],
        ['restore', {}, 409, {}],
        ['suspend', {}, 409, {}],
      ];
      for (const [op, extra, status, expected] of steps) {
        const res = await admin.client.post(api(`/agents/${agent.id}/${op}`), { reason: `because ${op}`, confirm: true, ...extra });
        expect(res.statusCode, op).toBe(status);
        if (status === 200) expect(res.json()).toMatchObject(expected);
      }
      const history = (await admin.client.get(api(`/agents/${agent.id}/containment`))).json().items;
      expect(history.map((e: { action: string }) => e.action)).toEqual([
        'suspend',
        'restore',
        'gateway_access',
        'gateway_access',
        'revoke_sessions',
        'revoke',
      ]);
      expect(history[0]).toMatchObject({ reason: 'because suspend', actor_id: admin.userId, at: expect.any(String) });
      const audit = (await admin.client.get(api(`/audit?target_id=${agent.id}&action=agent.revoke`))).json().items;
      expect(audit[0].details).toMatchObject({ reason: 'because revoke', status: { from: 'active', to: 'revoked' } });
    });

    it("answer 404 for another organisation's agent and 403 without agent:control", async () => {
      const { agent } = await agentWithIdentity();
      const b = await onboardAdmin(t.app);
      for (const op of ['suspend', 'restore', 'revoke', 'revoke-sessions', 'containment']) {
        const res =
          op === 'containment'
            ? await b.client.get(api(`/agents/${agent.id}/containment`))
            : await b.client.post(api(`/agents/${agent.id}/${op}`), { reason: 'not yours', confirm: true });
        expect(res.statusCode, op).toBe(404);
      }
      const gw = await b.client.post(api(`/agents/${agent.id}/gateway-access`), { reason: 'x x x', confirm: true, enabled: false });
      expect(gw.statusCode).toBe(404);
      expectValidation(await admin.client.post(api(`/agents/${agent.id}/gateway-access`), { reason: 'x x x', confirm: true }), 'enabled');
    });
  });
});
