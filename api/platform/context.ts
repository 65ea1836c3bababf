import type { Permission } from '../modules/roles/catalogue.js';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { RevocationCache } from '../modules/identities/revocation.js';
import type { TokenService } from '../modules/identities/tokens.js';
import type { ServiceAccountStates } from '../modules/service-accounts/service-accounts.state.js';
import type { EvidenceSigner } from '../modules/evidence/signer.js';
import type { HitCounter } from './rate-limit.js';
import type { DecisionSnapshots } from '../modules/gateway/snapshot.js';

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

/** The clock is injected so that expiry is tested without sleeping. */
export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

/** What the app is built from (fastify's buildApp(deps) habit). */
export interface AppDeps {
  config: Config;
  db: Db;
  clock?: Clock;
  /** Where logs go; defaults to stdout. Tests pass a stream to read them back. */
  logStream?: NodeJS.WritableStream;
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
    deps: Required<Omit<AppDeps, 'logStream'>> & {
      tokens: TokenService;
      revocations: RevocationCache;
      /** Service accounts' status and roles as authentication reads them. */
      serviceAccounts: ServiceAccountStates;
      evidence: EvidenceSigner;
      hits: HitCounter;
      /** Each organisation's registry as decisions read it, in memory (gateway and simulation share it). */
      snapshots: DecisionSnapshots;
    };
  }
}
