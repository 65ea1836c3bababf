import type { IncomingMessage, ServerResponse } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { ActionDeniedError, ApprovalNotGrantedError, ApprovalTimeoutError, GatewayApiError, type GatewayClient } from '../client/index.js';

/** One MCP server the sidecar fronts: `/mcp/<name>`; its tools are `<toolPrefix>.<tool name>` in Tollgate. */
export interface Upstream {
  name: string;
  url: string;
  toolPrefix: string;
}

/** JSON-RPC error codes of the proxy (the implementation-defined server range). */
export const MCP_ERRORS = {
  /** Tollgate decided deny: `data.reason_codes`. */
  denied: -32001,
  /** Approval required and not granted within the wait: `data.approval_id`, `data.approval_expires_at`. */
  approvalRequired: -32002,
  /** Tollgate could not be reached or failed: nothing was forwarded. */
  unavailable: -32003,
  /** The upstream MCP server failed. */
  upstream: -32004,
} as const;

/**
 * The MCP proxy: a streamable-HTTP MCP endpoint per upstream server. `tools/list` passes through; each
 * `tools/call` is first submitted to Tollgate as an action (tool `<prefix>.<name>`, operation `invoke`,
 * target `mcp://<upstream>/<name>`, the arguments as parameters) and forwarded only when Tollgate allows
 * it. A deny becomes a JSON-RPC error carrying the reason codes; when Tollgate cannot be reached, nothing
 * is forwarded (fail closed). Stateless: every HTTP request gets its own MCP server object; the upstream
 * connections are kept.
 */
export class McpProxy {
  private readonly upstreams = new Map<string, { upstream: Upstream; client?: Promise<Client> }>();

  constructor(
    upstreams: Upstream[],
    private readonly gateway: GatewayClient,
    private readonly log: Logger,
    private readonly approvalWaitSeconds = 0,
  ) {
    for (const u of upstreams) this.upstreams.set(u.name, { upstream: u });
  }

  has(name: string): boolean {
    return this.upstreams.has(name);
  }

  /** Serves one HTTP request of `/mcp/<name>`. */
  async handle(name: string, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const entry = this.upstreams.get(name)!;
    const server = this.serverFor(entry.upstream);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  async close(): Promise<void> {
    for (const entry of this.upstreams.values()) {
      const client = await entry.client?.catch(() => undefined);
      await client?.close().catch(() => undefined);
    }
  }

  private serverFor(upstream: Upstream): Server {
    const server = new Server({ name: `tollgate-sidecar/${upstream.name}`, version: '0.1.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async (request) => {
      const client = await this.client(upstream.name);
      return client.listTools(request.params);
    });
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const tool = `${upstream.toolPrefix}.${request.params.name}`;
      const action = {
        tool,
        operation: 'invoke',
        target: `mcp://${upstream.name}/${request.params.name}`,
        parameters: request.params.arguments ?? {},
      };
      let result;
      try {
        result = await this.gateway.authoriseAndExecute(action, { waitSeconds: this.approvalWaitSeconds });
      } catch (err) {
        throw this.refusal(tool, err);
      }
      if (result.decision !== 'allow' || result.state !== 'approved') {
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
      this.log.info({ tool, action_id: result.action_id }, 'mcp: tools/call allowed, forwarding');
      const client = await this.client(upstream.name);
      try {
        return await client.callTool(request.params);
      } catch (err) {
        if (err instanceof McpError) throw err; // the upstream's own JSON-RPC error, as it sent it
        throw new McpError(MCP_ERRORS.upstream, `the MCP server ${upstream.name} failed: ${messageOf(err)}`);
      }
    });
    return server;
  }

  /** The JSON-RPC error for a submission that did not allow the call. */
  private refusal(tool: string, err: unknown): McpError {
    if (err instanceof ActionDeniedError) {
      const codes = err.result.reason_codes;
      this.log.info({ tool, action_id: err.result.action_id, reason_codes: codes }, 'mcp: tools/call denied');
      return new McpError(MCP_ERRORS.denied, `Tollgate denied ${tool}: ${codes.join(', ') || 'no reason given'}`, {
        action_id: err.result.action_id,
        decision: 'deny',
        reason_codes: codes,
      });
    }
    if (err instanceof ApprovalNotGrantedError || err instanceof ApprovalTimeoutError) {
      return new McpError(MCP_ERRORS.approvalRequired, `Tollgate did not grant ${tool}: ${err.message}`, {
        action_id: err.result.action_id,
        approval_id: err.result.approval_id,
        reason_codes: err.result.reason_codes,
      });
    }
    const detail = err instanceof GatewayApiError ? `${err.code}: ${err.message}` : messageOf(err);
    this.log.warn({ tool, err: detail }, 'mcp: Tollgate unavailable, nothing forwarded');
    return new McpError(MCP_ERRORS.unavailable, `Tollgate could not decide on ${tool} (${detail}); nothing was forwarded`);
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
          throw new McpError(ErrorCode.InternalError, `the MCP server ${name} cannot be reached: ${messageOf(err)}`);
        });
    }
    return entry.client;
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
