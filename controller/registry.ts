import { Pool } from 'undici';

/** An error answer of the central API, in the spec's envelope (`error.code`, `error.message`). */
export class RegistryError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

export interface Credentials {
  clientId: string;
  clientSecret: string;
}

export interface RegistryClientOptions {
  /** The central API, e.g. http://tollgate-api.tollgate.svc:8080 (the operations' /api/v1 is added). */
  baseUrl: string;
  /** The credential, or a function reading it at each exchange (a mounted Secret updated on rotation). */
  credentials: Credentials | (() => Credentials);
  /** Requests in flight at once (the connection pool's size). Default 16. */
  connections?: number;
  /** Per request. Default 15 s. */
  timeoutMs?: number;
  now?: () => number;
}

interface Token {
  value: string;
  /** Refresh after this instant (ms): 80% of the lifetime. */
  refreshAt: number;
}

/**
 * The controller's client of the central API: a keep-alive connection pool (undici) and the service
 * account's token, exchanged at POST /service-accounts/token, refreshed before it expires and once more
 * when the API answers 401 (revoked sessions, a restarted API with a new key). Every error answer
 * becomes a RegistryError carrying the spec's code; the client secret is never logged or thrown.
 */
export class RegistryClient {
  private readonly pool: Pool;
  private readonly origin: string;
  private readonly prefix: string;
  private token?: Token;
  private exchanging?: Promise<Token>;
  private readonly now: () => number;

  constructor(private readonly opts: RegistryClientOptions) {
    const url = new URL(opts.baseUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('the API URL must be http or https');
    this.origin = url.origin;
    // The API's operations are under /api/v1; the URL may name the origin or the prefix itself.
    const base = url.pathname.replace(/\/$/, '');
    this.prefix = base.endsWith('/api/v1') ? base : `${base}/api/v1`;
    this.pool = new Pool(this.origin, { connections: opts.connections ?? 16, pipelining: 1 });
    this.now = opts.now ?? Date.now;
  }

  async close(): Promise<void> {
    await this.pool.close();
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
  async call<T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
    let token = await this.currentToken();
    for (let attempt = 0; ; attempt++) {
      const res = await this.send(method, path, body, { ...headers, authorization: `Bearer ${token.value}` });
      if (res.status === 401 && attempt === 0) {
        if (this.token === token) this.token = undefined;
        token = await this.currentToken();
        continue;
      }
      if (res.status >= 400) throw errorOf(res.status, res.body);
      return res.body as T;
    }
  }

  /** The current token, exchanging the credentials when there is none or it is due for refresh. */
  private async currentToken(): Promise<Token> {
    if (this.token && this.now() < this.token.refreshAt) return this.token;
    this.exchanging ??= this.exchange().finally(() => (this.exchanging = undefined));
    this.token = await this.exchanging;
    return this.token;
  }

  private async exchange(): Promise<Token> {
    const c = this.opts.credentials;
    const { clientId, clientSecret } = typeof c === 'function' ? c() : c;
    const res = await this.send('POST', '/service-accounts/token', {
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: clientSecret,
    });
    if (res.status !== 200) throw errorOf(res.status, res.body);
    const { access_token, expires_in } = res.body as { access_token: string; expires_in: number };
    return { value: access_token, refreshAt: this.now() + expires_in * 800 };
  }

  private async send(
    method: string,
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: unknown }> {
    const res = await this.pool.request({
      method: method as 'GET',
      path: this.prefix + path,
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      headersTimeout: this.opts.timeoutMs ?? 15_000,
      bodyTimeout: this.opts.timeoutMs ?? 15_000,
    });
    const text = await res.body.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: res.statusCode, body: parsed };
  }
}

function errorOf(status: number, body: unknown): RegistryError {
  const e = (body as { error?: { code?: string; message?: string; details?: unknown } } | undefined)?.error;
  return new RegistryError(status, e?.code ?? 'http_error', e?.message ?? `HTTP ${status}`, e?.details);
}
