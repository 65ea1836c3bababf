import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as undici from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, Pool } from '../../lib/undici-dispatchers.js';

/**
 * lib/undici-dispatchers.ts reaches into undici's layout (its entry point loads the whole package): these are
 * the entry point's own classes, and they work, so that an upgrade of undici that moves a file fails here rather
 * than in a pod.
 */
describe('undici dispatchers without the rest of undici', () => {
  let server: Server;
  let origin: string;
  const sockets = new Set<unknown>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      sockets.add(req.socket);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ path: req.url, method: req.method }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  // Requests without the entry point loaded (the `request` the module puts on the prototype) are made in a process
  // of their own: test/sidecar/footprint.test.ts. Here the entry point is loaded too, for its classes.
  it('are the classes undici exports', () => {
    expect(Agent).toBe(undici.Agent);
    expect(Pool).toBe(undici.Pool);
  });

  it('a Pool sends requests and reads answers over one kept-alive connection', async () => {
    sockets.clear();
    const pool = new Pool(origin, { connections: 1, keepAliveTimeout: 10_000 });
    try {
      for (const path of ['/a', '/b', '/c']) {
        const res = await pool.request({ path, method: 'POST', body: '{}' });
        expect(res.statusCode).toBe(200);
        expect(await res.body.json()).toEqual({ path, method: 'POST' });
      }
      expect(sockets.size).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('an Agent sends to any origin and honours its timeouts', async () => {
    const agent = new Agent({ headersTimeout: 200 });
    try {
      const res = await agent.request({ origin, path: '/x', method: 'GET' });
      expect(await res.body.text()).toBe(JSON.stringify({ path: '/x', method: 'GET' }));
      const hung = createServer(() => undefined);
      await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
      try {
        const port = (hung.address() as AddressInfo).port;
        await expect(agent.request({ origin: `http://127.0.0.1:${port}`, path: '/', method: 'GET' })).rejects.toBeInstanceOf(undici.errors.HeadersTimeoutError);
      } finally {
        hung.closeAllConnections();
        hung.close();
      }
    } finally {
      await agent.close();
    }
  });
});
