import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import {
  ApiError,
  ERROR_STATUS,
  defaultMessage,
  isDatabaseUnavailable,
  UNAVAILABLE_RETRY_AFTER_SECONDS,
  type ErrorCode,
  type ValidationDetail,
} from './errors.js';

/** The response header (and request header, when the caller names one) that carries the correlation ID. */
export const CORRELATION_HEADER = 'x-correlation-id';

interface FastifyValidationIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
}

function fieldName(context: string | undefined, instancePath: string | undefined): string {
  const path = (instancePath ?? '').replace(/^\//, '').split('/').filter(Boolean).join('.');
  const where = context === 'querystring' ? 'query' : context === 'params' ? 'path' : context === 'headers' ? 'header' : 'body';
  return path ? (where === 'body' ? path : `${where}.${path}`) : where;
}

interface Classified {
  code: ErrorCode;
  message?: string;
  details?: unknown;
  headers?: Record<string, string>;
}

/** Maps what fastify, its plugins and the database driver throw to a code of the registry. */
function classify(err: FastifyError): Classified {
  if (hasZodFastifySchemaValidationErrors(err) || err.validation) {
    const issues = (err.validation ?? []) as FastifyValidationIssue[];
    const details: ValidationDetail[] = issues.map((i) => ({
      field: fieldName(err.validationContext, i.instancePath),
      message: i.message ?? 'invalid value',
      ...(i.keyword ? { code: i.keyword } : {}),
    }));
    return { code: 'validation_failed', details };
  }
  if (isDatabaseUnavailable(err)) {
    return { code: 'service_unavailable', headers: { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS) } };
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'payload_too_large', message: 'The request body is larger than this service accepts.' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
    case 'FST_ERR_CTP_EMPTY_TYPE':
      return { code: 'unsupported_media_type' };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { code: 'bad_request', message: 'The body is not valid JSON.' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'bad_request', message: 'The body is not as long as Content-Length says.' };
    case 'FST_ERR_BAD_URL':
      // Not the URL itself: echoing what the caller sent would put it into logs and pages unescaped.
      return { code: 'bad_request', message: 'The URL is not valid: a path segment is not correctly percent-encoded UTF-8.' };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { code: 'uri_too_long' };
  }
  if (err instanceof SyntaxError || err.statusCode === 400) {
    return { code: 'bad_request', message: 'The request could not be read.' };
  }
  const byStatus: Partial<Record<number, ErrorCode>> = {
    405: 'method_not_allowed',
    408: 'request_timeout',
    413: 'payload_too_large',
    414: 'uri_too_long',
    415: 'unsupported_media_type',
    431: 'header_too_large',
    503: 'service_unavailable',
  };
  return { code: (err.statusCode && byStatus[err.statusCode]) || 'internal_error' };
}

/** The spec's envelope. */
function envelope(code: ErrorCode, message: string, correlationId: string, details: unknown) {
  return { error: { code, message, correlation_id: correlationId, details } };
}

/**
 * Answers any error with the envelope {error: {code, message, correlation_id, details}}. A 500 says
 * internal_error and nothing more; the cause goes to the log with the correlation ID.
 */
function answer(err: Error, req: FastifyRequest, reply: FastifyReply) {
  let c: Classified;
  if (err instanceof ApiError) c = { code: err.code, message: err.message, details: err.details, headers: err.headers };
  else c = classify(err as FastifyError);
  let details = c.details ?? null;
  if (c.code === 'validation_failed' && !Array.isArray(details)) details = [];
  for (const [k, v] of Object.entries(c.headers ?? {})) reply.header(k, v);
  const status = ERROR_STATUS[c.code];
  if (status >= 500) req.log.error({ err }, 'request failed');
  else if (err instanceof ApiError) req.log.info({ code: c.code }, 'request refused');
  // Fastify's own code rather than its message, which can echo the URL or the body the caller sent.
  else req.log.info({ code: c.code, reason: (err as FastifyError).code }, 'request refused');
  return reply
    .status(status)
    .type('application/json; charset=utf-8')
    .send(envelope(c.code, c.message ?? defaultMessage(c.code), req.id, details));
}

/**
 * For fastify's `frameworkErrors` option: what the router refuses before a route is found (a path
 * parameter over `maxParamLength`, a path that is not percent-encoded UTF-8). No hook has run, so the
 * correlation ID header is set here.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  reply.headers(req.server.securityHeaders);
  reply.header(CORRELATION_HEADER, req.id);
  void answer(err, req, reply);
}

/**
 * For fastify's `clientErrorHandler` option: what Node's HTTP parser refuses before there is a request
 * (headers too large, a request line that is not HTTP, a request that did not arrive in time). There is no
 * request to read a correlation ID from, so a new one is made, logged and returned in the header and body.
 */
export function clientErrorHandler(this: FastifyInstance, err: Error & { code?: string }, socket: Duplex): void {
  // A reset connection has nobody left to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'header_too_large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'bad_request';
  const status = ERROR_STATUS[code];
  const id = randomUUID();
  const message = code === 'bad_request' ? 'The request is not valid HTTP.' : defaultMessage(code);
  const body = JSON.stringify(envelope(code, message, id, null));
  this.log.info({ correlation_id: id, code, reason: err.code }, 'request refused before it could be read');
  if (socket.writable) {
    const security = Object.entries(this.securityHeaders ?? {})
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\n` +
        security +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `${CORRELATION_HEADER}: ${id}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/**
 * The methods each known path takes, from the routes as they are added, so that a known path called with
 * another method answers 405 with Allow rather than 404. Route patterns become expressions: a `:param`
 * is one path segment; routes of every path (`*`, as CORS preflight registers) name no path.
 */
class RouteMethods {
  private readonly routes: Array<{ pattern: RegExp; methods: Set<string> }> = [];

  add(url: string, methods: string[]): void {
    if (url === '*' || url === '/*') return;
    const source = url
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const pattern = new RegExp(`^${source}$`);
    const known = this.routes.find((r) => r.pattern.source === pattern.source);
    const upper = methods.map((m) => m.toUpperCase());
    if (known) upper.forEach((m) => known.methods.add(m));
    else this.routes.push({ pattern, methods: new Set(upper) });
  }

  /** The methods a path takes, sorted; none for an unknown path. */
  allowed(path: string): string[] {
    const methods = new Set<string>();
    for (const r of this.routes) if (r.pattern.test(path)) r.methods.forEach((m) => methods.add(m));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  }
}

/** The one handler that writes the error envelope, for errors, unknown routes and unknown methods. */
export function registerErrorHandler(app: FastifyInstance): void {
  const routes = new RouteMethods();
  app.addHook('onRoute', (route) => {
    routes.add(route.url, Array.isArray(route.method) ? route.method : [route.method]);
  });

  app.setErrorHandler(answer);

  app.setNotFoundHandler((req, reply) => {
    const allowed = routes.allowed(req.url.split('?')[0]!);
    // A route of this method that found nothing (a missing static asset) is a 404, not a 405.
    if (allowed.length > 0 && !allowed.includes(req.method)) {
      reply.header('allow', allowed.join(', '));
      const message = `${req.method} is not an operation of this path; it takes ${allowed.join(', ')}.`;
      return answer(new ApiError('method_not_allowed', message), req, reply);
    }
    return answer(new ApiError('not_found', 'No such operation.'), req, reply);
  });
}
