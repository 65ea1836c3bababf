import type { z } from 'zod';
import type { OutboundRequest, OutboundResponse } from '../../../platform/outbound.js';
import { ConnectorError, type DiscoveredModel, type DiscoverContext, type Http } from './contract.js';

/**
 * What the live provider adapters (model vendors, directory, code host) share: one way to talk to a
 * provider's HTTP API (always HTTPS, through the guarded transport, answers checked against the provider's
 * format) and the checks of their configuration. Every message here is shown to people: it names the host,
 * the method and the path, and a status or the place in the answer that is wrong, never a secret, a query
 * string or an answer's body.
 */

/**
 * `value` with every occurrence of `secret` in its strings replaced: what a provider answers (names,
 * descriptions) is shown and stored, and a provider that echoes the credential must not get it kept.
 */
export function withoutSecret<T>(value: T, secret: string): T {
  const scrub = (v: unknown): unknown => {
    if (typeof v === 'string') return v.split(secret).join('[redacted]');
    if (Array.isArray(v)) return v.map(scrub);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, scrub(x)]));
    return v;
  };
  return scrub(value) as T;
}

/** The secret the run resolved; a live adapter without one fails before any request. */
export function requireSecret(ctx: DiscoverContext): string {
  if (!ctx.secret) throw new ConnectorError('This connector needs a credential reference.');
  return ctx.secret;
}

/** `host (GET /path)`: where an exchange went, for messages (the query is left out: it is the adapter's, not the person's). */
export function whereOf(url: string, method: string): string {
  const u = new URL(url);
  return `${u.host} (${method} ${u.pathname})`;
}

/** One request to a provider, over HTTPS only. Transport failures reject with the transport's OutboundError. */
export function send(http: Http, url: string, init: OutboundRequest = {}): Promise<OutboundResponse> {
  return http.request(url, { ...init, requireHttps: true });
}

/**
 * Throws the ConnectorError an unsuccessful answer means: 401 and 403 are the provider refusing the
 * credential (the body, which may echo what was sent, is not read), a 3xx is a redirect Tollgate does not
 * follow, anything else not 2xx is the provider failing.
 */
export function expectSuccess(answer: OutboundResponse, url: string, method = 'GET', refusedHint = ''): void {
  if (answer.status >= 200 && answer.status < 300) return;
  const where = whereOf(url, method);
  if (answer.status === 401 || answer.status === 403) {
    throw new ConnectorError(`The provider refused the credential (${answer.status}) at ${where}.${refusedHint ? ` ${refusedHint}` : ''}`);
  }
  if (answer.status >= 300 && answer.status < 400) throw new ConnectorError(`${where} answered with a redirect (${answer.status}); redirects are not followed.`);
  throw new ConnectorError(`${where} answered ${answer.status}.`);
}

/** The first problem zod found, as `path: message` (zod's messages name types and options, never the value). */
function firstIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'not in the expected format';
  const path = issue.path.map(String).join('.');
  return `${path || '(the whole answer)'}: ${issue.message}`;
}

/**
 * The body parsed as JSON and checked against the provider's format; anything else is a
 * "malformed answer" ConnectorError naming the exchange and the first problem.
 */
export function parseAnswer<S extends z.ZodType>(schema: S, body: string, url: string, method = 'GET'): z.output<S> {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch {
    throw new ConnectorError(`Malformed answer from ${whereOf(url, method)}: not JSON.`);
  }
  const parsed = schema.safeParse(doc);
  if (!parsed.success) throw new ConnectorError(`Malformed answer from ${whereOf(url, method)}: ${firstIssue(parsed.error)}.`);
  return parsed.data;
}

/** GET a JSON document: success expected, format checked. */
export async function getJson<S extends z.ZodType>(http: Http, url: string, headers: Record<string, string>, schema: S, refusedHint = ''): Promise<{ data: z.output<S>; headers: Record<string, string> }> {
  const answer = await send(http, url, { headers: { accept: 'application/json', ...headers } });
  expectSuccess(answer, url, 'GET', refusedHint);
  return { data: parseAnswer(schema, answer.body, url), headers: answer.headers };
}

/** The zod problem of a value as a person reads it (for manifests and other documents inside an answer). */
export function problemOf(error: z.ZodError): string {
  return firstIssue(error);
}

/** `base` with `path` appended to its path (a base may carry a prefix such as `/api/v3`); no trailing slashes doubled. */
export function joinUrl(base: string, path: string): string {
  const u = new URL(base);
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
  return u.toString();
}

/**
 * The root of an OpenAI-style API under `base`: the base itself when its path already ends in a version
 * segment (`https://api.example.com/v1`, `…/openai/v1`, the convention of OpenAI-compatible `base_url`s),
 * otherwise `{base}/v1`.
 */
export function versionedRoot(base: string): string {
  const path = new URL(base).pathname.replace(/\/+$/, '');
  return /\/v\d+$/.test(path) ? base.replace(/\/+$/, '') : joinUrl(base, 'v1');
}

/** Whether `next` may be followed from `base`: the same origin, so the credential never goes to another host. */
export function sameOrigin(next: string, base: string): boolean {
  try {
    return new URL(next).origin === new URL(base).origin;
  } catch {
    return false;
  }
}

/** Runs `fn` over `items` with at most `limit` in flight, keeping the order of `items` in the results. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

// ---------------------------------------------------------------------------------------------------
// Configuration checks: each answers the problems of one key, in words for the person configuring it.
// Configurations may carry other (non-secret) keys; only the adapter's own are checked.
// ---------------------------------------------------------------------------------------------------

const URL_MAX = 2048;

/** A base URL: optional; when given, an absolute HTTPS URL without credentials, query or fragment. */
export function httpsUrlProblems(config: Record<string, unknown>, key: string): string[] {
  const value = config[key];
  if (value === undefined || value === null) return [];
  if (typeof value !== 'string' || value.trim() === '') return [`${key} must be an HTTPS URL`];
  if (value.length > URL_MAX) return [`${key} is longer than ${URL_MAX} characters`];
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return [`${key} is not a URL`];
  }
  if (url.protocol !== 'https:') return [`${key} must use https (got ${url.protocol.replace(/:$/, '')})`];
  if (url.username || url.password) return [`${key} must not carry credentials; use a credential reference`];
  if (url.search || url.hash) return [`${key} must not carry a query or fragment`];
  return [];
}

/** A text setting: required or optional, bounded, matching `pattern` (described by `shape` in the message). */
export function textProblems(
  config: Record<string, unknown>,
  key: string,
  rule: { required: boolean; max: number; pattern?: RegExp; shape?: string },
): string[] {
  const value = config[key];
  if (value === undefined || value === null) return rule.required ? [`${key} is required`] : [];
  if (typeof value !== 'string' || value.trim() === '') return [`${key} must be a non-empty string`];
  if (value.length > rule.max) return [`${key} is longer than ${rule.max} characters`];
  if (rule.pattern && !rule.pattern.test(value)) return [`${key} must be ${rule.shape ?? `of the form ${rule.pattern.source}`}`];
  return [];
}

/** An optional setting that must be one of `values`. */
export function oneOfProblems(config: Record<string, unknown>, key: string, values: readonly string[]): string[] {
  const value = config[key];
  if (value === undefined || value === null) return [];
  return typeof value === 'string' && values.includes(value) ? [] : [`${key} must be one of ${values.join(', ')}`];
}

/** A string setting's value, or the default when it is absent (call after validation). */
export function setting(config: Record<string, unknown>, key: string, fallback: string): string {
  const value = config[key];
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : fallback;
}

/** A model id of an OpenAI-style models list as a discovered model (the vendor's SaaS, data policy unknown): a dated snapshot (`…-2024-08-06`) gives its version. */
export function vendorModel(provider: string, id: string): DiscoveredModel {
  const snapshot = /-(\d{4}-\d{2}-\d{2})$/.exec(id);
  return { provider, model_name: id, model_version: snapshot ? snapshot[1]! : null, hosting: 'saas', data_policy: 'unknown' };
}

/** A plausible e-mail address (sources state owners loosely; an implausible one is dropped, not guessed at). */
export function plausibleEmail(value: unknown): string | null {
  return typeof value === 'string' && value.length <= 320 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value.trim()) ? value.trim() : null;
}
