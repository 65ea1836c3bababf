import helmet from '@fastify/helmet';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * The Content-Security-Policy of every answer. The API answers JSON, which a browser never runs, so the
 * policy is for the web console that will be served from this origin: its own scripts, styles, images
 * and fonts, API calls to itself, no plugins, no inline script, and never framed (clickjacking of
 * containment buttons). No `upgrade-insecure-requests`: `make run` serves plain HTTP on 127.0.0.1,
 * and TLS is the ingress's job.
 */
export const CONTENT_SECURITY_POLICY = {
  'default-src': ["'self'"],
  'base-uri': ["'self'"],
  'connect-src': ["'self'"],
  'font-src': ["'self'"],
  'form-action': ["'self'"],
  'frame-ancestors': ["'none'"],
  'img-src': ["'self'", 'data:'],
  'object-src': ["'none'"],
  'script-src': ["'self'"],
  'script-src-attr': ["'none'"],
  'style-src': ["'self'"],
};

export const HELMET_OPTIONS = {
  global: true,
  contentSecurityPolicy: { useDefaults: false, directives: CONTENT_SECURITY_POLICY },
  // The deployment decides whether its sibling hosts are HTTPS-only; this service speaks for itself.
  strictTransportSecurity: { maxAge: 31_536_000, includeSubDomains: false },
  frameguard: { action: 'deny' as const },
  referrerPolicy: { policy: 'no-referrer' as const },
  // Cross-origin reads go through CORS (CORS_ALLOWED_ORIGINS), never through no-cors embedding.
  crossOriginResourcePolicy: { policy: 'same-origin' as const },
};

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The headers of an answer written before any hook runs: what the router refuses (fastify's
     * `frameworkErrors`) and what Node's HTTP parser refuses (`clientErrorHandler`, a raw socket write).
     * Helmet's headers as its hook sets them, and no-store, as every such answer is an error.
     */
    securityHeaders: Readonly<Record<string, string>>;
  }
}

/** The headers helmet sets with these options, read from a throwaway instance once at start. */
async function helmetHeaders(): Promise<Record<string, string>> {
  const probe = Fastify({ logger: false });
  await probe.register(helmet, HELMET_OPTIONS);
  probe.get('/', async () => '');
  const res = await probe.inject({ method: 'GET', url: '/' });
  await probe.close();
  const ownHeaders = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive']);
  return Object.fromEntries(Object.entries(res.headers).filter(([k]) => !ownHeaders.has(k)).map(([k, v]) => [k, String(v)]));
}

/**
 * Security headers on every answer (helmet's: nosniff, the policy above, no referrer, no framing, HSTS
 * when served over HTTPS), and `Cache-Control: no-store` on every answer that may
 * carry what a signed-in caller may see or a credential: any operation whose caller is not `public`,
 * every error, and every answer that sets a cookie (sign-in). Public successes (the OpenAPI document,
 * the providers list, /healthz) keep no cache directive, as they hold nothing personal.
 *
 * Helmet's headers depend on its options only, never on the request, so they are read from helmet once
 * at start and written as they are on every answer: helmet's own hook builds the policy's text again
 * for each request. They go on the raw answer, as helmet writes them, so an answer cut short by a later
 * hook (401, 403, 429) or by an error carries them too; register this before every other hook, so that its
 * onRequest runs first. Answers written before any hook take `app.securityHeaders`.
 */
export async function registerSecurityHeaders(app: FastifyInstance): Promise<void> {
  const headers = await helmetHeaders();
  const entries = Object.entries(headers);
  app.decorate('securityHeaders', Object.freeze({ ...headers, 'cache-control': 'no-store' }));
  app.addHook('onRequest', (_req, reply, done) => {
    const res = reply.raw;
    for (const [name, value] of entries) res.setHeader(name, value);
    done();
  });
  // Once for every answer (errors before routing and the not-found handler included), and once more
  // as each route's own last onSend, which runs after the cookie plugin has written Set-Cookie.
  app.addHook('onSend', noStore);
  app.addHook('onRoute', (route) => {
    route.onSend = [...(route.onSend === undefined ? [] : Array.isArray(route.onSend) ? route.onSend : [route.onSend]), noStore];
  });
}

async function noStore(req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const who = req.routeOptions.config?.caller;
  const personal = who !== undefined && who !== 'public';
  if (personal || reply.statusCode >= 400 || reply.hasHeader('set-cookie')) reply.header('cache-control', 'no-store');
  return payload;
}
