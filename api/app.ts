import { randomUUID } from 'node:crypto';
import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { systemClock, type Clock } from '../lib/clock.js';
import type { Config } from './config.js';
import { poolOf, type Db } from './db/database.js';
import { registerAuthentication } from './platform/auth.js';
import { builtInConsoleDir, registerConsole } from './platform/console.js';
import { ApiError } from './platform/errors.js';
import { clientErrorHandler, CORRELATION_HEADER, frameworkErrors, registerErrorHandler } from './platform/error-handler.js';
import { jsonBodyParser, registerInputBoundary } from './platform/input.js';
import { JobQueue } from './platform/jobs.js';
import { ApiMetrics } from './platform/metrics.js';
import { createLogger } from './platform/logger.js';
import { API_PREFIX, registerOpenApi } from './platform/openapi.js';
import { DatabaseProbe } from './platform/readiness.js';
import { databaseRateLimitStore, HitCounter, rateGroupOf, rateLimited, rateKey, rateMax } from './platform/rate-limit.js';
import { registerCallerExtension } from './platform/route.js';
import { registerSecurityHeaders } from './platform/security-headers.js';
import type { Deps } from './platform/context.js';
import { registerTracing } from './platform/tracing.js';
import { challengeVerifier, type ChallengeVerifier } from './modules/auth/index.js';
import { EvidenceSigner } from './modules/evidence/index.js';
import { ApprovalTokens, AUTHZEN_EVALUATION_PATH, AUTHZEN_EVALUATIONS_PATH, DecisionSnapshots, SubmissionService } from './modules/gateway/index.js';
import { RevocationCache, TokenService } from './modules/identities/index.js';
import { createMailer, type Mailer } from './modules/mail/index.js';
import { ServiceAccountStates } from './modules/service-accounts/index.js';
import { principalSources } from './principals.js';
import { apiRoutes } from './routes.js';

/** What the app is built from (fastify's buildApp(deps) habit). */
export interface AppDeps {
  config: Config;
  db: Db;
  clock?: Clock;
  /** Where logs go; defaults to stdout. Tests pass a stream to read them back. */
  logStream?: NodeJS.WritableStream;
  /** The Prometheus registry and counters of GET /metrics; defaults to new ones of this app's own. */
  metrics?: ApiMetrics;
}

// The modules' services every route reaches through `app.deps`, beside the platform's own (platform/context.ts).
declare module './platform/context.js' {
  interface Deps {
    tokens: TokenService;
    revocations: RevocationCache;
    /** Service accounts' status and roles as authentication reads them. */
    serviceAccounts: ServiceAccountStates;
    evidence: EvidenceSigner;
    hits: HitCounter;
    /** Each organisation's registry as decisions read it, in memory (gateway and simulation share it). */
    snapshots: DecisionSnapshots;
    /** The gateway's decisions: one group commit per organisation, whatever operation submits (POST /actions, AuthZEN). */
    submissions: SubmissionService;
    /** Background jobs: send them (inside a transaction); the worker runs them (worker/README.md). */
    jobs: JobQueue;
    /** Email, by EMAIL_BACKEND (api/modules/mail/). */
    mailer: Mailer;
    /** The sign-up's and public forms' challenge check, by CHALLENGE_VERIFIER. */
    challenge: ChallengeVerifier;
    /** What GET /metrics shows (docs/metrics.md): counted by the gateway, token exchange and rate limiter. */
    metrics: ApiMetrics;
  }
}

export { CORRELATION_HEADER };
const CORRELATION_ID = /^[A-Za-z0-9._-]{8,100}$/;

/**
 * Builds the central API without listening: tests call app.inject(), `tollgate api` calls listen().
 * Plugins register in order: external, then platform hooks, then routes.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const log = createLogger(config.logLevel, deps.logStream);

  const app = Fastify({
    loggerInstance: log,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: config.trustProxy,
    logController: new LogController({
      requestIdLogLabel: 'correlation_id',
      disableRequestLogging: (req) => req.url === '/healthz' || req.url === '/readyz' || req.url === '/metrics',
    }),
    // The correlation ID is the request ID: the caller's when it is well-formed, else a new one.
    genReqId: (req) => {
      const given = req.headers[CORRELATION_HEADER];
      return typeof given === 'string' && CORRELATION_ID.test(given) ? given : randomUUID();
    },
    // What the router and Node's HTTP parser refuse before a route runs, in the envelope too.
    frameworkErrors,
    clientErrorHandler,
  });
  app.decorate('deps', buildDeps(deps, log));
  // The in-process worker, when started (api/server.ts), finishes its jobs before the database closes.
  app.addHook('onClose', async () => {
    await app.deps.jobs.stop({ timeoutMs: config.shutdownTimeoutMs });
  });
  // JSON only (any other content type answers 415), parsed by the input boundary's parser.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser(app));
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  await registerSecurityHeaders(app);
  await registerTracing(app, config);
  await app.register(cookie, { secret: config.sessionSecret });
  if (config.corsOrigins.length > 0) {
    await app.register(cors, { origin: config.corsOrigins, credentials: true });
  }
  registerCallerExtension(app);
  await registerOpenApi(app);
  registerErrorHandler(app);

  app.addHook('onRequest', async (req, reply) => {
    reply.header(CORRELATION_HEADER, req.id);
    const given = req.headers[CORRELATION_HEADER];
    if (given !== undefined && !(typeof given === 'string' && CORRELATION_ID.test(given))) {
      throw new ApiError('validation_failed', 'X-Correlation-ID must be 8-100 characters of A-Z a-z 0-9 . _ -', [
        { field: 'header.x-correlation-id', message: 'expected 8-100 characters of A-Z a-z 0-9 . _ -' },
      ]);
    }
  });
  registerAuthentication(app);
  // Before the rate limiter, which keys token exchange by the body's client_id in the database.
  registerInputBoundary(app);

  await app.register(rateLimit, {
    global: true,
    // After parsing, so token exchange can be limited per client ID from the body.
    hook: 'preValidation',
    timeWindow: 60_000,
    store: databaseRateLimitStore(app.deps.hits),
    keyGenerator: rateKey,
    max: (req) => rateMax(config, req),
    allowList: (req) => !req.routeOptions.config.caller || ['none', 'gateway_submission'].includes(rateGroupOf(req)),
    errorResponseBuilder: (req, ctx) => {
      app.deps.hits.refused(rateKey(req));
      return rateLimited(ctx.max, ctx.ttl);
    },
  });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  // AuthZEN PDP metadata (docs/integrations.md): at the root, as the spec places it under the PDP's
  // identifier, this origin. Absolute URLs from the request (X-Forwarded-* only under TRUST_PROXY).
  // The paths are the AuthZEN routes' own (the gateway module exports them); test/api/authzen.test.ts posts to them.
  app.get('/.well-known/authzen-configuration', { schema: { hide: true } }, async (req) => {
    const origin = `${req.protocol}://${req.host}`;
    return {
      policy_decision_point: origin,
      access_evaluation_endpoint: `${origin}${API_PREFIX}${AUTHZEN_EVALUATION_PATH}`,
      access_evaluations_endpoint: `${origin}${API_PREFIX}${AUTHZEN_EVALUATIONS_PATH}`,
    };
  });
  const database = new DatabaseProbe(deps.db);
  app.get('/readyz', { schema: { hide: true } }, async (req, reply) => {
    try {
      await database.check();
      return { status: 'ready' };
    } catch (err) {
      req.log.warn({ err }, 'readiness check failed');
      return reply.status(503).send({ status: 'unavailable', checks: { database: 'unreachable' } });
    }
  });

  if (config.metricsEnabled) {
    // Outside /api/v1 and without a caller: Prometheus scrapes it with no credential. It shows
    // aggregates only (docs/metrics.md); keep it off public ingress, as /healthz and /readyz.
    app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
      const text = await app.deps.metrics.scrape();
      return reply.type(app.deps.metrics.contentType).send(text);
    });
  }

  // The web console at `/` (console/, built into dist/console), when it is built.
  const consoleDir = config.consoleDir ?? builtInConsoleDir();
  if (!(await registerConsole(app, consoleDir)) && config.consoleDir !== undefined) {
    app.log.warn({ console_dir: config.consoleDir }, 'CONSOLE_DIR holds no index.html: the web console is not served');
  }

  await app.register(apiRoutes, { prefix: API_PREFIX });
  return app;
}

/**
 * The app's long-lived services (`app.deps`), built once per process: the API's routes reach them, and so
 * do the jobs `tollgate worker` runs, which builds them without the HTTP app.
 */
export function buildDeps(deps: AppDeps, log: FastifyBaseLogger): Deps {
  const { config, db } = deps;
  const clock = deps.clock ?? systemClock;
  const tokens = new TokenService(config.tokenSigningSeed, () => clock.now());
  const revocations = new RevocationCache(db, clock, config.revocationCacheMs);
  const serviceAccounts = new ServiceAccountStates(db, clock, config.revocationCacheMs);
  const metrics = deps.metrics ?? new ApiMetrics({ pool: poolOf(db) });
  const evidence = new EvidenceSigner(config.evidenceSigningSeed, config.evidencePreviousSeeds);
  const hits = new HitCounter(db, clock, metrics);
  const snapshots = new DecisionSnapshots();
  return {
    config,
    db,
    clock,
    principals: principalSources({ db, clock, tokens, revocations, serviceAccounts }),
    tokens,
    revocations,
    serviceAccounts,
    evidence,
    hits,
    snapshots,
    submissions: new SubmissionService({
      db,
      clock,
      evidence,
      snapshots,
      hits,
      tokens: new ApprovalTokens(config.tokenSigningSeed),
      gatewayPerMinute: config.rateLimits.gatewayPerMinute,
      metrics,
    }),
    jobs: new JobQueue(db, config.jobs, log),
    mailer: createMailer(config, log),
    challenge: challengeVerifier(config),
    metrics,
  };
}
