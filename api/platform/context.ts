import type { Permission } from '../modules/roles/catalogue.js';
import type { Config } from '../config.js';
import type { Db } from '../db/database.js';

/** Who may call an operation: a permission, or one of the spec's caller kinds. */
export type Caller = Permission | 'signed in' | 'onboarding' | 'public' | 'agent' | 'client';

/** Rate-limit group of an operation (spec Limits). Persons are limited per user, the rest per IP. */
export type RateGroup = 'person' | 'signin' | 'public' | 'none';

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

export type Principal = PersonPrincipal | OnboardingPrincipal;

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
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    deps: Required<Omit<AppDeps, 'logStream'>>;
  }
}
