import type { IncomingMessage, ServerResponse } from 'node:http';
import { startStandin, type Standin } from './standin.js';

/**
 * Stand-ins for the providers the live adapters read, each a real HTTPS server (the test CA of `testTls()`)
 * speaking that provider's wire format as its public documentation describes it: the OpenAI REST API
 * (assistants v2, models), an OpenAI-compatible models list, the Microsoft identity platform's token
 * endpoint and Microsoft Graph's service principals, the GitHub REST API (organisation repositories,
 * repository contents). Each checks the credential the way its provider does (and answers a refusal with
 * that provider's error body, which echoes part of what it was sent, as some providers' do), honours the
 * paging parameters, and records every request (`requests`) so tests can see where a secret went.
 *
 * `override` lets a test answer one request differently (a malformed body, a refusal): it gets the request
 * and answers `{status, body, headers}`, or undefined to let the stand-in answer.
 */

export interface Canned {
  status: number;
  body: string;
  headers?: Record<string, string>;
}
export type Override = (req: { method: string; path: string; url: URL }) => Canned | undefined;

function sendJson(res: ServerResponse, status: number, doc: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(doc));
}

function sendCanned(res: ServerResponse, c: Canned): void {
  res.writeHead(c.status, { 'content-type': 'application/json; charset=utf-8', ...c.headers }).end(c.body);
}

/** The request's URL (the stand-in's own origin is irrelevant: only path and query are read). */
const urlOf = (req: IncomingMessage) => new URL(req.url ?? '/', 'https://standin.invalid');

/** Starts an HTTPS stand-in whose handler sees the parsed URL and may be overridden per request. */
function start(override: Override | undefined, handle: (req: IncomingMessage, res: ServerResponse, url: URL, body: string) => void): Promise<Standin> {
  return startStandin({
    tls: true,
    handler: (req, res, body) => {
      const url = urlOf(req);
      const canned = override?.({ method: req.method ?? 'GET', path: url.pathname, url });
      if (canned) return sendCanned(res, canned);
      handle(req, res, url, body);
    },
  });
}

// ---------------------------------------------------------------------------------------------------
// model_vendor_a: the OpenAI REST API (assistants v2 and models)
// ---------------------------------------------------------------------------------------------------

/** An assistant as the Assistants API v2 returns it. */
export interface VendorAAssistant {
  id: string;
  name: string | null;
  description?: string | null;
  model: string;
  instructions?: string | null;
  tools?: ({ type: 'function'; function: { name: string; description?: string; parameters?: unknown } } | { type: 'code_interpreter' } | { type: 'file_search' })[];
  metadata?: Record<string, string>;
}

export interface VendorAOptions {
  /** The API key it accepts. */
  key: string;
  assistants: VendorAAssistant[];
  models: string[];
  /** At most this many assistants per page, whatever `limit` asks (to make the client page). */
  maxPageSize?: number;
  /** The key lacks the assistants scope: the list answers this (403, or 401 as restricted keys get). */
  assistantsRefused?: 401 | 403;
  override?: Override;
}

/** The OpenAI error body (its `message` quotes part of the key it was given, as the real one does). */
function openAiError(message: string, type: string, code: string | null) {
  return { error: { message, type, param: null, code } };
}

export function startVendorAStandin(o: VendorAOptions): Promise<Standin> {
  return start(o.override, (req, res, url) => {
    if (req.headers.authorization !== `Bearer ${o.key}`) {
      const sent = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      return sendJson(res, 401, openAiError(`Incorrect API key provided: ${sent}. You can find your API key in your account settings.`, 'invalid_request_error', 'invalid_api_key'));
    }
    if (req.method === 'GET' && url.pathname === '/v1/models') {
      return sendJson(res, 200, {
        object: 'list',
        data: o.models.map((id, i) => ({ id, object: 'model', created: 1_700_000_000 + i, owned_by: 'system' })),
      });
    }
    if (req.method === 'GET' && url.pathname === '/v1/assistants') {
      if (req.headers['openai-beta'] !== 'assistants=v2') {
        return sendJson(res, 400, openAiError("You must provide the 'OpenAI-Beta' header to access the Assistants API.", 'invalid_request_error', null));
      }
      if (o.assistantsRefused) {
        return sendJson(
          res,
          o.assistantsRefused,
          openAiError('You have insufficient permissions for this operation. Missing scopes: api.assistants.read.', 'invalid_request_error', null),
        );
      }
      const limit = Math.min(Number(url.searchParams.get('limit') ?? 20), 100, o.maxPageSize ?? 100);
      const ordered = url.searchParams.get('order') === 'asc' ? o.assistants : [...o.assistants].reverse();
      const after = url.searchParams.get('after');
      const start = after ? ordered.findIndex((a) => a.id === after) + 1 : 0;
      const page = ordered.slice(start, start + limit);
      return sendJson(res, 200, {
        object: 'list',
        data: page.map((a) => ({
          object: 'assistant',
          created_at: 1_700_000_000,
          description: null,
          instructions: null,
          tools: [],
          metadata: {},
          top_p: 1,
          temperature: 1,
          response_format: 'auto',
          ...a,
        })),
        first_id: page[0]?.id ?? null,
        last_id: page.at(-1)?.id ?? null,
        has_more: start + limit < ordered.length,
      });
    }
    sendJson(res, 404, openAiError(`Invalid URL (${req.method} ${url.pathname})`, 'invalid_request_error', null));
  });
}

// ---------------------------------------------------------------------------------------------------
// model_vendor_b: an OpenAI-compatible models list under a versioned root
// ---------------------------------------------------------------------------------------------------

export interface VendorBOptions {
  key: string;
  models: string[];
  /** The API's root path (`/v1`, `/openai/v1`). */
  root?: string;
  override?: Override;
}

export function startVendorBStandin(o: VendorBOptions): Promise<Standin> {
  const root = o.root ?? '/v1';
  return start(o.override, (req, res, url) => {
    if (req.headers.authorization !== `Bearer ${o.key}`) return sendJson(res, 401, { object: 'error', message: 'Unauthorized', type: 'invalid_request_error', code: '1000' });
    if (req.method === 'GET' && url.pathname === `${root}/models`) {
      return sendJson(res, 200, {
        object: 'list',
        data: o.models.map((id) => ({ id, object: 'model', created: 1_717_171_717, owned_by: 'lumen', capabilities: { completion_chat: true } })),
      });
    }
    sendJson(res, 404, { detail: 'Not Found' });
  });
}

// ---------------------------------------------------------------------------------------------------
// directory: Microsoft identity platform (token) and Microsoft Graph (service principals)
// ---------------------------------------------------------------------------------------------------

export interface LoginOptions {
  tenant: string;
  clientId: string;
  clientSecret: string;
  /** The token it issues. */
  accessToken: string;
  override?: Override;
}

/** The v2.0 token endpoint: client-credentials grant, form-encoded. */
export function startLoginStandin(o: LoginOptions): Promise<Standin> {
  return start(o.override, (req, res, url, body) => {
    if (req.method !== 'POST' || url.pathname !== `/${o.tenant}/oauth2/v2.0/token`) {
      return sendJson(res, 400, { error: 'invalid_request', error_description: `AADSTS90002: Tenant '${url.pathname.split('/')[1]}' not found.` });
    }
    const form = new URLSearchParams(body);
    if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded') || form.get('grant_type') !== 'client_credentials') {
      return sendJson(res, 400, { error: 'unsupported_grant_type', error_description: 'AADSTS70003: The app requested an unsupported grant type.' });
    }
    if (!/\/\.default$/.test(form.get('scope') ?? '')) {
      return sendJson(res, 400, { error: 'invalid_scope', error_description: 'AADSTS1002012: The provided value for scope is not valid.' });
    }
    if (form.get('client_id') !== o.clientId || form.get('client_secret') !== o.clientSecret) {
      return sendJson(res, 401, {
        error: 'invalid_client',
        error_description: `AADSTS7000215: Invalid client secret provided (${form.get('client_secret')}). Ensure the secret being sent is the client secret value.`,
        error_codes: [7000215],
      });
    }
    sendJson(res, 200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: o.accessToken });
  });
}

/** A service principal as Graph holds it (the stand-in answers the `$select`ed properties). */
export interface GraphPrincipal {
  id: string;
  appId: string;
  displayName: string;
  description?: string | null;
  tags: string[];
  notes?: string | null;
}

export interface GraphOptions {
  accessToken: string;
  principals: GraphPrincipal[];
  /** At most this many per page, whatever `$top` asks. */
  maxPageSize?: number;
  /** The origin its `@odata.nextLink`s name (default its own: a test sets another to see it not followed). */
  nextLinkOrigin?: () => string;
  override?: Override;
}

/** The tag of a `tags/any(t:t eq '<tag>')` filter, OData-unescaped; undefined when the filter is not that. */
function filteredTag(filter: string | null): string | undefined {
  const match = /^tags\/any\(t:t eq '((?:[^']|'')*)'\)$/.exec(filter ?? '');
  return match ? match[1]!.replace(/''/g, "'") : undefined;
}

export function startGraphStandin(o: GraphOptions): Promise<Standin> {
  let self = '';
  const standin = start(o.override, (req, res, url) => {
    if (req.headers.authorization !== `Bearer ${o.accessToken}`) {
      return sendJson(res, 401, { error: { code: 'InvalidAuthenticationToken', message: 'Access token validation failure. Invalid audience.' } });
    }
    if (req.method !== 'GET' || url.pathname !== '/v1.0/servicePrincipals') {
      return sendJson(res, 400, { error: { code: 'BadRequest', message: `Resource not found for the segment '${url.pathname}'.` } });
    }
    const tag = filteredTag(url.searchParams.get('$filter'));
    if (tag === undefined) return sendJson(res, 400, { error: { code: 'Request_UnsupportedQuery', message: 'Unsupported or invalid query filter clause.' } });
    const select = (url.searchParams.get('$select') ?? '').split(',').filter(Boolean);
    const top = Math.min(Number(url.searchParams.get('$top') ?? 100), 999, o.maxPageSize ?? 999);
    const skip = Number(url.searchParams.get('$skiptoken') ?? 0);
    const matching = o.principals.filter((p) => p.tags.includes(tag));
    const page = matching.slice(skip, skip + top).map((p) => Object.fromEntries(Object.entries(p).filter(([k]) => select.length === 0 || select.includes(k))));
    const doc: Record<string, unknown> = { '@odata.context': `${self}/v1.0/$metadata#servicePrincipals(${select.join(',')})`, value: page };
    if (skip + top < matching.length) {
      const next = new URL(`${o.nextLinkOrigin?.() ?? self}/v1.0/servicePrincipals`);
      for (const [k, v] of url.searchParams) if (k !== '$skiptoken') next.searchParams.set(k, v);
      next.searchParams.set('$skiptoken', String(skip + top));
      doc['@odata.nextLink'] = next.toString();
    }
    sendJson(res, 200, doc);
  });
  return standin.then((s) => {
    self = s.url;
    return s;
  });
}

// ---------------------------------------------------------------------------------------------------
// code_host: the GitHub REST API (organisation repositories, repository contents)
// ---------------------------------------------------------------------------------------------------

export interface CodeHostRepo {
  name: string;
  /** Files by path (`.tollgate/agent.json`): text, as committed. */
  files?: Record<string, string>;
}

export interface CodeHostOptions {
  token: string;
  org: string;
  repos: CodeHostRepo[];
  /** At most this many per page, whatever `per_page` asks (GitHub's own maximum is 100). */
  maxPerPage?: number;
  override?: Override;
}

const ORG_ID = 4242;

function githubError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, { message, documentation_url: 'https://docs.example.com/rest', status: String(status) });
}

/** Base64 the way the contents API sends it: wrapped at 60 characters with newlines. */
function wrappedBase64(text: string): string {
  return (Buffer.from(text, 'utf8').toString('base64').match(/.{1,60}/g) ?? []).join('\n') + '\n';
}

function repoDoc(base: string, org: string, name: string, i: number) {
  return {
    id: 100_000 + i,
    node_id: `R_kgDO${i}`,
    name,
    full_name: `${org}/${name}`,
    private: true,
    owner: { login: org, id: ORG_ID, type: 'Organization', url: `${base}/users/${org}` },
    html_url: `https://code.example.com/${org}/${name}`,
    description: null,
    fork: false,
    url: `${base}/repos/${org}/${name}`,
    archived: false,
    disabled: false,
    default_branch: 'main',
    visibility: 'private',
  };
}

export function startCodeHostStandin(o: CodeHostOptions): Promise<Standin> {
  let self = '';
  const standin = start(o.override, (req, res, url) => {
    if (req.headers.authorization !== `Bearer ${o.token}`) return githubError(res, 401, 'Bad credentials');
    if (req.method !== 'GET') return githubError(res, 404, 'Not Found');
    // GitHub's own next links name the organisation by id: /organizations/{id}/repos.
    const list = /^\/(?:orgs\/([^/]+)|organizations\/(\d+))\/repos$/.exec(url.pathname);
    if (list) {
      if ((list[1] && list[1].toLowerCase() !== o.org.toLowerCase()) || (list[2] && Number(list[2]) !== ORG_ID)) return githubError(res, 404, 'Not Found');
      const perPage = Math.min(Number(url.searchParams.get('per_page') ?? 30), 100, o.maxPerPage ?? 100);
      const page = Math.max(1, Number(url.searchParams.get('page') ?? 1));
      const slice = o.repos.slice((page - 1) * perPage, page * perPage);
      const last = Math.max(1, Math.ceil(o.repos.length / perPage));
      const link = (p: number) => `<${self}/organizations/${ORG_ID}/repos?per_page=${perPage}&page=${p}>`;
      const links = [page < last && `${link(page + 1)}; rel="next"`, page < last && `${link(last)}; rel="last"`, page > 1 && `${link(1)}; rel="first"`].filter(Boolean);
      return sendJson(
        res,
        200,
        slice.map((r) => repoDoc(self, o.org, r.name, o.repos.indexOf(r))),
        links.length > 0 ? { link: links.join(', ') } : {},
      );
    }
    const contents = /^\/repos\/([^/]+)\/([^/]+)\/contents\/(.+)$/.exec(url.pathname);
    if (contents) {
      const [, owner, name, path] = contents.map((part) => decodeURIComponent(part ?? ''));
      const repo = owner!.toLowerCase() === o.org.toLowerCase() ? o.repos.find((r) => r.name === name) : undefined;
      const text = repo?.files?.[path!];
      if (text === undefined) return githubError(res, 404, 'Not Found');
      return sendJson(res, 200, {
        type: 'file',
        encoding: 'base64',
        size: Buffer.byteLength(text),
        name: path!.split('/').at(-1),
        path,
        content: wrappedBase64(text),
        sha: '3d21ec53a331a6f037a91c368710b99387d012c1',
        url: `${self}${url.pathname}`,
      });
    }
    githubError(res, 404, 'Not Found');
  });
  return standin.then((s) => {
    self = s.url;
    return s;
  });
}
