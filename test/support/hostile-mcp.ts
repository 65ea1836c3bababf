import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { startStandin, type Standin } from './standin.js';

/**
 * MCP servers of our own on loopback, speaking just enough of the streamable HTTP transport (MCP 2025-06-18)
 * to be discovered: `initialize` (with an `Mcp-Session-Id`), `notifications/initialized` (202), `tools/list`
 * in pages, `DELETE` of the session. Each step answers well unless `misbehave` takes it over, which is how
 * the tests build hostile servers: oversized, redirecting, never-ending, slow, malformed.
 */

/** A JSON-RPC request or notification as the server received it. */
export interface RpcRequest {
  jsonrpc?: unknown;
  id?: number | string;
  method?: string;
  params?: { cursor?: string } & Record<string, unknown>;
}

/** The step a request is: what the discovering client does, in order. */
export type McpStep = 'initialize' | 'notifications/initialized' | 'tools/list' | 'delete' | 'other';

export interface HostileMcpOptions {
  /** One page of tools/list by the cursor asked for (undefined: the first). Default: one tool, `echo`. */
  page?: (cursor: string | undefined) => { tools: unknown[]; nextCursor?: string };
  /** Takes a step over (answers it itself) by returning true; false leaves it the well-behaved answer. */
  misbehave?: (step: McpStep, rpc: RpcRequest, res: ServerResponse, req: IncomingMessage) => boolean | Promise<boolean>;
  /** Answer requests as an event stream (text/event-stream) instead of JSON. */
  sse?: boolean;
  /** The session id initialize answers with; null for none. Default `hostile-session-1`. */
  sessionId?: string | null;
  /** serverInfo of initialize. */
  serverInfo?: { name: string; version: string };
  /** HTTPS with the test CA (`testTls()`), as a server reached with a credential must be. */
  tls?: boolean;
}

/** A JSON-RPC result response. */
export const rpcResult = (id: unknown, result: unknown) => ({ jsonrpc: '2.0', id, result });

/** Answers one JSON document (status 200 unless given). */
export function sendJson(res: ServerResponse, body: unknown, status = 200, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** Starts an event stream and writes `messages` as `message` events; the stream stays open unless `end`. */
export function sendSse(res: ServerResponse, messages: unknown[], options: { end?: boolean; headers?: Record<string, string> } = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...options.headers });
  for (const m of messages) res.write(`event: message\ndata: ${typeof m === 'string' ? m : JSON.stringify(m)}\n\n`);
  if (options.end ?? true) res.end();
}

/** A well-formed tool. */
export function tool(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, description: `The ${name} tool.`, inputSchema: { type: 'object', properties: { text: { type: 'string' } } }, ...extra };
}

/** `count` tools `t00000`…, with short descriptions and a small schema, `perPage` a page, cursors `p<n>`. */
export function pagedTools(count: number, perPage: number): (cursor: string | undefined) => { tools: unknown[]; nextCursor?: string } {
  return (cursor) => {
    const start = cursor === undefined ? 0 : Number(cursor.slice(1));
    const end = Math.min(count, start + perPage);
    const tools = [];
    for (let i = start; i < end; i++) {
      tools.push(tool(`t${String(i).padStart(5, '0')}`, { annotations: { readOnlyHint: i % 2 === 0 } }));
    }
    return end < count ? { tools, nextCursor: `p${end}` } : { tools };
  };
}

function stepOf(req: IncomingMessage, rpc: RpcRequest): McpStep {
  if (req.method === 'DELETE') return 'delete';
  if (rpc.method === 'initialize' || rpc.method === 'notifications/initialized' || rpc.method === 'tools/list') return rpc.method;
  return 'other';
}

/** The well-behaved answer to a step. */
function answerWell(options: HostileMcpOptions, step: McpStep, rpc: RpcRequest, res: ServerResponse): void {
  const answer = (message: unknown, headers: Record<string, string> = {}) =>
    options.sse ? sendSse(res, [message], { headers }) : sendJson(res, message, 200, headers);
  const sessionId = options.sessionId === undefined ? 'hostile-session-1' : options.sessionId;
  switch (step) {
    case 'initialize':
      return answer(
        rpcResult(rpc.id, {
          protocolVersion: '2025-06-18',
          capabilities: { tools: {} },
          serverInfo: options.serverInfo ?? { name: 'hostile-test-server', version: '0.0.1' },
        }),
        sessionId ? { 'mcp-session-id': sessionId } : {},
      );
    case 'notifications/initialized':
      res.writeHead(202).end();
      return;
    case 'tools/list':
      return answer(rpcResult(rpc.id, (options.page ?? (() => ({ tools: [tool('echo')] })))(rpc.params?.cursor)));
    case 'delete':
      res.writeHead(200).end();
      return;
    default:
      return sendJson(res, { jsonrpc: '2.0', id: rpc.id ?? null, error: { code: -32601, message: 'Method not found' } });
  }
}

/** An MCP server on 127.0.0.1 (a stand-in: every request is in `requests`, connections are counted). */
export function startHostileMcp(options: HostileMcpOptions = {}): Promise<Standin> {
  return startStandin({
    tls: options.tls ?? false,
    handler: async (req, res, body) => {
      let rpc: RpcRequest = {};
      try {
        rpc = body ? (JSON.parse(body) as RpcRequest) : {};
      } catch {
        return sendJson(res, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }, 400);
      }
      const step = stepOf(req, rpc);
      if (options.misbehave && (await options.misbehave(step, rpc, res, req))) return;
      answerWell(options, step, rpc, res);
    },
  });
}

/** The JSON-RPC bodies of the requests a stand-in received, parsed (DELETE and empty bodies as {}). */
export function rpcRequests(server: Standin): (RpcRequest & { httpMethod: string; headers: IncomingMessage['headers'] })[] {
  return server.requests.map((r) => ({ ...(r.body ? (JSON.parse(r.body) as RpcRequest) : {}), httpMethod: r.method, headers: r.headers }));
}

/** A stand-in that passes every request to `target` and records it, with the status and headers of its answer. */
export interface RecordingProxy extends Standin {
  /** The answers, in the order of `requests`. */
  answers: { status: number; headers: IncomingHttpHeaders }[];
}

/**
 * A recording proxy on 127.0.0.1 in front of a real MCP server at `target` (`http://127.0.0.1:<port>`): what
 * the server saw (methods, headers, JSON-RPC bodies) and what it answered, the answers streamed through
 * unchanged (event streams included).
 */
export async function startRecordingProxy(target: string): Promise<RecordingProxy> {
  const upstream = new URL(target);
  const answers: RecordingProxy['answers'] = [];
  const standin = await startStandin({
    handler: (req, res, body) =>
      new Promise<void>((resolve, reject) => {
        const forward = httpRequest(
          { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
          (answer) => {
            answers.push({ status: answer.statusCode ?? 0, headers: answer.headers });
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
            answer.on('end', resolve);
            answer.on('error', reject);
            res.on('close', () => {
              answer.destroy();
              resolve();
            });
          },
        );
        forward.on('error', reject);
        forward.end(body);
      }),
  });
  return Object.assign(standin, { answers });
}
