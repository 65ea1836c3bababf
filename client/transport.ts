import { performance } from 'node:perf_hooks';
import { Agent } from '../lib/undici-dispatchers.js';
import { GatewayApiError } from './errors.js';

export interface HttpAnswer {
  status: number;
  body: unknown;
  /** The correlation ID the API echoed (else the one sent). */
  correlationId: string;
}

export interface SendOptions {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Under the API prefix, e.g. `/actions`. */
  path: string;
  correlationId: string;
  /** Already serialised: the bytes sent are exactly these. */
  body?: string;
  headers?: Record<string, string>;
  /**
   * A caller's overall deadline (`performance.now()` milliseconds): the request is aborted then, if its own
   * timeout has not ended it first; one already past is not sent.
   */
  deadline?: number;
}

const USER_AGENT = 'tollgate-client/0.1';

/**
 * HTTP to the central API over one keep-alive undici Agent, with the spec's timeouts (rule 7): the
 * connection must be made within `connectTimeoutMs`, and the whole request (headers and body) must
 * finish within `timeoutMs`. Errors of the network and of these timeouts are thrown as undici and Node
 * raise them, never wrapped; the caller can retry with the same idempotency key.
 */
export class Transport {
  readonly #agent: Agent;
  readonly #origin: string;
  readonly #prefix: string;
  readonly #timeoutMs: number;

  constructor(baseUrl: string, timeouts: { timeoutMs: number; connectTimeoutMs: number }) {
    const url = new URL(baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl must be an http or https URL');
    this.#origin = url.origin;
    // Operations live under /api/v1; the URL may name the origin or the prefix itself.
    const base = url.pathname.replace(/\/+$/, '');
    this.#prefix = base.endsWith('/api/v1') ? base : `${base}/api/v1`;
    this.#timeoutMs = timeouts.timeoutMs;
    this.#agent = new Agent({
      connect: { timeout: timeouts.connectTimeoutMs },
      // Warm connections between calls at low load too (undici's default keeps an idle one 4 s, unless the
      // server's keep-alive hint says otherwise; the API keeps them 72 s).
      keepAliveTimeout: 30_000,
      headersTimeout: timeouts.timeoutMs,
      bodyTimeout: timeouts.timeoutMs,
    });
  }

  /** The base URL operations are sent to (origin and prefix), for settings and documentation. */
  get baseUrl(): string {
    return this.#origin + this.#prefix;
  }

  async send(opts: SendOptions): Promise<HttpAnswer> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': USER_AGENT,
      'x-correlation-id': opts.correlationId,
      ...opts.headers,
    };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    // One timer for the request's own timeout and the caller's deadline, whichever comes first, cleared as soon
    // as the answer is read: not AbortSignal.timeout (and AbortSignal.any), which stays armed for the whole
    // timeout after every request, waking the process to build a TimeoutError nobody reads (4-8% of a
    // sidecar's busy time paced at 500 requests/s, docs/sidecar.md, Cost), nor a signal of the caller's
    // chained to this one (two more listeners a request, bench/sidecar.ts's profile).
    const ms = opts.deadline === undefined ? this.#timeoutMs : Math.min(this.#timeoutMs, opts.deadline - performance.now());
    if (ms <= 0) throw timeoutError();
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(timeoutError()), ms);
    let res;
    let text: string;
    try {
      res = await this.#agent.request({ origin: this.#origin, path: this.#prefix + opts.path, method: opts.method, headers, body: opts.body, signal: ctl.signal });
      text = await res.body.text();
    } finally {
      clearTimeout(timer);
    }
    const echoed = res.headers['x-correlation-id'];
    const correlationId = typeof echoed === 'string' ? echoed : opts.correlationId;
    let body: unknown = undefined;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        // A proxy's HTML page or similar: an error answer without the envelope, or a protocol error.
        if (res.statusCode < 400) {
          throw new GatewayApiError({ status: res.statusCode, code: 'invalid_response', message: 'The answer is not JSON.', correlationId });
        }
      }
    }
    return { status: res.statusCode, body, correlationId };
  }

  /**
   * `GET <path>` beside the API prefix (`/readyz` of `http://api/api/v1` is `http://api/readyz`), within
   * `timeoutMs`: true when it answers 2xx. Never throws: a refused connection or a timeout is false.
   */
  async probe(path: string, timeoutMs: number): Promise<boolean> {
    const root = this.#prefix.slice(0, -'/api/v1'.length);
    try {
      const res = await this.#agent.request({
        origin: this.#origin,
        path: root + path,
        method: 'GET',
        headers: { accept: 'application/json', 'user-agent': USER_AGENT },
        signal: AbortSignal.timeout(Math.min(timeoutMs, this.#timeoutMs)),
      });
      await res.body.dump();
      return res.statusCode >= 200 && res.statusCode < 300;
    } catch {
      return false;
    }
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** What a request that ran out of time, or a call past its deadline, is aborted with (as AbortSignal.timeout's). */
export function timeoutError(): DOMException {
  return new DOMException('The operation was aborted due to timeout', 'TimeoutError');
}

/** The error of an answer in the spec's envelope, or a generic one when the answer has none. */
export function apiErrorOf<E extends GatewayApiError>(
  answer: HttpAnswer,
  Kind: new (init: ConstructorParameters<typeof GatewayApiError>[0], options?: ErrorOptions) => E,
  options?: ErrorOptions,
): E {
  const e = (answer.body as { error?: { code?: unknown; message?: unknown; correlation_id?: unknown; details?: unknown } } | undefined)?.error;
  return new Kind(
    {
      status: answer.status,
      code: typeof e?.code === 'string' ? e.code : `http_${answer.status}`,
      message: typeof e?.message === 'string' ? e.message : `HTTP ${answer.status}`,
      correlationId: typeof e?.correlation_id === 'string' ? e.correlation_id : answer.correlationId,
      details: e?.details ?? null,
    },
    options,
  );
}

/** The error code of an answer's envelope, if any. */
export function errorCode(answer: HttpAnswer): string | undefined {
  const code = (answer.body as { error?: { code?: unknown } } | undefined)?.error?.code;
  return typeof code === 'string' ? code : undefined;
}
