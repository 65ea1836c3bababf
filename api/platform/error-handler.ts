import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { ApiError, ERROR_STATUS, defaultMessage, type ErrorCode, type ValidationDetail } from './errors.js';

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

/** Maps what fastify and its plugins throw to a code of the registry. */
function classify(err: FastifyError): { code: ErrorCode; message?: string; details?: unknown } {
  if (hasZodFastifySchemaValidationErrors(err) || err.validation) {
    const issues = (err.validation ?? []) as FastifyValidationIssue[];
    const details: ValidationDetail[] = issues.map((i) => ({
      field: fieldName(err.validationContext, i.instancePath),
      message: i.message ?? 'invalid value',
      ...(i.keyword ? { code: i.keyword } : {}),
    }));
    return { code: 'validation_failed', details };
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { code: 'payload_too_large', message: 'The request body is larger than this service accepts.' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'bad_request', message: 'Send the body as application/json.' };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'bad_request', message: 'The body is not valid JSON.' };
  }
  if (err instanceof SyntaxError || err.statusCode === 400) {
    return { code: 'bad_request', message: 'The request could not be read.' };
  }
  if (err.statusCode === 413) return { code: 'payload_too_large' };
  if (err.statusCode === 415) return { code: 'bad_request', message: 'Send the body as application/json.' };
  return { code: 'internal_error' };
}

/**
 * The one handler that writes the error envelope {error: {code, message, correlation_id, details}}.
 * A 500 says internal_error and nothing more; the cause goes to the log with the correlation ID.
 */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    let code: ErrorCode;
    let message: string;
    let details: unknown = null;
    if (err instanceof ApiError) {
      code = err.code;
      message = err.message;
      details = err.details;
      for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
    } else {
      const c = classify(err);
      code = c.code;
      message = c.message ?? defaultMessage(code);
      details = c.details ?? null;
    }
    if (code === 'validation_failed' && !Array.isArray(details)) details = [];
    const status = ERROR_STATUS[code];
    if (status >= 500) req.log.error({ err }, 'request failed');
    else if (err instanceof ApiError) req.log.info({ code }, 'request refused');
    else req.log.info({ code, err }, 'request refused');
    return reply
      .status(status)
      .type('application/json; charset=utf-8')
      .send({ error: { code, message, correlation_id: req.id, details } });
  });

  app.setNotFoundHandler((req, reply) =>
    reply.status(404).send({
      error: { code: 'not_found', message: 'No such operation.', correlation_id: req.id, details: null },
    }),
  );
}
