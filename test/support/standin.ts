import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { testTls } from './tls.js';

/** A request as the stand-in received it (body read whole, as text). */
export interface StandinRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  /** Lower-case names, as Node gives them. */
  headers: IncomingMessage['headers'];
  body: string;
}

/**
 * Answers one request. `body` is the request's body, already read; the request is already in `requests`.
 * May answer slowly, stream, or never end: `close()` cuts every connection.
 */
export type StandinHandler = (req: IncomingMessage, res: ServerResponse, body: string) => void | Promise<void>;

export interface Standin {
  /** `http(s)://127.0.0.1:<port>` (no trailing slash; the `host` given, if any). */
  url: string;
  port: number;
  /** Every request received, in order. */
  requests: StandinRequest[];
  /** TCP connections accepted so far (a refused request must leave this at 0). */
  readonly connections: number;
  /** Cuts open connections (streams that never end included) and stops listening. */
  close(): Promise<void>;
}

/**
 * A provider's stand-in: a real HTTP server (HTTPS with the test CA of `testTls()` when `tls`) on 127.0.0.1
 * (or `host`, another loopback address) and a free port, whose `handler` speaks the provider's wire format.
 * Clients reach it through `new OutboundHttp({ allowedCidrs: ['127.0.0.1/32'], ca: testTls().ca })`.
 * A handler that throws answers 500.
 */
export async function startStandin(options: { tls?: boolean; host?: string; handler: StandinHandler }): Promise<Standin> {
  const host = options.host ?? '127.0.0.1';
  const requests: StandinRequest[] = [];
  let connections = 0;
  const listener = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      await options.handler(req, res, body);
    } catch {
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    }
  };
  const server: Server = options.tls
    ? createHttpsServer({ cert: testTls().cert, key: testTls().key }, (req, res) => void listener(req, res))
    : createHttpServer((req, res) => void listener(req, res));
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${options.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    requests,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
