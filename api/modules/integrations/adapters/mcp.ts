import {
  InitializeResultSchema,
  JSONRPCErrorResponseSchema,
  JSONRPCResultResponseSchema,
  PaginatedResultSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  ToolSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { OUTBOUND_DEFAULTS, OutboundError, type OutboundResponse } from '../../../platform/outbound.js';
import { API_VERSION } from '../../../platform/openapi.js';
import { ConnectorError, emptyResult, type Adapter, type DiscoveredMCPServer, type DiscoveredTool, type DiscoverContext, type Http } from './contract.js';
import { textProblems } from './live-support.js';

/**
 * The live `mcp` adapter (behaviour.md, "MCP discovery protocol"): one MCP server's identity and tool list,
 * read over the streamable HTTP transport of MCP 2025-06-18.
 *
 * 1. `POST {endpoint}` `initialize` (protocol `2025-06-18`, client `svc-discovery`, no capabilities); the
 *    `Mcp-Session-Id` the server returns is kept and sent on every later request, with `MCP-Protocol-Version`.
 * 2. `POST` the `notifications/initialized` notification (the server answers 202, any 2xx is taken).
 * 3. `POST` `tools/list`, following `nextCursor` pages.
 * 4. `DELETE {endpoint}` ends the session when the server gave one (best effort, on failure too).
 *
 * Answers are JSON or server-sent events, each up to 2 MB; on an event stream, events other than the
 * response (the server's notifications and requests) are skipped, and reading stops as soon as the
 * response arrived, so a server that keeps its stream open does not hold discovery. Every failure is a
 * ConnectorError whose message names the host and the step (never the URL's path, which may carry a key):
 * a redirect (3xx, never followed), an answer over 2 MB, a slow server (15 s per request, 60 s in all), a
 * JSON-RPC error (its code and message), an answer that is not JSON-RPC ("malformed answer"), a list over
 * 100 pages or 10,000 tools. A failure returns nothing: a run never records half a tool list (which
 * reconciliation would take for a changed tool set).
 *
 * Why not the SDK's `StreamableHTTPClientTransport`: it sends through `fetch`, which follows redirects,
 * reads answers of any size, has no time bound of its own and connects wherever DNS says. Discovery calls
 * endpoints that people register, so every request must go through the SSRF-guarded `Http` of the run
 * (pinned, checked addresses; no redirects; a size and time bound on each exchange). The protocol part is
 * three requests; the SDK's zod schemas (`@modelcontextprotocol/sdk/types.js`) still check every answer.
 *
 * Tools: each becomes `<tool_prefix>.<name>` (the server's name verbatim) with its title
 * (`title`, else `annotations.title`), description, input schema and the server's `readOnlyHint` and
 * `idempotentHint` as declared. Tools whose name is not 1-128 of `A-Z a-z 0-9 _ . -` (the MCP spec's
 * tool-name charset; names with spaces, slashes or other Unicode cannot become tool keys) are skipped with
 * a warning, as are repeated names (the first is kept). A tool that does not follow the MCP tool format in
 * other ways is recorded with what can be read and a warning: a tool hidden by a malformed field would
 * escape governance. Descriptions are kept up to 64 KiB (longer ones are cut, with a warning) so the
 * poisoning detector sees what an agent's model would see. The privilege class is left to the service.
 */

const KEY = 'mcp';
/** The protocol version discovery asks for (behaviour.md, "MCP discovery protocol"). */
export const MCP_PROTOCOL_VERSION = '2025-06-18';
/** The client name servers see (behaviour.md). */
export const MCP_CLIENT_NAME = 'svc-discovery';
/** The package's version (API_VERSION is package.json's version). */
const CLIENT_VERSION = API_VERSION;

/**
 * Versions a server may answer with: those the SDK's schemas know that have the streamable HTTP transport
 * (2025-03-26 and later; the tool list's format only grew since).
 */
const ACCEPTED_VERSIONS: readonly string[] = SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v >= '2025-03-26');

/** `tool_prefix`: what tool keys start with (lower case, as the sidecar's `toolPrefix` usually is; the name after it keeps its case). */
export const MCP_TOOL_PREFIX = /^[a-z][a-z0-9_-]{0,39}$/;
/** The MCP spec's tool-name charset and length (2025-06-18 and later). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** An `Mcp-Session-Id`: visible ASCII (MCP spec, "Session Management"), bounded. */
const SESSION_ID = /^[\x21-\x7e]{1,1024}$/;

/** The bounds of one discovery (exported for tests and documentation; `createMcpAdapter` takes smaller ones). */
export interface McpLimits {
  /** Each answer's size (behaviour.md: up to 2 MB). */
  maxAnswerBytes: number;
  /** Each request's time, connection included. */
  requestTimeoutMs: number;
  /** The whole discovery's time (every page). */
  totalTimeoutMs: number;
  /** tools/list pages followed; a server with more fails the run (it is paging forever or hiding tools). */
  maxPages: number;
  /** Tools read in all; more fails the run. */
  maxTools: number;
  /** Characters kept of a description (longer: cut, with a warning). */
  maxDescriptionChars: number;
  /** Warnings listed one by one; beyond it one line counts the rest. */
  maxWarnings: number;
}

export const MCP_LIMITS: McpLimits = {
  maxAnswerBytes: OUTBOUND_DEFAULTS.maxBytes,
  requestTimeoutMs: OUTBOUND_DEFAULTS.timeoutMs,
  totalTimeoutMs: 60_000,
  maxPages: 100,
  maxTools: 10_000,
  maxDescriptionChars: 64 * 1024,
  maxWarnings: 100,
};

const TITLE_MAX = 500;
const SERVER_NAME_MAX = 200;
const ENDPOINT_MAX = 2048;

// ---------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------

/**
 * The tool prefix a name gives when `tool_prefix` is not set: lower case, runs of anything but letters,
 * digits, `_` and `-` as one `_`, leading non-letters dropped, at most 40 characters; '' when nothing is left.
 */
export function defaultToolPrefix(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '_')
    .replace(/^[^a-z]+/, '')
    .slice(0, 40)
    .replace(/[_-]+$/, '');
}

function endpointProblems(config: Record<string, unknown>): string[] {
  const value = config.endpoint;
  if (value === undefined || value === null) return ['endpoint is required'];
  if (typeof value !== 'string' || value.trim() === '') return ['endpoint must be an http(s) URL'];
  if (value.length > ENDPOINT_MAX) return [`endpoint is longer than ${ENDPOINT_MAX} characters`];
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    return ['endpoint is not an absolute URL'];
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return [`endpoint must use http or https (got ${url.protocol.replace(/:$/, '')})`];
  if (url.username || url.password) return ['endpoint must not carry credentials; use a credential reference'];
  if (url.hash) return ['endpoint must not carry a fragment'];
  return [];
}

function namePrefixProblems(config: Record<string, unknown>): string[] {
  const nameProblems = textProblems(config, 'name', { required: true, max: 200 });
  if (nameProblems.length === 0 && (config.name as string).trim().length < 2) nameProblems.push('name must be at least 2 characters');
  const prefixShape = 'a lower-case letter, then up to 39 lower-case letters, digits, _ or -';
  const prefixProblems = textProblems(config, 'tool_prefix', { required: false, max: 40, pattern: MCP_TOOL_PREFIX, shape: prefixShape });
  if (config.tool_prefix === undefined || config.tool_prefix === null) {
    if (nameProblems.length === 0 && !MCP_TOOL_PREFIX.test(defaultToolPrefix(config.name as string))) {
      prefixProblems.push(`tool_prefix is required: the name gives no usable prefix (${prefixShape})`);
    }
  }
  return [...nameProblems, ...prefixProblems];
}

/**
 * `endpoint` (required): the server's streamable HTTP endpoint, an absolute http(s) URL of at most 2048
 * characters, without credentials or fragment. `name` (required, 2-200 characters): the server's name in
 * the registry. `tool_prefix` (optional, `^[a-z][a-z0-9_-]{0,39}$`): what its tool keys start with; by
 * default `defaultToolPrefix(name)`. Other keys are not the adapter's and are ignored.
 */
function validateConfig(config: Record<string, unknown>): string[] {
  return [...endpointProblems(config), ...namePrefixProblems(config)];
}

// ---------------------------------------------------------------------------------------------------
// The exchange
// ---------------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** One discovery's connection state: where, with what headers, until when. */
interface Session {
  http: Http;
  endpoint: string;
  host: string;
  limits: McpLimits;
  deadline: number;
  headers: Record<string, string>;
  nextId: number;
  sessionId: string | null;
  /** Whether a credential is sent (`Authorization: Bearer`). */
  hasSecret: boolean;
  /** Removes the secret from anything the server says that Tollgate keeps or shows. */
  scrub: (text: string) => string;
}

/** Server-given text fit for a message: control characters out, bounded, the secret removed. */
function shown(s: Session, text: string, max = 300): string {
  const plain = s.scrub(text).replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').replace(/\s{2,}/g, ' ').trim();
  return plain.length > max ? `${plain.slice(0, max)}…` : plain;
}

function malformed(s: Session, step: string, why: string): ConnectorError {
  return new ConnectorError(`Malformed answer from ${s.host} (${step}): ${why}.`);
}

/** The time left for one request: the per-request bound, or what remains of the whole discovery. */
function timeLeft(s: Session, step: string): number {
  const left = s.deadline - Date.now();
  if (left <= 0) throw new ConnectorError(`Discovery of ${s.host} took longer than ${s.limits.totalTimeoutMs / 1000} s in all (at ${step}); nothing was recorded.`);
  return Math.min(left, s.limits.requestTimeoutMs);
}

/** A transport failure in this adapter's words (the step named), the OutboundError as its cause. */
function transportFailure(s: Session, step: string, err: unknown): unknown {
  if (!(err instanceof OutboundError)) return err;
  const message =
    err.code === 'too_large'
      ? `The answer of ${s.host} (${step}) is larger than ${s.limits.maxAnswerBytes / (1024 * 1024)} MB, the limit for MCP answers; nothing was recorded.`
      : `${s.host} (${step}): ${err.message}`;
  const failure = new ConnectorError(message);
  failure.cause = err;
  return failure;
}

/**
 * Reads an event stream (WHATWG server-sent events) as it arrives and keeps the JSON-RPC response to
 * request `id`; `feed` is the transport's `onChunk` and answers true once that response is in. Only
 * complete events count (a line ends in CR, LF or CRLF, an empty line ends the event), events of a type
 * other than `message` and data that is not JSON are skipped, and so are the server's own requests (they
 * carry a `method`, and may reuse our id in their own id space).
 */
export function sseResponseReader(id: number): { feed(textSoFar: string): boolean; readonly response: unknown } {
  let offset = 0;
  let data: string[] = [];
  let event = '';
  let response: unknown;
  const dispatch = () => {
    if (data.length > 0 && (event === '' || event === 'message')) {
      try {
        const message: unknown = JSON.parse(data.join('\n'));
        if (isObject(message) && message.id === id && !('method' in message)) response = message;
      } catch {
        // Not JSON: not the response.
      }
    }
    data = [];
    event = '';
  };
  const line = (text: string) => {
    if (text === '') return dispatch();
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
  };
  const ends = /\r\n|\r|\n/g;
  return {
    feed(textSoFar: string): boolean {
      while (response === undefined) {
        ends.lastIndex = offset;
        const end = ends.exec(textSoFar);
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (!end || (end[0] === '\r' && end.index === textSoFar.length - 1)) break;
        line(textSoFar.slice(offset, end.index));
        offset = end.index + end[0].length;
      }
      return response !== undefined;
    },
    get response() {
      return response;
    },
  };
}

/** The body as JSON, or undefined when it is not JSON. */
function parsedOrUndefined(body: string): unknown {
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return undefined;
  }
}

/** The media type of an answer, lower case, without parameters. */
function mediaType(answer: OutboundResponse): string {
  return (answer.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
}

/** A JSON-RPC error (an error response, whatever its id, `null` included) as a ConnectorError, or undefined. */
function rpcError(s: Session, step: string, message: unknown, status?: number): ConnectorError | undefined {
  const candidate = isObject(message) && message.id === null ? { ...message, id: undefined } : message;
  const parsed = JSONRPCErrorResponseSchema.safeParse(candidate);
  if (!parsed.success) return undefined;
  const { code, message: text } = parsed.data.error;
  return new ConnectorError(`${s.host} (${step}) answered${status ? ` ${status} with` : ''} JSON-RPC error ${code}: ${shown(s, text) || '(no message)'}`);
}

/** Throws for an answer that is not a success: a redirect (never followed), a refusal, a failure. */
function expectSuccess(s: Session, step: string, answer: OutboundResponse): void {
  const { status } = answer;
  if (status >= 200 && status < 300) return;
  if (status >= 300 && status < 400) throw new ConnectorError(`${s.host} (${step}) answered with a redirect (${status}); redirects are not followed.`);
  if (status === 401 || status === 403) {
    throw new ConnectorError(
      s.hasSecret
        ? `${s.host} (${step}) refused the credential (${status}).`
        : `${s.host} (${step}) refused the request (${status}); the server may need a credential reference.`,
    );
  }
  const error = mediaType(answer) === 'application/json' ? rpcError(s, step, parsedOrUndefined(answer.body), status) : undefined;
  throw error ?? new ConnectorError(`${s.host} (${step}) answered ${status}.`);
}

/** The headers of every request: what the transport needs, the session's, the credential's. */
function requestHeaders(s: Session): Record<string, string> {
  return {
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    ...s.headers,
    ...(s.sessionId ? { 'mcp-session-id': s.sessionId } : {}),
  };
}

/**
 * One JSON-RPC request: the response's `result`, and the answer's headers. A JSON answer is one JSON-RPC
 * response to this request; an event stream is read until that response arrives.
 */
async function call(s: Session, method: string, params: Json | undefined): Promise<{ result: Json; headers: Record<string, string> }> {
  const id = s.nextId++;
  const reader = sseResponseReader(id);
  let answer: OutboundResponse;
  try {
    answer = await s.http.request(s.endpoint, {
      method: 'POST',
      headers: requestHeaders(s),
      body: JSON.stringify({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) }),
      maxBytes: s.limits.maxAnswerBytes,
      timeoutMs: timeLeft(s, method),
      onChunk: (text) => reader.feed(text),
    });
  } catch (err) {
    throw transportFailure(s, method, err);
  }
  expectSuccess(s, method, answer);
  return { result: resultOf(s, method, responseOf(s, method, answer, reader.response, id)), headers: answer.headers };
}

/** The JSON-RPC message that answers request `id`, from a JSON answer or an event stream. */
function responseOf(s: Session, step: string, answer: OutboundResponse, fromStream: unknown, id: number): unknown {
  const type = mediaType(answer);
  if (type === 'text/event-stream') {
    if (fromStream === undefined) throw malformed(s, step, `the event stream ended without the response to request ${id}`);
    return fromStream;
  }
  if (type !== 'application/json') {
    throw malformed(s, step, `${answer.status} with content type "${shown(s, type, 100) || 'none'}", neither application/json nor text/event-stream`);
  }
  let message: unknown;
  try {
    message = JSON.parse(answer.body);
  } catch {
    throw malformed(s, step, 'not JSON');
  }
  if (!isObject(message)) throw malformed(s, step, 'not a JSON-RPC response (a JSON object)');
  if (message.id !== undefined && message.id !== null && message.id !== id) {
    throw malformed(s, step, `the response is to request ${shown(s, JSON.stringify(message.id), 60)}, not ${id}`);
  }
  return message;
}

/** The `result` of a JSON-RPC response; a JSON-RPC error or anything else not a response throws. */
function resultOf(s: Session, step: string, message: unknown): Json {
  const error = rpcError(s, step, message);
  if (error) throw error;
  const parsed = JSONRPCResultResponseSchema.safeParse(message);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` (${issue.path.map(String).join('.')}: ${issue.message})` : '';
    throw malformed(s, step, `not a JSON-RPC 2.0 response${where}`);
  }
  return parsed.data.result;
}

/** The first problem zod found in a result, as `path: message`. */
function firstProblem(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  const issue = issues[0];
  if (!issue) return 'not in the expected format';
  return `${issue.path.map(String).join('.') || '(the result)'}: ${issue.message}`;
}

/** `initialize`: the negotiated version, the server's name; keeps the session and the version header. */
async function initialize(s: Session): Promise<{ protocolVersion: string; serverName: string }> {
  const step = 'initialize';
  const { result, headers } = await call(
    s,
    step,
    { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: MCP_CLIENT_NAME, version: CLIENT_VERSION } },
  );
  const sessionId = headers['mcp-session-id'];
  if (sessionId !== undefined) {
    if (!SESSION_ID.test(sessionId)) throw malformed(s, step, 'the Mcp-Session-Id header is not 1-1024 visible ASCII characters');
    s.sessionId = sessionId;
  }
  const parsed = InitializeResultSchema.safeParse(result);
  if (!parsed.success) throw malformed(s, step, `not an initialize result (${firstProblem(parsed.error.issues)})`);
  const version = parsed.data.protocolVersion;
  if (!ACCEPTED_VERSIONS.includes(version)) {
    throw new ConnectorError(
      `${s.host} speaks MCP ${shown(s, version, 40)}; discovery speaks ${ACCEPTED_VERSIONS.join(', ')} over streamable HTTP.`,
    );
  }
  s.headers['mcp-protocol-version'] = version;
  return { protocolVersion: version, serverName: shown(s, parsed.data.serverInfo.name, SERVER_NAME_MAX) };
}

/** `notifications/initialized`: a notification, answered 202 (any 2xx is taken; the body is not read). */
async function initialized(s: Session): Promise<void> {
  const step = 'notifications/initialized';
  let answer: OutboundResponse;
  try {
    answer = await s.http.request(s.endpoint, {
      method: 'POST',
      headers: requestHeaders(s),
      body: JSON.stringify({ jsonrpc: '2.0', method: step }),
      maxBytes: s.limits.maxAnswerBytes,
      timeoutMs: timeLeft(s, step),
      onChunk: () => true,
    });
  } catch (err) {
    throw transportFailure(s, step, err);
  }
  expectSuccess(s, step, answer);
}

/** Every page of `tools/list`, bounded in pages and tools; a repeated cursor is a list that never ends. */
async function listTools(s: Session): Promise<unknown[]> {
  const step = 'tools/list';
  const tools: unknown[] = [];
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let page = 1; ; page++) {
    if (page > s.limits.maxPages) {
      throw new ConnectorError(`${s.host} (${step}) lists more than ${s.limits.maxPages.toLocaleString('en-US')} pages of tools, the limit; nothing was recorded.`);
    }
    const { result } = await call(s, step, cursor === undefined ? undefined : { cursor });
    const parsed = PaginatedResultSchema.safeParse(result);
    if (!parsed.success) throw malformed(s, step, `not a tools/list result (${firstProblem(parsed.error.issues)})`);
    if (!Array.isArray(result.tools)) throw malformed(s, step, 'not a tools/list result (tools: expected an array)');
    tools.push(...(result.tools as unknown[]));
    if (tools.length > s.limits.maxTools) {
      throw new ConnectorError(`${s.host} (${step}) lists more than ${s.limits.maxTools.toLocaleString('en-US')} tools, the limit; nothing was recorded.`);
    }
    cursor = parsed.data.nextCursor;
    if (cursor === undefined) return tools;
    if (cursors.has(cursor)) throw new ConnectorError(`${s.host} (${step}) repeated a page cursor: its tool list never ends; nothing was recorded.`);
    cursors.add(cursor);
  }
}

/** `DELETE` the session (MCP spec: a client that no longer needs it SHOULD); failures do not matter. */
async function endSession(s: Session): Promise<void> {
  if (!s.sessionId) return;
  try {
    await s.http.request(s.endpoint, { method: 'DELETE', headers: requestHeaders(s), maxBytes: 64 * 1024, timeoutMs: Math.min(2_000, s.limits.requestTimeoutMs), onChunk: () => true });
  } catch {
    // Best effort: the server expires sessions on its own.
  }
}

// ---------------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------------

/** Warnings, listed up to a bound and counted beyond it. */
class Warnings {
  private readonly listed: string[] = [];
  private more = 0;
  constructor(private readonly max: number) {}
  add(text: string): void {
    if (this.listed.length < this.max) this.listed.push(text);
    else this.more++;
  }
  all(): string[] {
    return this.more > 0 ? [...this.listed, `… and ${this.more} more warnings like these.`] : [...this.listed];
  }
}

const bool = (value: unknown): boolean | null => (typeof value === 'boolean' ? value : null);
const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** Invisible and format characters (zero-width, bidi, tag characters) as `\uXXXX`, so a warning shows them. */
function visible(text: string): string {
  return text.replace(/[\p{C}\p{Z}]/gu, (c) => {
    if (c === ' ') return c;
    const hex = c.codePointAt(0)!.toString(16);
    return hex.length > 4 ? `\\u{${hex}}` : `\\u${hex.padStart(4, '0')}`;
  });
}

/** A tool's name for a warning: JSON-quoted, invisible characters spelled out, bounded. */
const quoted = (s: Session, name: unknown) => shown(s, visible(JSON.stringify(typeof name === 'string' ? name.slice(0, 80) : name) ?? String(name)), 120);

/**
 * One listed tool as a discovered tool, or null when it cannot become one (no usable name, a repeat). What
 * does not follow the MCP tool format is recorded as far as it can be read, with a warning.
 */
function discoveredTool(s: Session, raw: unknown, index: number, prefix: string, seen: Set<string>, warnings: Warnings): DiscoveredTool | null {
  if (!isObject(raw) || typeof raw.name !== 'string') {
    warnings.add(`Tool #${index + 1} of ${s.host} has no name; skipped.`);
    return null;
  }
  const name = raw.name;
  if (!TOOL_NAME.test(name)) {
    warnings.add(`Tool ${quoted(s, name)} of ${s.host} skipped: a tool name is 1-128 of A-Z a-z 0-9 _ . -`);
    return null;
  }
  if (seen.has(name)) {
    warnings.add(`Tool ${quoted(s, name)} of ${s.host} is listed more than once; the first is kept.`);
    return null;
  }
  seen.add(name);
  const format = ToolSchema.safeParse(raw);
  if (!format.success) warnings.add(`Tool ${quoted(s, name)} of ${s.host} does not follow the MCP tool format (${firstProblem(format.error.issues)}); recorded as far as it reads.`);
  const annotations = isObject(raw.annotations) ? raw.annotations : {};
  const inputSchema = ToolSchema.shape.inputSchema.safeParse(raw.inputSchema);
  if (!inputSchema.success) warnings.add(`Tool ${quoted(s, name)} of ${s.host} has no object input schema; recorded as {"type":"object"}.`);
  const title = text(raw.title) ?? text(annotations.title);
  return {
    tool_key: `${prefix}.${name}`,
    name,
    title: title === null ? null : shown(s, title, TITLE_MAX),
    description: description(s, name, raw.description, warnings),
    privilege_class: null,
    input_schema: inputSchema.success ? (inputSchema.data as Json) : { type: 'object' },
    read_only_hint: bool(annotations.readOnlyHint),
    operations: ['invoke'],
    resource: null,
    idempotent: bool(annotations.idempotentHint),
  };
}

/** The description as given (the poisoning detector reads it whole), cut past the bound with a warning. */
function description(s: Session, name: string, value: unknown, warnings: Warnings): string {
  const given = s.scrub(text(value) ?? '');
  if (given.length <= s.limits.maxDescriptionChars) return given;
  warnings.add(`The description of tool ${quoted(s, name)} of ${s.host} is ${given.length} characters; the first ${s.limits.maxDescriptionChars} are kept.`);
  return given.slice(0, s.limits.maxDescriptionChars);
}

// ---------------------------------------------------------------------------------------------------
// The adapter
// ---------------------------------------------------------------------------------------------------

/** Removes `secret` from server-given text (a server that echoes the bearer token must not get it stored). */
function scrubber(secret: string | null): (text: string) => string {
  if (!secret) return (t) => t;
  return (t) => t.split(secret).join('[redacted]');
}

function openSession(ctx: DiscoverContext, limits: McpLimits): Session {
  const endpoint = (ctx.config.endpoint as string).trim();
  const url = new URL(endpoint);
  if (ctx.secret && url.protocol !== 'https:') {
    throw new ConnectorError(`${url.host}: a credential is sent only over https; the endpoint is http.`);
  }
  return {
    http: ctx.http,
    endpoint,
    host: url.host,
    limits,
    deadline: Date.now() + limits.totalTimeoutMs,
    headers: ctx.secret ? { authorization: `Bearer ${ctx.secret}` } : {},
    nextId: 1,
    sessionId: null,
    hasSecret: Boolean(ctx.secret),
    scrub: scrubber(ctx.secret),
  };
}

async function discoverWith(ctx: DiscoverContext, limits: McpLimits) {
  const problems = validateConfig(ctx.config);
  if (problems.length > 0) throw new ConnectorError(`The configuration is not valid: ${problems.join('; ')}`);
  const name = (ctx.config.name as string).trim();
  const prefix = typeof ctx.config.tool_prefix === 'string' ? ctx.config.tool_prefix : defaultToolPrefix(name);
  const s = openSession(ctx, limits);
  try {
    const { protocolVersion, serverName } = await initialize(s);
    await initialized(s);
    const listed = await listTools(s);
    const warnings = new Warnings(limits.maxWarnings);
    const seen = new Set<string>();
    const tools = listed.map((raw, i) => discoveredTool(s, raw, i, prefix, seen, warnings)).filter((t): t is DiscoveredTool => t !== null);
    const server: DiscoveredMCPServer = {
      name,
      endpoint: s.endpoint,
      transport: 'streamable_http',
      auth_type: s.hasSecret ? 'api_key' : 'none',
      publisher: serverName || null,
      trust_state: 'unknown',
      protocol_version: protocolVersion,
      tools,
    };
    const result = emptyResult(KEY, 'live');
    result.mcp_servers.push(server);
    result.warnings.push(...warnings.all());
    return result;
  } finally {
    await endSession(s);
  }
}

/**
 * The `mcp` adapter with other bounds (tests: a short timeout, a low page limit); `mcpAdapter` uses
 * MCP_LIMITS.
 */
export function createMcpAdapter(limits: Partial<McpLimits> = {}): Adapter {
  const bounds: McpLimits = { ...MCP_LIMITS, ...limits };
  return {
    key: KEY,
    kind: 'mcp',
    mode: 'live',
    description:
      "One MCP server's identity and tool list, over the streamable HTTP transport (MCP 2025-06-18): " +
      'initialize, tools/list with every page; each tool becomes <tool_prefix>.<name>. ' +
      'endpoint (http or https; https when a credential is given) and name are required; tool_prefix defaults to the name in lower case.',
    configKeys: ['endpoint', 'name', 'tool_prefix'],
    status: 'Beta',
    needsSecret: false,
    validateConfig,
    discover: (ctx) => discoverWith(ctx, bounds),
  };
}

/** `mcp`, live: one MCP server over streamable HTTP; a credential, when given, is sent as `Authorization: Bearer`. */
export const mcpAdapter: Adapter = createMcpAdapter();
