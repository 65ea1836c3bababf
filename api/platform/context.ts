import type { Permission } from './permissions.js';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { Clock } from '../../lib/clock.js';

/** Who may call an operation: a permission, or one of the spec's caller kinds. */
export type Caller = Permission | 'signed in' | 'onboarding' | 'public' | 'agent' | 'client';

/**
 * Rate-limit group of an operation (spec Limits). Persons are limited per user, agents per agent, the
 * rest per IP. `gateway_submission`: the gateway budget, counted by the submission's own batch
 * (POST /actions) instead of the request hook.
 */
export type RateGroup = 'person' | 'signin' | 'public' | 'gateway' | 'gateway_submission' | 'token' | 'none';

export interface PersonPrincipal {
  kind: 'person';
  sessionId: string;
  userId: string;
  email: string;
  displayName: string;
  orgId: string;
  roles: string[];
  permissions: Set<Permission>;
  csrfToken: string;
}

/** A person signed in who has no organisation yet (onboarding cookie). */
export interface OnboardingPrincipal {
  kind: 'onboarding';
  userId: string;
  email: string;
  displayName: string;
  expiresAt: Date;
  csrfToken: string;
}

/** An agent presenting a verified, unrevoked workload token (gateway operations only). */
export interface AgentPrincipal {
  kind: 'agent';
  orgId: string;
  agentId: string;
  identityId: string;
  agentUri: string;
  tokenId: string;
  /** Agents act for no person; the field keeps the shape of the other principals. */
  userId: null;
}

/**
 * A service account presenting a verified service token (`Authorization: Bearer`, no session cookie)
 * on an operation whose caller is a permission. Its status and roles are read afresh (or from a cache
 * this process empties on revocation), not taken from the token.
 */
export interface ServicePrincipal {
  kind: 'service';
  orgId: string;
  /** The service account's id: what audit entries, created_by and author ids record. */
  userId: string;
  serviceAccountId: string;
  name: string;
  roles: string[];
  permissions: Set<Permission>;
}

export type Principal = PersonPrincipal | OnboardingPrincipal | AgentPrincipal | ServicePrincipal;

/** Who acts within an organisation on an operation guarded by a permission: a person or a service account. */
export type ActorPrincipal = PersonPrincipal | ServicePrincipal;

/**
 * The request as a service sees it: its correlation ID, who asks, and the app's services (for the clock,
 * the evidence signer). A FastifyRequest is one; services take this narrow view instead, so they do not
 * reach into HTTP (headers, routes, replies) and a job or a test can call them with a plain object.
 */
export interface RequestContext {
  readonly id: string;
  readonly principal: Principal | null;
  readonly server: { readonly deps: Deps };
}

/**
 * How the platform learns who is calling. The platform knows the shapes of principals but no module:
 * the modules that own sessions, people, workload identities, service accounts and the audit log
 * provide these (api/principals.ts wires them in).
 */
export interface PrincipalSources {
  /** The person and roles of an active session, or null for an unknown, expired or disabled one. */
  person(sessionToken: string): Promise<PersonPrincipal | null>;
  /** A person by id (the onboarding cookie names one), or null. */
  personById(userId: string): Promise<{ id: string; email: string; displayName: string } | null>;
  /** The agent of a workload token; throws the spec's 401 errors for a bad, expired or revoked one. */
  agent(bearer: string): Promise<AgentPrincipal>;
  /** The service account of a service token, with its current status and roles; throws 401 errors. */
  service(bearer: string): Promise<ServicePrincipal>;
  /** Records in the organisation's audit log that `principal` was refused `permission` on `operation`. */
  permissionDenied(principal: ActorPrincipal, operation: string, permission: Permission, correlationId: string): Promise<void>;
}

/**
 * What every part of the app reaches through `app.deps`. The platform declares what it needs itself;
 * api/app.ts adds the modules' services to this interface (declaration merging) and builds the value.
 */
export interface Deps {
  config: Config;
  db: Db;
  clock: Clock;
  principals: PrincipalSources;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    caller?: Caller;
    rateGroup?: RateGroup;
    /** An operation outside the spec's list (x-tollgate-extension in the OpenAPI document). */
    beyondSpec?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    deps: Deps;
  }
}
