import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { ActionDeniedError, ApprovalNotGrantedError, ApprovalTimeoutError, AuthenticationError, GatewayApiError } from '../client/index.js';
import { BreakerOpenError } from './breaker.js';
import type { CallOutcome, SidecarMetrics } from './metrics.js';
import { LATEST_PROTOCOL_VERSION, PROTOCOL_VERSIONS, UpstreamClient, UpstreamRpcError, type RpcErrorObject } from './mcp-upstream.js';
import { containmentOf, isOutage, SESSION_PROBLEM, sessionOf, type PermissionsCache, type Tollgate } from './tollgate.js';

/** One MCP server the sidecar fronts: `/mcp/<name>`; its tools are `<toolPrefix>.<tool name>` in Tollgate. */
export interface Upstream {
  name: string;
  url: string;
  toolPrefix: string;
}

/** JSON-RPC error codes of the proxy (the implementation-defined server range). */
export const MCP_ERRORS = {
  /** Tollgate refused: a deny (`data.reason_codes`), a contained agent (`data.contained`), or a refused request. */
  denied: -32001,
  /** Approval required and not granted within the wait: `data.approval_id`, `data.approval_expires_at`. */
  approvalRequired: -32002,
  /** Tollgate could not be reached, failed or timed out (or the breaker is open): nothing was forwarded. */
  unavailable: -32003,
  /** The upstream MCP server failed. */
  upstream: -32004,
} as const;

/** JSON-RPC's own error codes. */
const RPC = { parse: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602, server: -32000 } as const;

export type ToolsListMode = 'filtered' | 'passthrough';

export interface McpProxyOptions {
  tollgate: Tollgate;
  permissions: PermissionsCache;
  metrics: SidecarMetrics;
  log: Logger;
  approvalWaitSeconds: number;
  toolsList: ToolsListMode;
}

interface Entry {
  upstream: Upstream;
  client: UpstreamClient;
  serverInfo: { name: string; version: string };
}

type RequestId = string | number;
interface RpcRequest {
  jsonrpc: '2.0';
  id: RequestId;
  method: string;
  params?: Record<string, unknown>;
}

/**
 * An error the proxy answers a JSON-RPC request with; its message is written as the MCP SDK writes one
 * (`MCP error <code>: ...`), so that agents see what they saw when the proxy was built on the SDK's server.
 */
export class ProxyError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(`MCP error ${code}: ${message}`);
  }
}

const MAX_BODY = 4 * 1024 * 1024;
const MAX_BATCH = 100;
const seconds = (since: number) => (performance.now() - since) / 1000;

/**
 * The MCP proxy: a streamable-HTTP MCP endpoint per upstream server, stateless (no session id), answering
 * JSON (never SSE). `tools/list` lists only the tools the agent may call (or passes through, for debugging);
 * each `tools/call` is first submitted to Tollgate as an action (tool `<prefix>.<name>`, operation `invoke`,
 * target `mcp://<upstream>/<name>`, the arguments as parameters) and forwarded only when Tollgate allows
 * it. A deny or a contained agent becomes a JSON-RPC error carrying the reason codes; when Tollgate cannot
 * decide, nothing is forwarded (fail closed).
 *
 * The JSON-RPC messages are handled here directly, without the SDK's server and transport: the proxy
 * answers four methods (initialize, ping, tools/list, tools/call), and the SDK's per-request transport,
 * schema parsing and request routing cost more than the rest of the proxy together (docs/sidecar.md,
 * Cost). The HTTP rules are the SDK transport's (the same status codes and errors for a bad Accept or
 * Content-Type, a bad body, an unsupported protocol version), except that GET and DELETE answer 405:
 * a stateless server offers no standalone stream and no session, which the transport spec allows.
 */
export class McpProxy {
  private readonly upstreams = new Map<string, Entry>();

  constructor(
    upstreams: Upstream[],
    private readonly opts: McpProxyOptions,
  ) {
    for (const u of upstreams) {
      this.upstreams.set(u.name, { upstream: u, client: new UpstreamClient(u.url), serverInfo: { name: `tollgate-sidecar/${u.name}`, version: '0.1.0' } });
    }
  }

  has(name: string): boolean {
    return this.upstreams.has(name);
  }

  /** Serves one HTTP request of `/mcp/<name>`. */
  async handle(name: string, req: IncomingMessage, res: ServerResponse, arrived = performance.now()): Promise<void> {
    const entry = this.upstreams.get(name)!;
    const fail = (status: number, code: number, message: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
    };
    if (req.method !== 'POST') {
      req.resume();
      return fail(405, RPC.server, 'Method not allowed.', { allow: 'POST' });
    }
    const accept = req.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      req.resume();
      return fail(406, RPC.server, 'Not Acceptable: Client must accept both application/json and text/event-stream');
    }
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') {
      req.resume();
      return fail(415, RPC.server, 'Unsupported Media Type: Content-Type must be application/json');
    }
    const body = await readBody(req, MAX_BODY);
    if (body === null) return fail(413, RPC.server, `Payload too large: the body must be at most ${MAX_BODY} bytes`);
    let raw: unknown;
    try {
      raw = JSON.parse(body.toString('utf8'));
    } catch {
      return fail(400, RPC.parse, 'Parse error: Invalid JSON');
    }
    if (Array.isArray(raw) && raw.length > MAX_BATCH) return fail(400, RPC.invalidRequest, `Invalid Request: Batch must not exceed ${MAX_BATCH} messages`);
    const messages = Array.isArray(raw) ? raw : [raw];
    if (messages.length === 0 || !messages.every(isMessage)) return fail(400, RPC.parse, 'Parse error: Invalid JSON-RPC message');
    const initialize = messages.some((m) => m.method === 'initialize' && m.id !== undefined);
    if (initialize && messages.length > 1) return fail(400, RPC.invalidRequest, 'Invalid Request: Only one initialization request is allowed');
    const version = req.headers['mcp-protocol-version'];
    if (!initialize && typeof version === 'string' && !(PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
      return fail(400, RPC.server, `Bad Request: Unsupported protocol version: ${version} (supported versions: ${PROTOCOL_VERSIONS.join(', ')})`);
    }
    const session = sessionOf(req);
    if (session === null) return fail(400, RPC.server, `Bad Request: ${SESSION_PROBLEM}`);
    const requests = messages.filter((m): m is RpcRequest => m.method !== undefined && m.id !== undefined);
    // Notifications (initialized, cancelled) and answers need nothing from a stateless proxy.
    if (requests.length === 0) {
      res.writeHead(202).end();
      return;
    }
    const answers = await Promise.all(requests.map((r) => this.#answer(entry, r, arrived, session)));
    if (res.destroyed) return;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(Array.isArray(raw) ? answers : answers[0]));
  }

  async close(): Promise<void> {
    for (const entry of this.upstreams.values()) await entry.client.close().catch(() => undefined);
  }

  /** The JSON-RPC answer to one request. */
  async #answer(entry: Entry, request: RpcRequest, arrived: number, session: string | undefined): Promise<object> {
    try {
      return { jsonrpc: '2.0', id: request.id, result: await this.#dispatch(entry, request, arrived, session) };
    } catch (err) {
      let error: RpcErrorObject;
      if (err instanceof ProxyError) error = { code: err.code, message: err.message, ...(err.data === undefined ? {} : { data: err.data }) };
      else if (err instanceof UpstreamRpcError) error = err.error;
      else {
        this.opts.log.error({ err: failureText(err), method: request.method }, 'mcp: the proxy failed');
        error = { code: -32603, message: 'Internal error' };
      }
      return { jsonrpc: '2.0', id: request.id, error };
    }
  }

  #dispatch(entry: Entry, request: RpcRequest, arrived: number, session: string | undefined): Promise<unknown> | unknown {
    const params = request.params;
    switch (request.method) {
      case 'initialize': {
        const asked = params?.protocolVersion;
        const protocolVersion = typeof asked === 'string' && (PROTOCOL_VERSIONS as readonly string[]).includes(asked) ? asked : LATEST_PROTOCOL_VERSION;
        return { protocolVersion, capabilities: { tools: {} }, serverInfo: entry.serverInfo };
      }
      case 'ping':
        return {};
      case 'tools/list':
        return this.#list(entry, params, arrived);
      case 'tools/call':
        if (typeof params?.name !== 'string') throw new ProxyError(RPC.invalidParams, 'Invalid params: tools/call needs params.name, a string');
        if (params.arguments !== undefined && (typeof params.arguments !== 'object' || params.arguments === null || Array.isArray(params.arguments))) {
          throw new ProxyError(RPC.invalidParams, 'Invalid params: tools/call params.arguments must be an object');
        }
        return this.#call(entry, params as { name: string; arguments?: Record<string, unknown> }, arrived, session);
      default:
        // Only tools are proxied: resources, prompts and the rest are not offered (the SDK's words, unprefixed).
        throw new UpstreamRpcError({ code: RPC.methodNotFound, message: 'Method not found' });
    }
  }

  async #list(entry: Entry, params: Record<string, unknown> | undefined, arrived: number): Promise<unknown> {
    const { permissions, metrics, log } = this.opts;
    const { upstream } = entry;
    let upstreamSeconds = 0;
    const record = (outcome: CallOutcome) => metrics.call('mcp_list', outcome, Math.max(0, seconds(arrived) - upstreamSeconds));
    let allowed: Set<string> | undefined;
    if (this.opts.toolsList === 'filtered') {
      let p;
      try {
        p = await permissions.get();
      } catch (err) {
        record(isOutage(err) || err instanceof BreakerOpenError ? 'unavailable' : 'bad_request');
        const detail = failureText(err);
        log[err instanceof BreakerOpenError ? 'debug' : 'warn']({ upstream: upstream.name, err: detail }, "mcp: tools/list: the agent's permissions cannot be read, nothing listed");
        throw new ProxyError(MCP_ERRORS.unavailable, `Tollgate could not say which tools this agent may call (${detail}); nothing is listed`);
      }
      if (p.contained) {
        record('contained');
        log.info({ upstream: upstream.name, reason_codes: p.reason_codes }, 'mcp: tools/list: the agent is contained, no tools listed');
        return { tools: [] };
      }
      allowed = new Set(p.tools.map((t) => t.tool));
    }
    const started = performance.now();
    let listed: { tools?: unknown };
    try {
      listed = (await entry.client.request('tools/list', params)) as { tools?: unknown };
    } catch (err) {
      upstreamSeconds = seconds(started);
      record('upstream_error');
      throw upstreamError(upstream.name, err);
    }
    upstreamSeconds = seconds(started);
    if (typeof listed !== 'object' || listed === null || !Array.isArray(listed.tools)) {
      record('upstream_error');
      throw new ProxyError(MCP_ERRORS.upstream, `the MCP server ${upstream.name} failed: its tools/list answer has no tools`);
    }
    record('allow');
    if (!allowed) return listed;
    const keep = allowed;
    return { ...listed, tools: (listed.tools as { name?: unknown }[]).filter((t) => keep.has(`${upstream.toolPrefix}.${String(t?.name)}`)) };
  }

  /** A `tools/call`: decided by Tollgate (in the agent's `session` when it names one), then forwarded when allowed. */
  async #call(entry: Entry, params: { name: string; arguments?: Record<string, unknown> }, arrived: number, session: string | undefined): Promise<unknown> {
    const { tollgate, metrics, log } = this.opts;
    const { upstream } = entry;
    const tool = `${upstream.toolPrefix}.${params.name}`;
    const action = { tool, operation: 'invoke', target: `mcp://${upstream.name}/${params.name}`, parameters: params.arguments ?? {} };
    let result;
    try {
      result = await tollgate.run((g) => g.authoriseAndExecute(action, { waitSeconds: this.opts.approvalWaitSeconds, ...(session ? { session } : {}) }));
    } catch (err) {
      const { error, outcome } = this.refusal(tool, err);
      metrics.call('mcp_call', outcome, seconds(arrived));
      throw error;
    }
    if (result.decision !== 'allow' || result.state !== 'approved') {
      metrics.call('mcp_call', 'approval_required', seconds(arrived));
      // Approval still open (no wait configured, or the wait ended), or a state the proxy must not act on.
      throw new ProxyError(MCP_ERRORS.approvalRequired, `Tollgate requires approval for ${tool}; nothing was forwarded`, {
        action_id: result.action_id,
        state: result.state,
        decision: result.decision,
        reason_codes: result.reason_codes,
        approval_id: result.approval_id,
        approval_expires_at: result.approval_expires_at,
      });
    }
    log.info({ tool, action_id: result.action_id }, 'mcp: tools/call allowed, forwarding');
    const added = seconds(arrived);
    try {
      // The call's params as the agent sent them (name, arguments, _meta), and the answer as it came.
      const answer = await entry.client.request('tools/call', params);
      metrics.call('mcp_call', 'allow', added);
      return answer;
    } catch (err) {
      metrics.call('mcp_call', 'upstream_error', added);
      throw upstreamError(upstream.name, err);
    }
  }

  /** The JSON-RPC error for a submission that did not allow the call, and its outcome for the metrics. */
  private refusal(tool: string, err: unknown): { error: ProxyError; outcome: CallOutcome } {
    const { log, permissions } = this.opts;
    const contained = err instanceof ActionDeniedError ? containmentOf(err.result) : containmentOf(err);
    if (contained) {
      permissions.invalidate();
      const actionId = err instanceof ActionDeniedError ? err.result.action_id : null;
      log.info({ tool, action_id: actionId, reason_codes: contained }, 'mcp: tools/call refused: the agent is contained');
      return {
        outcome: 'contained',
        error: new ProxyError(MCP_ERRORS.denied, `Tollgate refused ${tool}: the agent is contained (${contained.join(', ')}); nothing was forwarded`, {
          action_id: actionId,
          decision: 'deny',
          contained: true,
          reason_codes: contained,
        }),
      };
    }
    if (err instanceof ActionDeniedError) {
      permissions.invalidate();
      const codes = err.result.reason_codes;
      log.info({ tool, action_id: err.result.action_id, reason_codes: codes }, 'mcp: tools/call denied');
      return {
        outcome: 'deny',
        error: new ProxyError(MCP_ERRORS.denied, `Tollgate denied ${tool}: ${codes.join(', ') || 'no reason given'}`, {
          action_id: err.result.action_id,
          decision: 'deny',
          reason_codes: codes,
        }),
      };
    }
    if (err instanceof ApprovalNotGrantedError || err instanceof ApprovalTimeoutError) {
      return {
        outcome: 'approval_required',
        error: new ProxyError(MCP_ERRORS.approvalRequired, `Tollgate did not grant ${tool}: ${err.message}`, {
          action_id: err.result.action_id,
          approval_id: err.result.approval_id,
          reason_codes: err.result.reason_codes,
        }),
      };
    }
    if (err instanceof GatewayApiError && !isOutage(err)) {
      // Tollgate answered and refused the request itself (an identity it cannot authenticate, a rate limit,
      // arguments that are not an action): a refusal, not an outage.
      const level = err instanceof AuthenticationError ? 'warn' : 'info';
      log[level]({ tool, status: err.status, code: err.code }, 'mcp: tools/call refused by Tollgate');
      return {
        outcome: err instanceof AuthenticationError ? 'deny' : 'bad_request',
        error: new ProxyError(MCP_ERRORS.denied, `Tollgate refused ${tool}: ${err.code}: ${err.message}; nothing was forwarded`, {
          decision: 'deny',
          reason_codes: [],
          error: { status: err.status, code: err.code },
        }),
      };
    }
    const detail = failureText(err);
    if (err instanceof BreakerOpenError) log.debug({ tool }, 'mcp: circuit open, refused at once, nothing forwarded');
    else log.warn({ tool, err: detail }, 'mcp: Tollgate unavailable, nothing forwarded');
    return {
      outcome: 'unavailable',
      error: new ProxyError(MCP_ERRORS.unavailable, `Tollgate could not decide on ${tool} (${detail}); nothing was forwarded`),
    };
  }
}

/** A JSON-RPC message as the transport accepts one: a request, a notification or an answer. */
function isMessage(m: unknown): m is { id?: RequestId; method?: string; params?: Record<string, unknown> } {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return false;
  const o = m as Record<string, unknown>;
  if (o.jsonrpc !== '2.0') return false;
  const idOk = o.id === undefined || typeof o.id === 'string' || (typeof o.id === 'number' && Number.isInteger(o.id));
  if (!idOk) return false;
  if (typeof o.method === 'string') return o.params === undefined || (typeof o.params === 'object' && o.params !== null && !Array.isArray(o.params));
  return o.id !== undefined && ('result' in o || 'error' in o);
}

/**
 * The request's body, or null once it passes `max` bytes (read to its end all the same, the excess dropped, so
 * that the answer can still be written). Read with 'data' and 'end' rather than an async iterator: the
 * iterator's promise per chunk costs a measurable part of a small request (bench/sidecar.ts).
 */
export function readBody(req: IncomingMessage, max: number): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= max) chunks.push(chunk);
    });
    let ended = false;
    req.once('end', () => {
      ended = true;
      resolve(size > max ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
    req.once('error', reject);
    // An agent that hung up before the end: settled, so that nothing waits on it ('close' follows every request).
    req.once('close', () => {
      if (!ended) reject(new Error('the request was aborted before its end'));
    });
  });
}

/** The upstream's own JSON-RPC error as it sent it; anything else (unreachable, broken) as -32004. */
function upstreamError(name: string, err: unknown): Error {
  if (err instanceof UpstreamRpcError) return err;
  return new ProxyError(MCP_ERRORS.upstream, `the MCP server ${name} failed: ${failureText(err)}`);
}

/** A failure in words for a log line or an error message: never a token (the client's errors carry none). */
export function failureText(err: unknown): string {
  if (err instanceof GatewayApiError) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.name === 'TimeoutError' ? 'timed out' : err.message;
  return String(err);
}
