import { Pool } from '../lib/undici-dispatchers.js';

/**
 * The MCP protocol versions the proxy speaks, newest first: the SDK's, written here so the sidecar does not load
 * the SDK (test/sidecar/footprint.test.ts holds them equal).
 */
export const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'] as const;
export const LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[0];

/** A JSON-RPC error object as a server sent it. */
export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** The upstream answered the request with a JSON-RPC error: passed to the agent as it was sent. */
export class UpstreamRpcError extends Error {
  override name = 'UpstreamRpcError';
  constructor(readonly error: RpcErrorObject) {
    super(error.message);
  }
}

/** The upstream could not be reached or did not answer as a streamable-HTTP MCP server does. */
export class UpstreamFailure extends Error {
  override name = 'UpstreamFailure';
}

/** How long one upstream request may take (the SDK client's default request timeout). */
const REQUEST_TIMEOUT_MS = 60_000;
const CLIENT_INFO = { name: 'tollgate-sidecar', version: '0.1.0' };

interface Session {
  protocolVersion: string;
  sessionId: string | undefined;
}

/**
 * The sidecar's client of one upstream MCP server over streamable HTTP: one keep-alive undici `Pool` to its
 * origin, one MCP session (initialize, then `notifications/initialized`) made on first use and again when
 * the server forgets it (404 with a session id). A request answers the upstream's JSON-RPC `result` as
 * sent, untouched (no schema parse: the agent's own client validates it), or throws UpstreamRpcError with
 * its error as sent, or UpstreamFailure. Answers come as JSON or as an SSE stream (read until the answer
 * to the request arrives; notifications before it are dropped: the proxy forwards no progress).
 */
export class UpstreamClient {
  readonly #pool: Pool;
  readonly #path: string;
  #session: Promise<Session> | undefined;
  #nextId = 0;

  constructor(readonly url: string) {
    const u = new URL(url);
    this.#path = u.pathname + u.search;
    // One request per connection at a time (no pipelining: a slow tool must not hold up the next call);
    // connections stay open between calls.
    this.#pool = new Pool(u.origin, { pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: REQUEST_TIMEOUT_MS, bodyTimeout: REQUEST_TIMEOUT_MS });
  }

  /** `method` with `params` on the upstream: its `result`. */
  async request(method: string, params: unknown): Promise<unknown> {
    const session = await this.#connect();
    try {
      return await this.#send(session, method, params);
    } catch (err) {
      // A server that restarted or expired the session answers 404: make a new one, once.
      if (!(err instanceof SessionGone)) throw err;
      if (this.#session && (await this.#session.catch(() => undefined)) === session) this.#session = undefined;
      return this.#send(await this.#connect(), method, params);
    }
  }

  close(): Promise<void> {
    return this.#pool.close();
  }

  #connect(): Promise<Session> {
    this.#session ??= this.#initialize().catch((err: unknown) => {
      this.#session = undefined;
      throw err;
    });
    return this.#session;
  }

  async #initialize(): Promise<Session> {
    const id = ++this.#nextId;
    const message = { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO } };
    const { answer, headers } = await this.#post(JSON.stringify(message), undefined, id);
    if (!answer) throw new UpstreamFailure('the MCP server did not answer initialize');
    if (answer.error) throw new UpstreamRpcError(answer.error);
    const version = (answer.result as { protocolVersion?: unknown } | undefined)?.protocolVersion;
    if (typeof version !== 'string' || !(PROTOCOL_VERSIONS as readonly string[]).includes(version)) {
      throw new UpstreamFailure(`the MCP server speaks protocol version ${String(version)}, which the proxy does not`);
    }
    const sid = headers['mcp-session-id'];
    const session = { protocolVersion: version, sessionId: typeof sid === 'string' ? sid : undefined };
    await this.#post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), session, undefined);
    return session;
  }

  async #send(session: Session, method: string, params: unknown): Promise<unknown> {
    const id = ++this.#nextId;
    const { answer } = await this.#post(JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }), session, id);
    if (!answer) throw new UpstreamFailure(`the MCP server did not answer ${method}`);
    if (answer.error) throw new UpstreamRpcError(answer.error);
    return answer.result;
  }

  /** One POST; for a request (`id`), its answer from a JSON body or the SSE stream. */
  async #post(body: string, session: Session | undefined, id: number | undefined) {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    if (session) {
      headers['mcp-protocol-version'] = session.protocolVersion;
      if (session.sessionId) headers['mcp-session-id'] = session.sessionId;
    }
    let res;
    try {
      res = await this.#pool.request({ method: 'POST', path: this.#path, headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (err) {
      throw new UpstreamFailure(err instanceof Error && err.name === 'TimeoutError' ? 'timed out' : (err as Error).message);
    }
    if (res.statusCode === 404 && session?.sessionId) {
      await res.body.dump();
      throw new SessionGone();
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const text = await res.body.text().catch(() => '');
      const error = rpcErrorIn(text);
      // A JSON-RPC error the server answered with an HTTP error status (a bad request of ours): as sent.
      if (error) throw new UpstreamRpcError(error);
      throw new UpstreamFailure(`HTTP ${res.statusCode}`);
    }
    if (id === undefined) {
      await res.body.dump();
      return { answer: undefined, headers: res.headers };
    }
    const type = String(res.headers['content-type'] ?? '');
    const answer = type.startsWith('text/event-stream') ? await answerInStream(res.body, id) : answerIn(await res.body.text(), id);
    return { answer, headers: res.headers };
  }
}

class SessionGone extends Error {}

interface Answer {
  id?: unknown;
  result?: unknown;
  error?: RpcErrorObject;
}

function isAnswer(m: unknown, id: number): m is Answer {
  return typeof m === 'object' && m !== null && (m as Answer).id === id && ('result' in m || 'error' in m);
}

function answerIn(text: string, id: number): Answer | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UpstreamFailure('the MCP server answered something that is not JSON');
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  return messages.find((m) => isAnswer(m, id)) as Answer | undefined;
}

function rpcErrorIn(text: string): RpcErrorObject | undefined {
  try {
    const e = (JSON.parse(text) as { error?: RpcErrorObject }).error;
    return e && typeof e.code === 'number' && typeof e.message === 'string' ? e : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The answer to `id` in an SSE stream, as soon as it arrives. The rest of the stream is still read (a
 * stateless server ends it right after the answer), so that the connection stays open for the next call.
 */
function answerInStream(body: NodeJS.ReadableStream & { destroy(err?: Error): void }, id: number): Promise<Answer | undefined> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    let settled = false;
    const settle = (err: Error | undefined, answer?: Answer) => {
      if (settled) return;
      settled = true;
      if (err) {
        body.destroy();
        reject(err);
      } else resolve(answer);
    };
    body.on('data', (chunk: Buffer) => {
      if (settled) return;
      buffer += chunk.toString('utf8');
      for (let m = /\r?\n\r?\n/.exec(buffer); m; m = /\r?\n\r?\n/.exec(buffer)) {
        const event = buffer.slice(0, m.index);
        buffer = buffer.slice(m.index + m[0].length);
        const data = event
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(l.startsWith('data: ') ? 6 : 5))
          .join('\n');
        if (!data) continue;
        let message: unknown;
        try {
          message = JSON.parse(data);
        } catch {
          return settle(new UpstreamFailure('the MCP server sent an event that is not JSON'));
        }
        if (isAnswer(message, id)) return settle(undefined, message);
      }
    });
    body.on('end', () => settle(undefined, undefined));
    body.on('error', (err: Error) => settle(new UpstreamFailure(err.message)));
  });
}
