import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Caller, RateGroup } from './context.js';
import { errorEnvelope } from './schemas.js';

export const CALLER_EXTENSION = 'x-tollgate-caller';
/** Marks an operation that is Tollgate's own, outside the spec's list (docs/operations.md, Extensions). */
export const BEYOND_SPEC_EXTENSION = 'x-tollgate-extension';

/** Route options naming who may call the operation (and, where it differs, its rate-limit group). */
export function caller(who: Caller, rateGroup?: RateGroup): { config: { caller: Caller; rateGroup?: RateGroup } } {
  return { config: rateGroup ? { caller: who, rateGroup } : { caller: who } };
}

/** The same route options, for an operation outside the spec's list: `...beyondSpec(caller('x:y'))`. */
export function beyondSpec<C extends { config: { caller: Caller; rateGroup?: RateGroup } }>(options: C) {
  return { config: { ...options.config, beyondSpec: true as const } };
}

/**
 * The caller is written once, in the route config that the authentication hook reads; this hook
 * copies it into the OpenAPI operation as x-tollgate-caller. Register it before @fastify/swagger.
 */
export function registerCallerExtension(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const who = route.config?.caller;
    if (!who) return;
    const schema = (route.schema ?? {}) as Record<string, unknown>;
    const signedIn = who !== 'public';
    const unsafe = !['GET', 'HEAD'].includes(String(route.method));
    const cookies = unsafe ? { session: [], csrf: [] } : { session: [] };
    route.schema = {
      ...schema,
      [CALLER_EXTENSION]: who,
      ...(route.config?.beyondSpec ? { [BEYOND_SPEC_EXTENSION]: true } : {}),
      // Cookie callers: the session (or onboarding) cookie, and the CSRF header on unsafe methods.
      // Operations guarded by a permission also take a service account's bearer token.
      ...(signedIn && !['agent', 'client'].includes(who)
        ? { security: who.includes(':') ? [cookies, { service_token: [] }] : [cookies] }
        : {}),
      response: { ...((schema.response as object | undefined) ?? {}), '4XX': errorEnvelope, '5XX': errorEnvelope },
    } as typeof route.schema;
  });
}

/** The operation a request calls, as audit entries name it: method and route, e.g. `POST /api/v1/agents`. */
export function operationOf(req: FastifyRequest): string {
  return `${req.method} ${req.routeOptions.url}`;
}
