import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  ActionDeniedError,
  ApprovalNotGrantedError,
  ApprovalTimeoutError,
  AuthenticationError,
  GatewayApiError,
  type ActionRequest,
  type ActionResult,
  type GatewayClient,
} from '../client/index.js';
import { McpProxy } from './mcp-proxy.js';

const MAX_BODY = 1024 * 1024;

export interface SidecarServerOptions {
  gateway: GatewayClient;
  proxy: McpProxy;
  port: number;
  log: Logger;
}

class BadRequest extends Error {}

/** The error envelope of the spec, as the API writes it. */
function envelope(code: string, message: string, details: unknown = null) {
  return { error: { code, message, correlation_id: null, details } };
}

/** A result as the sidecar answers it: the spec's rule-6 fields (the API's raw body left out). */
function view(result: ActionResult) {
  const { raw: _raw, ...fields } = result;
  return fields;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new BadRequest('the body is larger than 1 MiB');
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequest('the body is not JSON');
  }
}

function actionOf(body: unknown): ActionRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new BadRequest('the body must be a JSON object (ActionIn)');
  const a = body as Record<string, unknown>;
  if (typeof a.tool !== 'string' || !a.tool) throw new BadRequest('tool is required');
  if (typeof a.target !== 'string') throw new BadRequest('target is required');
  return a as unknown as ActionRequest;
}

/**
 * The sidecar's HTTP server, on the pod's loopback only:
 * - `POST /v1/actions`: one submission (the gateway client's `submit`); the answer is the result for any
 *   decision. `Idempotency-Key` and `X-Correlation-ID` pass through when given.
 * - `POST /v1/actions/authorise?wait=<seconds>`: authorise-and-execute; a deny is 403 `action_denied`, an
 *   approval not granted 409 `approval_not_granted`, no approval in time 408 `approval_timeout`.
 * - `/mcp/<upstream>`: the MCP proxy.
 * - `GET /healthz`.
 * Fails closed: when the central API cannot be reached, the answer is 503 `gateway_unavailable` and
 * nothing runs. Requests whose Host is not the loopback address are refused (DNS rebinding).
 */
export async function startSidecarServer(opts: SidecarServerOptions): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const { gateway, proxy, log } = opts;
  let allowedHosts = new Set<string>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const send = (status: number, body: unknown) => {
      if (res.headersSent) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (!allowedHosts.has(req.headers.host ?? '')) return send(421, envelope('misdirected_request', 'call the sidecar as 127.0.0.1 or localhost'));
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    try {
      if (req.method === 'GET' && url.pathname === '/healthz') return send(200, { status: 'ok' });
      const mcp = /^\/mcp\/([A-Za-z0-9._-]+)\/?$/.exec(url.pathname);
      if (mcp) {
        if (!proxy.has(mcp[1]!)) return send(404, envelope('not_found', `no MCP upstream named ${mcp[1]}`));
        const body = req.method === 'POST' ? await readJson(req) : undefined;
        return await proxy.handle(mcp[1]!, req, res, body);
      }
      if (req.method !== 'POST' || (url.pathname !== '/v1/actions' && url.pathname !== '/v1/actions/authorise')) {
        return send(404, envelope('not_found', 'No such operation.'));
      }
      const action = actionOf(await readJson(req));
      const key = req.headers['idempotency-key'];
      const correlation = req.headers['x-correlation-id'];
      const common = {
        ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
        ...(typeof correlation === 'string' ? { correlationId: correlation } : {}),
      };
      if (url.pathname === '/v1/actions') return send(200, view(await gateway.submit(action, common)));
      const wait = url.searchParams.get('wait');
      const waitSeconds = wait === null ? undefined : Number(wait);
      if (waitSeconds !== undefined && (!Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > 900)) {
        throw new BadRequest('wait must be a number of seconds from 0 to 900');
      }
      return send(200, view(await gateway.authoriseAndExecute(action, { ...common, waitSeconds })));
    } catch (err) {
      if (err instanceof BadRequest) return send(400, envelope('validation_failed', err.message));
      if (err instanceof ActionDeniedError) return send(403, envelope('action_denied', err.message, view(err.result)));
      if (err instanceof ApprovalNotGrantedError) return send(409, envelope('approval_not_granted', err.message, view(err.result)));
      if (err instanceof ApprovalTimeoutError) return send(408, envelope('approval_timeout', err.message, view(err.result)));
      if (err instanceof AuthenticationError) return send(401, envelope(err.code, err.message));
      if (err instanceof GatewayApiError) {
        // The API's own answer (a 4xx about the request, or a 5xx), passed on with its code.
        return send(err.status, { error: { code: err.code, message: err.message, correlation_id: err.correlationId, details: err.details } });
      }
      // The API could not be reached or timed out: fail closed.
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sidecar: Tollgate unavailable');
      return send(503, envelope('gateway_unavailable', 'Tollgate cannot be reached; nothing was run. Retrying with the same Idempotency-Key is safe.'));
    }
  };

  const server = createServer((req, res) => void handle(req, res));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // Loopback only: the agent beside it in the pod reaches it; nothing outside the pod can.
    server.listen(opts.port, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  return {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
