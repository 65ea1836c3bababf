import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import {
  ActionDeniedError,
  ApprovalNotGrantedError,
  ApprovalTimeoutError,
  AuthenticationError,
  GatewayApiError,
  type ActionRequest,
  type ActionResult,
} from '../client/index.js';
import { BreakerOpenError } from './breaker.js';
import { failureText, readBody, type McpProxy } from './mcp-proxy.js';
import type { CallKind, CallOutcome, SidecarMetrics } from './metrics.js';
import { containmentOf, isOutage, SESSION_PROBLEM, sessionOf, type PermissionsCache, type Tollgate } from './tollgate.js';

const MAX_BODY = 1024 * 1024;
/** The client's rule 3, checked here so that a bad header is the caller's 400, not an outage. */
const CORRELATION_ID = /^[A-Za-z0-9._-]{8,100}$/;

export interface SidecarServerOptions {
  tollgate: Tollgate;
  permissions: PermissionsCache;
  proxy: McpProxy;
  metrics: SidecarMetrics;
  port: number;
  /** A Unix domain socket to listen on as well (null: the loopback port only). */
  socket: string | null;
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
  const body = await readBody(req, MAX_BODY);
  if (body === null) throw new BadRequest('the body is larger than 1 MiB');
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8'));
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

const OUTCOME_OF_DECISION: Record<ActionResult['decision'], CallOutcome> = { allow: 'allow', deny: 'deny', require_approval: 'approval_required' };

/**
 * The sidecar's HTTP server, on the pod's loopback only:
 * - `POST /v1/actions`: one submission (the gateway client's `submit`); the answer is the result for any
 *   decision, except that a contained agent is 403 `agent_contained`. `Idempotency-Key` and
 *   `X-Correlation-ID` pass through when given.
 * - `POST /v1/actions/authorise?wait=<seconds>`: authorise-and-execute; a deny is 403 `action_denied`, a
 *   contained agent 403 `agent_contained`, an approval not granted 409 `approval_not_granted`, no approval
 *   in time 408 `approval_timeout`.
 * - `/mcp/<upstream>`: the MCP proxy.
 * - `GET /healthz`.
 * Fails closed: when Tollgate cannot decide (unreachable, timed out, failing, or the circuit breaker open),
 * the answer is 503 `gateway_unavailable` and nothing runs. Requests whose Host is not the loopback
 * address are refused (DNS rebinding). docs/sidecar.md has the table of answers.
 */
export async function startSidecarServer(
  opts: SidecarServerOptions,
): Promise<{ server: Server; port: number; socket: string | null; close(): Promise<void> }> {
  const { tollgate, permissions, proxy, metrics, log } = opts;
  let allowedHosts = new Set<string>();

  const handle = async (req: IncomingMessage, res: ServerResponse, onSocket: boolean) => {
    const arrived = performance.now();
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      if (res.headersSent) return;
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    // A browser cannot open a Unix socket, so DNS rebinding concerns the loopback port only.
    if (!onSocket && !allowedHosts.has(req.headers.host ?? '')) return send(421, envelope('misdirected_request', 'call the sidecar as 127.0.0.1 or localhost'));
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    let kind: CallKind | undefined;
    const answer = (outcome: CallOutcome, status: number, body: unknown, headers?: Record<string, string>) => {
      if (kind) metrics.call(kind, outcome, (performance.now() - arrived) / 1000);
      send(status, body, headers);
    };
    try {
      if (req.method === 'GET' && url.pathname === '/healthz') return send(200, { status: 'ok' });
      const mcp = /^\/mcp\/([A-Za-z0-9._-]+)\/?$/.exec(url.pathname);
      if (mcp) {
        if (!proxy.has(mcp[1]!)) return send(404, envelope('not_found', `no MCP upstream named ${mcp[1]}`));
        return await proxy.handle(mcp[1]!, req, res, arrived);
      }
      if (req.method !== 'POST' || (url.pathname !== '/v1/actions' && url.pathname !== '/v1/actions/authorise')) {
        return send(404, envelope('not_found', 'No such operation.'));
      }
      kind = url.pathname === '/v1/actions' ? 'action' : 'authorise';
      const action = actionOf(await readJson(req));
      const key = req.headers['idempotency-key'];
      const correlation = req.headers['x-correlation-id'];
      if (correlation !== undefined && !(typeof correlation === 'string' && CORRELATION_ID.test(correlation.startsWith('sdk-') ? correlation : `sdk-${correlation}`))) {
        throw new BadRequest('X-Correlation-ID must be 8-100 characters of A-Z a-z 0-9 . _ - with the sdk- prefix the sidecar adds');
      }
      const session = sessionOf(req);
      if (session === null) throw new BadRequest(SESSION_PROBLEM);
      const common = {
        ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
        ...(typeof correlation === 'string' ? { correlationId: correlation } : {}),
        ...(session ? { session } : {}),
      };
      if (kind === 'action') {
        const result = await tollgate.run((g) => g.submit(action, common));
        const contained = containmentOf(result);
        if (contained) return refuseContained(contained, result);
        if (result.decision === 'deny') permissions.invalidate();
        return answer(OUTCOME_OF_DECISION[result.decision], 200, view(result));
      }
      const wait = url.searchParams.get('wait');
      const waitSeconds = wait === null ? undefined : Number(wait);
      if (waitSeconds !== undefined && (!Number.isFinite(waitSeconds) || waitSeconds < 0 || waitSeconds > 900)) {
        throw new BadRequest('wait must be a number of seconds from 0 to 900');
      }
      const result = await tollgate.run((g) => g.authoriseAndExecute(action, { ...common, waitSeconds }));
      return answer(OUTCOME_OF_DECISION[result.decision], 200, view(result));
    } catch (err) {
      if (err instanceof BadRequest) return answer('bad_request', 400, envelope('validation_failed', err.message));
      const contained = err instanceof ActionDeniedError ? containmentOf(err.result) : containmentOf(err);
      if (contained) return refuseContained(contained, err instanceof ActionDeniedError ? err.result : null, err);
      if (err instanceof ActionDeniedError) {
        permissions.invalidate();
        return answer('deny', 403, envelope('action_denied', err.message, view(err.result)));
      }
      if (err instanceof ApprovalNotGrantedError) return answer('approval_required', 409, envelope('approval_not_granted', err.message, view(err.result)));
      if (err instanceof ApprovalTimeoutError) return answer('approval_required', 408, envelope('approval_timeout', err.message, view(err.result)));
      if (err instanceof AuthenticationError) {
        log.warn({ code: err.code }, 'sidecar: the workload identity cannot authenticate');
        return answer('deny', 401, envelope(err.code, err.message, err.details));
      }
      if (err instanceof GatewayApiError && !isOutage(err)) {
        // The API's own answer about the request (a 4xx), passed on with its code.
        return answer('bad_request', err.status, { error: { code: err.code, message: err.message, correlation_id: err.correlationId, details: err.details } });
      }
      // Tollgate could not be reached, timed out, failed, or the breaker is open: fail closed.
      if (err instanceof BreakerOpenError) log.debug('sidecar: circuit open, refused at once');
      else log.warn({ err: failureText(err) }, 'sidecar: Tollgate unavailable');
      return answer(
        'unavailable',
        503,
        envelope('gateway_unavailable', 'Tollgate cannot decide now; nothing was run. Retrying with the same Idempotency-Key is safe.', {
          circuit: err instanceof BreakerOpenError ? err.state : 'closed',
        }),
        { 'retry-after': '1' },
      );
    }

    /** A contained agent: 403 `agent_contained` with the reason codes, logged as a refusal. */
    function refuseContained(codes: string[], result: ActionResult | null, err?: unknown) {
      permissions.invalidate();
      log.info({ reason_codes: codes, action_id: result?.action_id ?? null }, 'sidecar: refused, the agent is contained');
      const message = `The agent is contained (${codes.join(', ')}); nothing was run.`;
      return answer(
        'contained',
        403,
        envelope('agent_contained', message, {
          reason_codes: codes,
          ...(result ? { result: view(result) } : {}),
          ...(err instanceof GatewayApiError ? { error_code: err.code } : {}),
        }),
      );
    }
  };

  const server = createServer((req, res) => void handle(req, res, false));
  server.keepAliveTimeout = 65_000;
  await listen(server, (s) => s.listen(opts.port, '127.0.0.1'));
  // Loopback only: the agent beside it in the pod reaches it; nothing outside the pod can.
  const port = (server.address() as { port: number }).port;
  allowedHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  let unix: Server | null = null;
  if (opts.socket) {
    const socketPath = opts.socket;
    await removeStaleSocket(socketPath);
    unix = createServer((req, res) => void handle(req, res, true));
    unix.keepAliveTimeout = 65_000;
    try {
      await listen(unix, (s) => s.listen(socketPath));
      // Any user of the pod's containers may connect (an agent runs as its own uid): the shared volume, which
      // only this pod's containers mount, is what keeps everyone else out, as the pod's network namespace
      // does for the loopback port.
      chmodSync(socketPath, 0o666);
    } catch (err) {
      server.close();
      throw err;
    }
  }
  const closeOne = (s: Server) =>
    new Promise<void>((resolve) => {
      s.closeAllConnections();
      s.close(() => resolve());
    });
  return {
    server,
    port,
    socket: opts.socket,
    // Closing the Unix socket's server removes its file.
    close: async () => {
      await Promise.all([closeOne(server), unix ? closeOne(unix) : undefined]);
    },
  };
}

function listen(server: Server, start: (s: Server) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      server.off('error', reject);
      resolve();
    });
    start(server);
  });
}

/**
 * A socket file left by a sidecar that did not stop cleanly (a killed container: the volume outlives it) is
 * removed, so that listening does not fail with EADDRINUSE. A file that is not a socket, or a socket that a
 * live process still answers on, is not touched: the sidecar refuses to start instead.
 */
async function removeStaleSocket(socketPath: string): Promise<void> {
  let stat;
  try {
    stat = lstatSync(socketPath);
  } catch {
    return; // nothing there
  }
  if (!stat.isSocket()) throw new SidecarListenError(`TOLLGATE_SIDECAR_SOCKET: ${socketPath} exists and is not a socket; not removing it`);
  const live = await new Promise<boolean>((resolve) => {
    const probe = connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new SidecarListenError(`TOLLGATE_SIDECAR_SOCKET: another process is listening on ${socketPath}`);
  unlinkSync(socketPath);
}

/** The sidecar cannot listen where it was told to (a setting's fault, like a bad value). */
export class SidecarListenError extends Error {}
