import { randomUUID } from 'node:crypto';
import { GatewayApiError } from '../client/errors.js';
import { TokenCache, type CredentialsSource } from '../client/tokens.js';
import { apiErrorOf, Transport, type SendOptions } from '../client/transport.js';
import { systemClock } from '../lib/clock.js';

/** An error answer of the Tollgate API, in the spec's envelope (`status`, `code`, `message`, `details`). */
export { GatewayApiError as TollgateApiError };

export interface TollgateApiOptions {
  /** The central API, e.g. http://tollgate-api.tollgate.svc:8080 (the operations' /api/v1 is added). */
  baseUrl: string;
  /** The service account's credential, or a function reading it at each exchange (a mounted Secret updated on rotation). */
  credentials: CredentialsSource;
  /** Per request. Default 15 s. */
  timeoutMs?: number;
}

/** Exchange the credential again this long before the 900-second token expires. */
const REFRESH_BEFORE_MS = 120_000;

/**
 * The controller's HTTP client of the Tollgate API (the central service), on the gateway client's transport (keep-alive undici,
 * timeouts) and token cache: the service account's token, exchanged at POST /service-accounts/token,
 * refreshed before it expires and once more when the API answers 401 (a revoked session, an API
 * restarted with a new key). Every error answer is thrown as a GatewayApiError carrying the spec's
 * code; the client secret is never logged or thrown.
 */
export class TollgateApi {
  private readonly transport: Transport;
  private readonly tokens: TokenCache;

  constructor(opts: TollgateApiOptions) {
    const timeoutMs = opts.timeoutMs ?? 15_000;
    this.transport = new Transport(opts.baseUrl, { timeoutMs, connectTimeoutMs: 5_000 });
    this.tokens = new TokenCache(opts.credentials, this.transport, systemClock, REFRESH_BEFORE_MS, '/service-accounts/token');
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  get<T>(path: string): Promise<T> {
    return this.call<T>('GET', path);
  }
  post<T>(path: string, body: unknown, headers?: Record<string, string>): Promise<T> {
    return this.call<T>('POST', path, body, headers);
  }
  patch<T>(path: string, body: unknown): Promise<T> {
    return this.call<T>('PATCH', path, body);
  }
  delete(path: string): Promise<void> {
    return this.call<void>('DELETE', path);
  }

  /** Every item of a paged list (`items`, `next_cursor`) or an unpaged one (`items`). */
  async list<T>(path: string): Promise<T[]> {
    const out: T[] = [];
    let cursor: string | null = null;
    do {
      const sep = path.includes('?') ? '&' : '?';
      const page: { items: T[]; next_cursor?: string | null } = await this.get(
        cursor ? `${path}${sep}limit=200&cursor=${encodeURIComponent(cursor)}` : `${path}${sep}limit=200`,
      );
      out.push(...page.items);
      cursor = page.next_cursor ?? null;
    } while (cursor);
    return out;
  }

  /** One request with the service token; a 401 exchanges the credentials again and retries once. */
  async call<T>(method: SendOptions['method'], path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    const correlationId = `ctl-${randomUUID()}`;
    const send = (token: string) =>
      this.transport.send({
        method,
        path,
        correlationId,
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: { ...headers, authorization: `Bearer ${token}` },
      });
    let token = await this.tokens.get(correlationId);
    let answer = await send(token);
    if (answer.status === 401) {
      this.tokens.discard(token);
      token = await this.tokens.get(correlationId);
      answer = await send(token);
    }
    if (answer.status >= 400) throw apiErrorOf(answer, GatewayApiError);
    return answer.body as T;
  }
}
