import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient } from '../../client/index.js';

/**
 * The gateway client's decision timeout, which the sidecar sets from TOLLGATE_DECISION_TIMEOUT_MS: it bounds
 * one decision as a whole, not each request. A stand-in API (a node:http server of the test's own, since the
 * real API cannot be made slow on demand) answers the token exchange and the submission each within the
 * per-request timeout, but the two together outlast the decision's.
 */
describe('gateway client: decisionTimeoutSeconds', () => {
  let server: Server;
  let base: string;
  /** Submissions whose client had hung up by the time the stand-in answered. */
  let abandoned = 0;
  /** Submissions that reached the stand-in. */
  let submitted = 0;
  const slowMs = 600;

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (!req.url?.endsWith('/identities/token')) submitted += 1;
      req.resume();
      req.on('end', () => {
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          if (req.url?.endsWith('/identities/token')) return res.end(JSON.stringify({ access_token: 'stand-in-token', expires_in: 300 }));
          if (req.socket.destroyed) abandoned += 1;
          res.end(
            JSON.stringify({
              action: { id: '00000000-0000-4000-8000-000000000001', status: 'executed' },
              decision: { decision: 'allow', reason_codes: ['PERMISSION_GRANTED'] },
              execution: null,
              approval: null,
              replayed: false,
              idempotency_key: 'k',
            }),
          );
        }, slowMs);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const client = (decisionTimeoutSeconds?: number) =>
    new GatewayClient({ baseUrl: base, credentials: { clientId: 'tgc_x', clientSecret: 'secret' }, timeoutSeconds: 1, ...(decisionTimeoutSeconds ? { decisionTimeoutSeconds } : {}) });
  const action = { tool: 'crm.lookup_customer', target: 'crm://customers/42' };

  it('without it, each request has its own timeout: exchange and submission both finish', async () => {
    const c = client();
    expect((await c.submit(action)).decision).toBe('allow');
    await c.close();
  });

  it('with it, the exchange and the submission together must finish within it: the decision fails with a timeout', async () => {
    const c = client(1);
    const before = abandoned;
    const err = await c.submit(action).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.name).toBe('TimeoutError');
    // The submission was aborted, not left running: its connection was gone before the answer.
    await new Promise((r) => setTimeout(r, slowMs * 2));
    expect(abandoned - before).toBe(1);
    // With a token cached, one slow submission alone fits.
    expect((await c.submit(action)).decision).toBe('allow');
    await c.close();
  });

  it('a deadline that passes while the token is exchanged ends the wait then, and the submission is never sent', async () => {
    const c = client(0.3);
    const before = submitted;
    const started = performance.now();
    const err = await c.submit(action).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.name).toBe('TimeoutError');
    // Not held until the exchange's own answer (600 ms) or its request timeout (1 s).
    expect(performance.now() - started).toBeLessThan(slowMs);
    // The exchange goes on (it is shared, and keeps its own timeout) and answers; nothing is submitted after it.
    await new Promise((r) => setTimeout(r, slowMs * 1.5));
    expect(submitted - before).toBe(0);
    await c.close();
  });

  it('refuses a decision timeout that is not above zero', () => {
    expect(() => client(-1)).toThrow(RangeError);
  });
});
