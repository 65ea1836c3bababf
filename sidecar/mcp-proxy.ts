import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, McpError, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { ActionDeniedError, ApprovalNotGrantedError, ApprovalTimeoutError, AuthenticationError, GatewayApiError } from '../client/index.js';
import { BreakerOpenError } from './breaker.js';
import { RequestMux } from './mcp-mux.js';
import type { CallOutcome, SidecarMetrics } from './metrics.js';
import { containmentOf, isOutage, type PermissionsCache, type Tollgate } from './tollgate.js';

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
  server: Server;
  mux: RequestMux;
  client?: Promise<Client>;
}

const seconds = (since: number) => (performance.now() - since) / 1000;

/**
 * The MCP proxy: a streamable-HTTP MCP endpoint per upstream server. `tools/list` lists only the tools
 * the agent may call (or passes through, for debugging); each `tools/call` is first submitted to
 * Tollgate as an action (tool `<prefix>.<name>`, operation `invoke`, target `mcp://<upstream>/<name>`,
 * the arguments as parameters) and forwarded only when Tollgate allows it. A deny or a contained agent
 * becomes a JSON-RPC error carrying the reason codes; when Tollgate cannot decide, nothing is forwarded
 * (fail closed). One MCP `Server` per upstream, built once; each HTTP request gets the SDK's stateless
 * transport, multiplexed onto it (mcp-mux.ts). The upstream connections are kept.
 */
export class McpProxy {
  private readonly upstreams = new Map<string, Entry>();

  constructor(
    upstreams: Upstream[],
    private readonly opts: McpProxyOptions,
  ) {
    for (const u of upstreams) {
      const mux = new RequestMux();
      const server = this.serverFor(u, mux);
      const entry: Entry = { upstream: u, server, mux };
      this.upstreams.set(u.name, entry);
    }
  }

  /** Connects each upstream's one `Server` to its multiplexer. */
  async start(): Promise<void> {
    for (const entry of this.upstreams.values()) await entry.server.connect(entry.mux);
  }

  has(name: string): boolean {
    return this.upstreams.has(name);
  }

  /** Serves one HTTP request of `/mcp/<name>`. */
  async handle(name: string, req: IncomingMessage, res: ServerResponse, body: unknown, arrived = performance.now()): Promise<void> {
    const entry = this.upstreams.get(name)!;
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    entry.mux.attach(transport, arrived);
    res.on('close', () => void transport.close());
    await transport.handleRequest(req, res, body);
  }

  async close(): Promise<void> {
    for (const entry of this.upstreams.values()) {
      await entry.server.close().catch(() => undefined);
      const client = await entry.client?.catch(() => undefined);
      await client?.close().catch(() => undefined);
    }
  }

  private serverFor(upstream: Upstream, mux: RequestMux): Server {
    const { tollgate, permissions, metrics, log } = this.opts;
    const arrivalOf = (id: RequestId) => mux.arrival(id) ?? performance.now();
    const server = new Server({ name: `tollgate-sidecar/${upstream.name}`, version: '0.1.0' }, { capabilities: { tools: {} } });

    server.setRequestHandler(ListToolsRequestSchema, async (request, extra) => {
      const arrived = arrivalOf(extra.requestId);
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
          throw new McpError(MCP_ERRORS.unavailable, `Tollgate could not say which tools this agent may call (${detail}); nothing is listed`);
        }
        if (p.contained) {
          record('contained');
          log.info({ upstream: upstream.name, reason_codes: p.reason_codes }, 'mcp: tools/list: the agent is contained, no tools listed');
          return { tools: [] };
        }
        allowed = new Set(p.tools.map((t) => t.tool));
      }
      const started = performance.now();
      let listed;
      try {
        listed = await (await this.client(upstream.name)).listTools(request.params);
      } catch (err) {
        upstreamSeconds = seconds(started);
        record('upstream_error');
        throw upstreamError(upstream.name, err);
      }
      upstreamSeconds = seconds(started);
      record('allow');
      if (!allowed) return listed;
      const keep = allowed;
      return { ...listed, tools: listed.tools.filter((t) => keep.has(`${upstream.toolPrefix}.${t.name}`)) };
    });

    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const arrived = arrivalOf(extra.requestId);
      const tool = `${upstream.toolPrefix}.${request.params.name}`;
      const action = {
        tool,
        operation: 'invoke',
        target: `mcp://${upstream.name}/${request.params.name}`,
        parameters: request.params.arguments ?? {},
      };
      let result;
      try {
        result = await tollgate.run((g) => g.authoriseAndExecute(action, { waitSeconds: this.opts.approvalWaitSeconds }));
      } catch (err) {
        const { error, outcome } = this.refusal(tool, err);
        metrics.call('mcp_call', outcome, seconds(arrived));
        throw error;
      }
      if (result.decision !== 'allow' || result.state !== 'approved') {
        metrics.call('mcp_call', 'approval_required', seconds(arrived));
        // Approval still open (no wait configured, or the wait ended), or a state the proxy must not act on.
        throw new McpError(MCP_ERRORS.approvalRequired, `Tollgate requires approval for ${tool}; nothing was forwarded`, {
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
        const answer = await (await this.client(upstream.name)).callTool(request.params);
        metrics.call('mcp_call', 'allow', added);
        return answer;
      } catch (err) {
        metrics.call('mcp_call', 'upstream_error', added);
        throw upstreamError(upstream.name, err);
      }
    });
    return server;
  }

  /** The JSON-RPC error for a submission that did not allow the call, and its outcome for the metrics. */
  private refusal(tool: string, err: unknown): { error: McpError; outcome: CallOutcome } {
    const { log, permissions } = this.opts;
    const contained = err instanceof ActionDeniedError ? containmentOf(err.result) : containmentOf(err);
    if (contained) {
      permissions.invalidate();
      const actionId = err instanceof ActionDeniedError ? err.result.action_id : null;
      log.info({ tool, action_id: actionId, reason_codes: contained }, 'mcp: tools/call refused: the agent is contained');
      return {
        outcome: 'contained',
        error: new McpError(MCP_ERRORS.denied, `Tollgate refused ${tool}: the agent is contained (${contained.join(', ')}); nothing was forwarded`, {
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
        error: new McpError(MCP_ERRORS.denied, `Tollgate denied ${tool}: ${codes.join(', ') || 'no reason given'}`, {
          action_id: err.result.action_id,
          decision: 'deny',
          reason_codes: codes,
        }),
      };
    }
    if (err instanceof ApprovalNotGrantedError || err instanceof ApprovalTimeoutError) {
      return {
        outcome: 'approval_required',
        error: new McpError(MCP_ERRORS.approvalRequired, `Tollgate did not grant ${tool}: ${err.message}`, {
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
        error: new McpError(MCP_ERRORS.denied, `Tollgate refused ${tool}: ${err.code}: ${err.message}; nothing was forwarded`, {
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
      error: new McpError(MCP_ERRORS.unavailable, `Tollgate could not decide on ${tool} (${detail}); nothing was forwarded`),
    };
  }

  /** The upstream's MCP client, connected on first use and again after a failure. */
  private client(name: string): Promise<Client> {
    const entry = this.upstreams.get(name)!;
    if (!entry.client) {
      const client = new Client({ name: 'tollgate-sidecar', version: '0.1.0' });
      entry.client = client
        .connect(new StreamableHTTPClientTransport(new URL(entry.upstream.url)))
        .then(() => {
          client.onclose = () => (entry.client = undefined);
          return client;
        })
        .catch((err: unknown) => {
          entry.client = undefined;
          throw new Error(`the MCP server ${name} cannot be reached: ${failureText(err)}`);
        });
    }
    return entry.client;
  }
}

/** The upstream's own JSON-RPC error as it sent it; anything else (unreachable, broken) as -32004. */
function upstreamError(name: string, err: unknown): McpError {
  if (err instanceof McpError) return err;
  return new McpError(MCP_ERRORS.upstream, `the MCP server ${name} failed: ${failureText(err)}`);
}

/** A failure in words for a log line or an error message: never a token (the client's errors carry none). */
export function failureText(err: unknown): string {
  if (err instanceof GatewayApiError) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.name === 'TimeoutError' ? 'timed out' : err.message;
  return String(err);
}
