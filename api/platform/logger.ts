import { pino, type LoggerOptions } from 'pino';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';

const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;
const scrub = (s: unknown) => (typeof s === 'string' ? s.replace(EMAIL, '[email]') : s);

/** A request path as logged: percent-decoded, then email addresses masked (ids in paths may be emails). */
function scrubPath(path: string): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // a malformed escape: mask what is there
  }
  return decoded.replace(EMAIL, '[email]');
}

/**
 * pino JSON logs with secrets and personal data redacted. Request logs carry the path without its
 * query string (queries may hold emails or names); errors lose driver details that can echo values.
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'req.headers["x-csrf-token"]',
        'res.headers["set-cookie"]',
        '*.password',
        '*.client_secret',
        '*.secret',
        '*.token',
        'vault.token', // the Vault settings (VAULT_TOKEN), wherever a config is logged
        '*.vault.token',
        '*.access_token',
        '*.approval_token',
        '*.email',
        '*.authorization',
        '*.cookie',
      ],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: FastifyRequest) => ({
        method: req.method,
        path: scrubPath(req.url.split('?')[0] ?? ''),
        route: req.routeOptions?.url,
      }),
      res: (res: { statusCode: number }) => ({ statusCode: res.statusCode }),
      err: (err: Error & { code?: string }) => ({
        type: err.name,
        code: err.code,
        message: scrub(err.message),
        stack: scrub(err.stack),
      }),
    },
  };
}

export function createLogger(level: string, stream?: NodeJS.WritableStream): FastifyBaseLogger {
  return stream ? pino(loggerOptions(level), stream as pino.DestinationStream) : pino(loggerOptions(level));
}
