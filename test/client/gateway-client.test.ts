import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { inspect } from 'node:util';
import { Worker } from 'node:worker_threads';
import { errors as undiciErrors, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ActionDeniedError,
  ApprovalNotGrantedError,
  ApprovalTimeoutError,
  AuthenticationError,
  GatewayApiError,
  GatewayClient,
  GatewayClientError,
  type ClientCredentials,
  type GatewayClientOptions,
} from '../../client/index.js';
import { addMember, api, onboardAdmin, setPlan, startTestApp, TestClock, type TestApp } from '../support/harness.js';

/** One request as the client put it on the wire, and the real API's answer. */
interface Exchange {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The request body's exact bytes (UTF-8). */
  body: string;
  status: number;
  /** The answer's error code, when it was an error. */
  code: string | undefined;
  echoedCorrelationId: string | undefined;
  /** The answer's body. */
  response: string;
}

/**
 * A pass-through in front of the real API that records every request of the client byte for byte:
 * the client talks to the real API, the test sees exactly what was sent.
 */
async function recordingProxy(target: string) {
  const seen: Exchange[] = [];
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const headers = { ...req.headers };
    delete headers.host;
    delete headers.connection;
    delete headers['keep-alive'];
    const up = await undiciRequest(target + req.url, { method: req.method as 'GET', headers, body: body.length ? body : undefined });
    const text = await up.body.text();
    const echoed = up.headers['x-correlation-id'] as string | undefined;
    let code: string | undefined;
    try {
      code = up.statusCode >= 400 ? JSON.parse(text).error?.code : undefined;
    } catch {
      code = undefined;
    }
    seen.push({ method: req.method!, path: req.url!.replace(/^\/api\/v1/, ''), headers: req.headers, body: body.toString('utf8'), status: up.statusCode, code, echoedCorrelationId: echoed, response: text });
    res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json'), ...(echoed ? { 'x-correlation-id': echoed } : {}) });
    res.end(text);
  });
  const url = await listen(server);
  return { url, seen, close: () => closeServer(server) };
}

async function listen(server: http.Server | net.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
function closeServer(server: http.Server | net.Server): Promise<void> {
  if (server instanceof http.Server) server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `METHOD /path` of each recorded exchange, ids elided, for comparing sequences. */
const shape = (xs: Exchange[]) => xs.map((x) => `${x.method} ${x.path.replace(/\/[0-9a-f-]{36}$/, '/{id}')} ${x.status}${x.code ? ` ${x.code}` : ''}`);

/** A sleep that moves the client's clock instead of waiting, and lets the test act while the client "waits". */
function fakeSleep(clock: TestClock, during?: (n: number) => Promise<void> | void) {
  const sleeps: number[] = [];
  const sleep = async (ms: number) => {
    sleeps.push(ms);
    clock.advance(ms / 1000);
    await during?.(sleeps.length);
  };
  return { sleeps, sleep };
}

describe('gateway client (client/): the spec\'s gateway client flow against the real API', () => {
  let t: TestApp;
  /** The API's clock; each client has its own, so the two can disagree as real ones do. */
  const serverClock = new TestClock();
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let admin: Awaited<ReturnType<typeof onboardAdmin>>;
  let approver: Awaited<ReturnType<typeof addMember>>;
  let tools: Record<string, { id: string }>;
  const clients: GatewayClient[] = [];
  let n = 0;

  const lookup = { tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } };
  const payment = (amount = 120) => ({ tool: 'payments.create_payment', target: 'payee://suppliers/acme', parameters: { amount, currency: 'EUR', payee: 'acme' } });

  beforeAll(async () => {
    t = await startTestApp({
      clock: serverClock,
      env: {
        RATE_LIMIT_SIGNIN_PER_MINUTE: '1000',
        RATE_LIMIT_TOKEN_PER_MINUTE: '10000',
        RATE_LIMIT_TOKEN_PER_IP_PER_MINUTE: '10000',
        RATE_LIMIT_GATEWAY_PER_MINUTE: '10000',
        TOKEN_REVOCATION_CACHE_SECONDS: '0',
      },
    });
    const apiUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
    proxy = await recordingProxy(apiUrl);
    admin = await onboardAdmin(t.app);
    await setPlan(t, admin.tenant.id, 'enterprise');
    approver = await addMember(t.app, admin.client, ['approver']);
    tools = Object.fromEntries((await admin.client.get(api('/tools'))).json().items.map((x: { tool_key: string }) => [x.tool_key, x]));
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await proxy?.close();
    await t?.close();
  });

  /** A new agent with a workload identity, bound to the given tools. */
  async function newAgent(toolKeys = ['crm.lookup_customer', 'payments.create_payment']) {
    const agent = (await admin.client.post(api('/agents'), { name: `Client agent ${++n}` })).json();
    const identity = (await admin.client.post(api(`/agents/${agent.id}/identities`))).json();
    for (const k of toolKeys) {
      const res = await admin.client.post(api(`/agents/${agent.id}/permissions`), { target_kind: 'tool', target_id: tools[k]!.id, actions: ['invoke'] });
      expect(res.statusCode).toBe(201);
    }
    const credentials: ClientCredentials = { clientId: identity.client_id, clientSecret: identity.client_secret };
    return { agentId: agent.id as string, identityId: identity.id as string, credentials };
  }

  function client(credentials: GatewayClientOptions['credentials'], opts: Partial<GatewayClientOptions> = {}) {
    const c = new GatewayClient({ baseUrl: proxy.url, credentials, clock: new TestClock(), ...opts });
    clients.push(c);
    return c;
  }

  /** What the proxy records from now on. */
  function recorder() {
    const from = proxy.seen.length;
    return () => proxy.seen.slice(from);
  }

  const approve = (approvalId: string) => approver.client.post(api(`/approvals/${approvalId}/decision`), { decision: 'approve', reason: 'checked by a second person' });

  describe('rule 1: token exchange and cache', () => {
    it('exchanges the credentials on the first call, not at construction, then reuses the token from memory', async () => {
      const { credentials } = await newAgent();
      const seen = recorder();
      let reads = 0;
      const c = client(() => (reads++, credentials));
      await new Promise((r) => setTimeout(r, 50)); // room for any request the constructor might have started
      expect(seen()).toEqual([]);
      expect(reads).toBe(0);

      expect((await c.submit(lookup)).executed).toBe(true);
      expect(shape(seen())).toEqual(['POST /identities/token 200', 'POST /actions 200']);
      await c.submit(lookup);
      await c.submit(lookup);
      expect(shape(seen())).toEqual(['POST /identities/token 200', 'POST /actions 200', 'POST /actions 200', 'POST /actions 200']);
      expect(reads).toBe(1);
      const bearer = new Set(seen().filter((x) => x.path === '/actions').map((x) => x.headers.authorization));
      expect(bearer.size).toBe(1);
    });

    it('shares one exchange between calls made at once', async () => {
      const { credentials } = await newAgent();
      const seen = recorder();
      const c = client(credentials);
      await Promise.all([c.submit(lookup), c.submit(lookup), c.submit(lookup)]);
      expect(seen().filter((x) => x.path === '/identities/token')).toHaveLength(1);
    });

    it('refreshes 30 seconds before expiry by default, reading the credentials again', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      let reads = 0;
      const c = client(() => (reads++, credentials), { clock });
      const seen = recorder();
      await c.submit(lookup);
      clock.advance(269); // 300 s tokens: 1 s before the refresh point
      await c.submit(lookup);
      expect(shape(seen())).toEqual(['POST /identities/token 200', 'POST /actions 200', 'POST /actions 200']);
      clock.advance(1); // 30 s before expiry
      await c.submit(lookup);
      expect(shape(seen()).slice(3)).toEqual(['POST /identities/token 200', 'POST /actions 200']);
      expect(reads).toBe(2);
      const bearers = seen().filter((x) => x.path === '/actions').map((x) => x.headers.authorization);
      expect(bearers[1]).toBe(bearers[0]);
      expect(bearers[2]).not.toBe(bearers[0]);
    });

    it('refreshes at the configured margin', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      const c = client(credentials, { clock, refreshBeforeExpirySeconds: 100 });
      const seen = recorder();
      await c.submit(lookup);
      clock.advance(199);
      await c.submit(lookup);
      expect(seen().filter((x) => x.path === '/identities/token')).toHaveLength(1);
      clock.advance(1);
      await c.submit(lookup);
      expect(seen().filter((x) => x.path === '/identities/token')).toHaveLength(2);
    });
  });

  describe('rule 2: one retry with a fresh token, then an authentication error', () => {
    it('after token_expired, exchanges again and resends the same bytes under the same key, once', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      await c.submit(lookup);
      const seen = recorder();
      serverClock.advance(301); // the API sees the token expired; the client's clock does not
      const result = await c.submit(lookup, { idempotencyKey: 'sdk-retry-after-expiry-1' });
      expect(result.executed).toBe(true);
      expect(shape(seen())).toEqual(['POST /actions 401 token_expired', 'POST /identities/token 200', 'POST /actions 200']);
      const [first, retry] = seen().filter((x) => x.path === '/actions');
      expect(retry!.body).toBe(first!.body);
      expect(retry!.headers['idempotency-key']).toBe('sdk-retry-after-expiry-1');
      expect(first!.headers['idempotency-key']).toBe('sdk-retry-after-expiry-1');
      expect(retry!.headers.authorization).not.toBe(first!.headers.authorization);
    });

    it('after session_revoked (the agent\'s sessions revoked through the API), retries once with a fresh token', async () => {
      const { agentId, credentials } = await newAgent();
      const c = client(credentials);
      await c.submit(lookup);
      expect((await admin.client.post(api(`/agents/${agentId}/revoke-sessions`), { reason: 'rotate everything', confirm: true })).statusCode).toBe(200);
      const seen = recorder();
      expect((await c.submit(lookup)).executed).toBe(true);
      expect(shape(seen())).toEqual(['POST /actions 401 session_revoked', 'POST /identities/token 200', 'POST /actions 200']);
    });

    it('raises an AuthenticationError for a revoked identity, without retrying', async () => {
      const { identityId, credentials } = await newAgent();
      const c = client(credentials);
      await c.submit(lookup);
      await admin.client.post(api(`/identities/${identityId}/revoke`), { reason: 'leaked in a log', confirm: true });
      const seen = recorder();
      const err = await c.submit(lookup).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err).toMatchObject({ status: 401, code: 'identity_revoked' });
      expect(shape(seen())).toEqual(['POST /actions 401 identity_revoked']);
      // The token exchange refuses it too.
      const fresh = client(credentials);
      await expect(fresh.submit(lookup)).rejects.toMatchObject({ name: 'AuthenticationError', code: 'identity_revoked' });
    });

    it('raises an AuthenticationError when the fresh token is refused too (a suspended agent)', async () => {
      const { agentId, credentials } = await newAgent();
      const c = client(credentials);
      await c.submit(lookup);
      await admin.client.post(api(`/agents/${agentId}/suspend`), { reason: 'odd behaviour', confirm: true });
      const seen = recorder();
      const err = await c.submit(lookup).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err).toMatchObject({ code: 'session_revoked' });
      expect(shape(seen())).toEqual(['POST /actions 401 session_revoked', 'POST /identities/token 401 session_revoked']);
    });

    it('raises an AuthenticationError when the retried request fails again, after exactly one retry (fault-injecting fake of the API)', async () => {
      const hits: string[] = [];
      const fake = http.createServer((req, res) => {
        hits.push(`${req.method} ${req.url}`);
        res.setHeader('content-type', 'application/json');
        if (req.url === '/api/v1/identities/token') return res.end(JSON.stringify({ access_token: `tok-${hits.length}`, token_type: 'Bearer', expires_in: 300, agent_uri: 'agent://o/a' }));
        res.statusCode = 401;
        res.end(JSON.stringify({ error: { code: 'token_expired', message: 'The access token has expired.', correlation_id: 'sdk-x-1234', details: null } }));
      });
      const url = await listen(fake);
      try {
        const c = client({ clientId: 'tgc_x', clientSecret: 'tgs_x' }, { baseUrl: url });
        const err = await c.submit(lookup).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AuthenticationError);
        expect(err).toMatchObject({ code: 'token_expired', cause: expect.any(AuthenticationError) });
        expect(hits).toEqual(['POST /api/v1/identities/token', 'POST /api/v1/actions', 'POST /api/v1/identities/token', 'POST /api/v1/actions']);
      } finally {
        await closeServer(fake);
      }
    });

    it('raises an AuthenticationError, not a generic one, for wrong credentials; other failures are GatewayApiErrors', async () => {
      const { credentials } = await newAgent();
      const wrong = client({ clientId: credentials.clientId, clientSecret: 'tgs_not-the-secret' });
      const err = await wrong.submit(lookup).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthenticationError);
      expect(err).toMatchObject({ code: 'invalid_client', status: 401 });
      const ok = client(credentials);
      const conflict = await ok.submit({ ...lookup, parameters: { customer_id: '43' } }, { idempotencyKey: (await ok.submit(lookup)).idempotency_key }).catch((e: unknown) => e);
      expect(conflict).toBeInstanceOf(GatewayApiError);
      expect(conflict).not.toBeInstanceOf(AuthenticationError);
      expect(conflict).toMatchObject({ status: 409, code: 'idempotency_conflict' });
    });
  });

  describe('rule 3: correlation IDs and idempotency keys', () => {
    it('sends an X-Correlation-ID starting sdk- on every request: exchange, submission, status', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const seen = recorder();
      const r = await c.submit(payment());
      await c.actionStatus(r.action_id);
      await c.submit(lookup, { correlationId: 'agent-request-0001' });
      expect(shape(seen())).toEqual(['POST /identities/token 200', 'POST /actions 200', 'GET /actions/gateway/{id} 200', 'POST /actions 200']);
      for (const x of seen()) {
        expect(x.headers['x-correlation-id']).toMatch(/^sdk-[A-Za-z0-9._-]{4,96}$/);
        expect(x.echoedCorrelationId).toBe(x.headers['x-correlation-id']); // the API took it as given
      }
      expect(seen().at(-1)!.headers['x-correlation-id']).toBe('sdk-agent-request-0001');
      await expect(c.submit(lookup, { correlationId: 'has spaces' })).rejects.toThrow(TypeError);
    });

    it('sends the session as Tollgate-Session on each submission of a call, and refuses a malformed one before sending', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const seen = recorder();
      await c.submit(lookup, { session: 'run-42' });
      await c.submit(lookup);
      await c.authoriseAndExecute(lookup, { session: 'run-43' });
      expect(seen().filter((x) => x.path === '/actions').map((x) => x.headers['tollgate-session'])).toEqual(['run-42', undefined, 'run-43']);
      const sent = seen().length;
      await expect(c.submit(lookup, { session: 'has spaces' })).rejects.toThrow(TypeError);
      await expect(c.authoriseAndExecute(lookup, { session: 'x'.repeat(201) })).rejects.toThrow(TypeError);
      expect(seen()).toHaveLength(sent);
    });

    it('generates the idempotency key sdk- + 32 hex when none is given, sends it and exposes it on the result', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const seen = recorder();
      const a = await c.submit(lookup);
      const b = await c.submit(lookup);
      expect(a.idempotency_key).toMatch(/^sdk-[0-9a-f]{32}$/);
      expect(b.idempotency_key).toMatch(/^sdk-[0-9a-f]{32}$/);
      expect(a.idempotency_key).not.toBe(b.idempotency_key);
      expect(seen().filter((x) => x.path === '/actions').map((x) => x.headers['idempotency-key'])).toEqual([a.idempotency_key, b.idempotency_key]);
      expect(a.raw.idempotency_key).toBe(a.idempotency_key);
    });

    it("uses the caller's key, and a retry under it is safe (the API replays the same action)", async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const first = await c.submit(payment(), { idempotencyKey: 'order-4711-payment' });
      const again = await c.submit(payment(), { idempotencyKey: 'order-4711-payment' });
      expect(first.idempotency_key).toBe('order-4711-payment');
      expect(again.action_id).toBe(first.action_id);
      expect(again.raw.replayed).toBe(true);
    });
  });

  describe('rules 4 and 6: a result for every decision, with the spec\'s fields', () => {
    it('returns allow, deny and require_approval as results, raising for none of them', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const allow = await c.submit(lookup);
      expect(allow).toMatchObject({ decision: 'allow', state: 'executed', executed: true, needs_approval: false, execution_status: 'succeeded', approval_id: null });
      expect(allow.output).toEqual({ customer_id: '42', name: 'Customer 42', email: '[redacted:email]', tier: 'gold' });
      const deny = await c.submit({ tool: 'email.send_message', target: 'mailto://someone', parameters: {} });
      expect(deny).toMatchObject({ decision: 'deny', state: 'denied', executed: false, needs_approval: false, output: null, execution_status: null });
      expect(deny.reason_codes).toContain('PERMISSION_NOT_GRANTED');
      const ask = await c.submit(payment());
      expect(ask).toMatchObject({ decision: 'require_approval', state: 'approval_required', executed: false, needs_approval: true, reason_codes: ['TOOL_APPROVAL_REQUIRED'] });
      expect(ask.approval_id).toBe(ask.raw.approval!.id);
    });

    it('raises when the request itself fails (422 from the API)', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const err = await c.submit({ ...lookup, target: 'no-scheme' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayApiError);
      expect(err).toMatchObject({ status: 422, code: 'validation_failed', correlationId: expect.stringMatching(/^sdk-/) });
    });

    it('has exactly the fields of rule 6, taken from the raw body', async () => {
      const { credentials } = await newAgent();
      const c = client(credentials);
      const r = await c.submit(payment());
      expect(Object.keys(r).sort()).toEqual(
        ['action_id', 'approval_expires_at', 'approval_id', 'decision', 'executed', 'execution_status', 'idempotency_key', 'needs_approval', 'output', 'raw', 'reason_codes', 'state'].sort(),
      );
      expect(r).toEqual({
        action_id: r.raw.action.id,
        state: r.raw.action.status,
        decision: r.raw.decision.decision,
        reason_codes: r.raw.decision.reason_codes,
        approval_id: r.raw.approval!.id,
        approval_expires_at: r.raw.approval!.expires_at,
        output: null,
        execution_status: null,
        idempotency_key: r.raw.idempotency_key,
        raw: expect.objectContaining({ replayed: false }),
        executed: false,
        needs_approval: true,
      });
      expect(Date.parse(r.approval_expires_at!) - serverClock.now().getTime()).toBe(900_000);
    });
  });

  describe('rule 5: authorise-and-execute', () => {
    it('returns at once by default (wait 0), without polling', async () => {
      const { credentials } = await newAgent();
      const { sleeps, sleep } = fakeSleep(new TestClock());
      const c = client(credentials, { sleep });
      const seen = recorder();
      const r = await c.authoriseAndExecute(payment());
      expect(r).toMatchObject({ needs_approval: true, state: 'approval_required' });
      expect(sleeps).toEqual([]);
      expect(shape(seen())).toEqual(['POST /identities/token 200', 'POST /actions 200']);
    });

    it('polls every 3 s until approved (by a second person), then resubmits the same bytes, key and the token', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      const seen = recorder();
      const { sleeps, sleep } = fakeSleep(clock, async (i) => {
        if (i !== 3) return;
        const approvalId = JSON.parse(seen().find((x) => x.path === '/actions')!.response).approval.id as string;
        expect((await approve(approvalId)).statusCode).toBe(200);
      });
      const c = client(credentials, { clock, sleep });
      const r = await c.authoriseAndExecute({ ...payment(), justification: 'Invoice 4711 — €120' }, { waitSeconds: 60 });

      expect(r).toMatchObject({ state: 'executed', decision: 'allow', executed: true, needs_approval: false, reason_codes: ['PERMISSION_GRANTED', 'APPROVAL_GRANTED'] });
      expect((r.output as { payment_reference: string }).payment_reference).toMatch(/^PAY-/);
      expect(sleeps).toEqual([3000, 3000, 3000]);
      expect(shape(seen())).toEqual([
        'POST /identities/token 200',
        'POST /actions 200',
        'GET /actions/gateway/{id} 200',
        'GET /actions/gateway/{id} 200',
        'GET /actions/gateway/{id} 200',
        'POST /actions 200',
      ]);
      const [first, resubmission] = seen().filter((x) => x.path === '/actions');
      const token = JSON.parse(resubmission!.body).approval_token as string;
      expect(token).toMatch(/^tga_/);
      expect(resubmission!.body).toBe(`${first!.body.slice(0, -1)},"approval_token":${JSON.stringify(token)}}`);
      expect(resubmission!.headers['idempotency-key']).toBe(first!.headers['idempotency-key']);
      expect(r.idempotency_key).toBe(first!.headers['idempotency-key']);
    });

    it('polls at the configured interval', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      const { sleeps, sleep } = fakeSleep(clock);
      const c = client(credentials, { clock, sleep, pollIntervalSeconds: 1 });
      await expect(c.authoriseAndExecute(payment(), { waitSeconds: 3 })).rejects.toBeInstanceOf(ApprovalTimeoutError);
      expect(sleeps).toEqual([1000, 1000, 1000]);
    });

    it('raises ActionDeniedError on deny, carrying the result', async () => {
      const { credentials } = await newAgent(['crm.lookup_customer']);
      const c = client(credentials);
      const err = await c.authoriseAndExecute(payment(), { waitSeconds: 60 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ActionDeniedError);
      expect((err as ActionDeniedError).result).toMatchObject({ decision: 'deny', state: 'denied', reason_codes: ['PERMISSION_NOT_GRANTED'] });
    });

    for (const outcome of ['rejected', 'cancelled', 'expired'] as const) {
      it(`raises ApprovalNotGrantedError when the approval is ${outcome}`, async () => {
        const { credentials } = await newAgent();
        const clock = new TestClock();
        let actionId = '';
        let approvalId = '';
        const { sleep } = fakeSleep(clock, async (i) => {
          if (i !== 2) return;
          if (outcome === 'rejected') await approver.client.post(api(`/approvals/${approvalId}/decision`), { decision: 'reject', reason: 'unknown payee' });
          if (outcome === 'cancelled') await admin.client.post(api(`/actions/${actionId}/cancel`), { reason: 'not needed', confirm: true });
          if (outcome === 'expired') serverClock.advance(901);
        });
        const c = client(credentials, { clock, sleep });
        const first = await c.submit(payment(), { idempotencyKey: `sdk-not-granted-${outcome}` });
        actionId = first.action_id;
        approvalId = first.approval_id!;
        const err = await c.authoriseAndExecute(payment(), { idempotencyKey: `sdk-not-granted-${outcome}`, waitSeconds: 60 }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ApprovalNotGrantedError);
        expect(err).toMatchObject({ outcome, result: { action_id: actionId } });
      });
    }

    it('raises ApprovalTimeoutError when no approval comes within the wait', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      const { sleeps, sleep } = fakeSleep(clock);
      const c = client(credentials, { clock, sleep });
      const started = clock.now().getTime();
      const err = await c.authoriseAndExecute(payment(), { waitSeconds: 10 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalTimeoutError);
      expect(err).toMatchObject({ waitedSeconds: 10, result: { needs_approval: true } });
      expect(clock.now().getTime() - started).toBe(10_000);
      expect(sleeps).toEqual([3000, 3000, 3000, 1000]);
    });

    it('never waits longer than the 900 s timeout by default, however long the wait asked', async () => {
      const { credentials } = await newAgent();
      const clock = new TestClock();
      const { sleep } = fakeSleep(clock);
      const c = client(credentials, { clock, sleep, pollIntervalSeconds: 100 });
      const started = clock.now().getTime();
      const err = await c.authoriseAndExecute(payment(), { waitSeconds: Infinity }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApprovalTimeoutError);
      expect(clock.now().getTime() - started).toBe(900_000);
      expect(c.settings.approvalTimeoutSeconds).toBe(900);
    });

    it('returns other outcomes: failed after approval (revoked credential), approved for the caller to run; runs nothing itself (rule 8)', async () => {
      // A tool Tollgate does not run itself: an allow leaves it `approved` for the caller's proxy.
      const custom = (await admin.client.post(api('/tools'), { tool_key: `tickets.create_${++n}`, name: 'Create ticket' })).json();
      tools[custom.tool_key] = custom;
      // A tool that needs approval and whose credential is revoked: approved, then it fails to run.
      const credential = (await admin.client.post(api('/resources/credentials'), { name: 'Mail key', provider: 'vault', secret_path: 'secret/data/mail' })).json();
      await admin.client.patch(api(`/tools/${tools['email.send_message']!.id}`), { credential_ref_id: credential.id, approval_class: 'single' });
      await admin.client.post(api(`/resources/credentials/${credential.id}/action`), { reason: 'leaked', action: 'revoke', confirm: true });
      const { credentials } = await newAgent(['email.send_message', custom.tool_key]);
      const clock = new TestClock();
      const seen = recorder();
      const { sleep } = fakeSleep(clock, async () => {
        const approvalId = JSON.parse(seen().find((x) => x.path === '/actions')!.response).approval.id as string;
        expect((await approve(approvalId)).statusCode).toBe(200);
      });
      const c = client(credentials, { clock, sleep });

      const failed = await c.authoriseAndExecute({ tool: 'email.send_message', target: 'mailto://ops', parameters: {} }, { waitSeconds: 60 });
      expect(failed).toMatchObject({ state: 'failed', decision: 'allow', executed: false, execution_status: 'failed', output: { error: 'credential_unavailable' } });
      expect(shape(seen()).slice(-2)).toEqual(['GET /actions/gateway/{id} 200', 'POST /actions 200']);
      const approved = await c.authoriseAndExecute({ tool: custom.tool_key, target: 'tickets://queue/ops', parameters: {} }, { waitSeconds: 60 });
      expect(approved).toMatchObject({ state: 'approved', decision: 'allow', executed: false, needs_approval: false, execution_status: 'not_run' });
    });
  });

  describe('rule 7: HTTP timeouts and network errors', () => {
    it('defaults to 15 s per request and 5 s to connect', () => {
      const c = client({ clientId: 'x', clientSecret: 'y' });
      expect(c.settings).toMatchObject({ timeoutSeconds: 15, connectTimeoutSeconds: 5, refreshBeforeExpirySeconds: 30, waitSeconds: 0, pollIntervalSeconds: 3, approvalTimeoutSeconds: 900 });
      expect(c.settings.baseUrl).toBe(`${proxy.url}/api/v1`);
    });

    it('gives up on a request whose answer trickles beyond the overall timeout, with the platform\'s own error', async () => {
      // Bytes every 50 ms: no idle gap ever trips a per-phase timeout; only the overall one ends it.
      const fake = http.createServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const timer = setInterval(() => res.write(' '), 50);
        res.on('close', () => clearInterval(timer));
      });
      const url = await listen(fake);
      try {
        const c = client({ clientId: 'x', clientSecret: 'y' }, { baseUrl: url, timeoutSeconds: 0.4 });
        const started = Date.now();
        const err = await c.submit(lookup).catch((e: unknown) => e);
        expect(Date.now() - started).toBeLessThan(3000);
        expect(err).toBeInstanceOf(Error);
        expect(err).not.toBeInstanceOf(GatewayClientError);
        expect((err as Error).name).toBe('TimeoutError');
      } finally {
        await closeServer(fake);
      }
    });

    it('gives up connecting after the connect timeout (a listener that never accepts), with undici\'s error', async () => {
      // A listener on a thread whose event loop is blocked accepts nothing: once its backlog is full,
      // a new connection hangs in the handshake (Linux drops its SYN).
      const wake = new Int32Array(new SharedArrayBuffer(4));
      const worker = new Worker(
        `const net = require('node:net'); const { parentPort, workerData } = require('node:worker_threads');
         const server = net.createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
           parentPort.postMessage(server.address().port);
           Atomics.wait(workerData, 0, 0, 30000);
         });`,
        { eval: true, workerData: wake },
      );
      const port = await new Promise<number>((resolve) => worker.once('message', resolve));
      const fillers: net.Socket[] = [];
      try {
        // Backlog 1 queues two connections; the next one is never completed.
        for (let i = 0; i < 2; i++) {
          const s = net.connect(port, '127.0.0.1');
          fillers.push(s);
          await new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject));
        }
        const c = client({ clientId: 'x', clientSecret: 'y' }, { baseUrl: `http://127.0.0.1:${port}`, connectTimeoutSeconds: 0.3, timeoutSeconds: 10 });
        const started = Date.now();
        const err = await c.submit(lookup).catch((e: unknown) => e);
        expect(Date.now() - started).toBeLessThan(5000);
        expect(err).toBeInstanceOf(undiciErrors.ConnectTimeoutError);
        expect(err).not.toBeInstanceOf(GatewayClientError);
      } finally {
        fillers.forEach((s) => s.destroy());
        Atomics.store(wake, 0, 1);
        Atomics.notify(wake, 0);
        await worker.terminate();
      }
    });

    it('lets network errors through unwrapped: a refused connection, a connection closed mid-answer', async () => {
      const closed = net.createServer();
      const freeUrl = await listen(closed);
      await closeServer(closed);
      const refused = await client({ clientId: 'x', clientSecret: 'y' }, { baseUrl: freeUrl }).submit(lookup).catch((e: unknown) => e);
      expect(refused).not.toBeInstanceOf(GatewayClientError);
      expect(refused).toMatchObject({ code: 'ECONNREFUSED' });

      const rude = http.createServer((req) => req.socket.destroy());
      const rudeUrl = await listen(rude);
      try {
        const reset = await client({ clientId: 'x', clientSecret: 'y' }, { baseUrl: rudeUrl }).submit(lookup).catch((e: unknown) => e);
        expect(reset).toBeInstanceOf(undiciErrors.SocketError);
        expect(reset).not.toBeInstanceOf(GatewayClientError);
      } finally {
        await closeServer(rude);
      }
    });
  });

  describe('secrets', () => {
    it('never puts the client secret or the token in an error, and keeps both out of an inspected client', async () => {
      const { identityId, credentials } = await newAgent();
      const wrong = client({ clientId: credentials.clientId, clientSecret: `${credentials.clientSecret}x` });
      const refused = await wrong.submit(lookup).catch((e: unknown) => e);
      const c = client(credentials);
      const seen = recorder();
      await c.submit(lookup);
      const token = seen().find((x) => x.path === '/actions')!.headers.authorization!.replace('Bearer ', '');
      await admin.client.post(api(`/identities/${identityId}/revoke`), { reason: 'rotation', confirm: true });
      const revoked = await c.submit(lookup).catch((e: unknown) => e);
      expect(revoked).toBeInstanceOf(AuthenticationError);
      for (const text of [refused, revoked, c, wrong].flatMap((x) => [String(x), inspect(x, { depth: 10, showHidden: true }), JSON.stringify(x) ?? ''])) {
        expect(text).not.toContain(credentials.clientSecret);
        expect(text).not.toContain(token);
      }
    });
  });
});
