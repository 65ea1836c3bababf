/** A small HTTP client over fetch with a cookie jar and the CSRF header, like a browser: for tests that drive a
 * `tollgate api` process (the in-process app has `Client` in harness.ts). */
export class HttpClient {
  /** The cookies kept so far, by name. */
  readonly jar = new Map<string, string>();
  constructor(private readonly base: string) {}

  async request(method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.jar.size > 0) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const csrf = this.jar.get('tollgate_csrf');
    if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
    const res = await fetch(`${this.base}${p}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      const name = pair!.slice(0, i).trim();
      const value = pair!.slice(i + 1).trim();
      if (value === '' || /max-age=0/i.test(c)) this.jar.delete(name);
      else this.jar.set(name, value);
    }
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : undefined };
  }
  get(p: string) {
    return this.request('GET', p);
  }
  post(p: string, body: unknown) {
    return this.request('POST', p, body);
  }
}
