import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ActorPrincipal, AgentPrincipal, OnboardingPrincipal, PersonPrincipal } from './context.js';
import type { Db } from '../db/database.js';
import type { Clock } from '../../lib/clock.js';
import { ApiError, forbidden } from './errors.js';
import { ALL_PERMISSIONS, type Permission } from './permissions.js';
import { operationOf } from './route.js';

export const SESSION_COOKIE = 'tollgate_session';
export const CSRF_COOKIE = 'tollgate_csrf';
export const ONBOARDING_COOKIE = 'tollgate_onboarding';

const UNSAFE = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
const PERMISSION_SET = new Set<string>(ALL_PERMISSIONS);

function equalSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

interface CachedPerson {
  principal: PersonPrincipal;
  at: number;
  /** What reads of this session's own view remembered with it (rememberedWithSession): forgotten with it. */
  memo?: Map<string, Promise<unknown>>;
}

/** The most sessions a process remembers; past it the oldest are forgotten first. */
const MAX_CACHED_SESSIONS = 10_000;

/**
 * The people behind session cookies as this process last read them (session, membership, roles,
 * permissions), for TOKEN_REVOCATION_CACHE_SECONDS (docs/authentication.md, Sessions and their bound): a signed-in read
 * then costs no round trip for who is calling. Whatever this process changes about sessions,
 * memberships or organisations (sign-out, tenant switch, role change, disabling, a rename) empties the
 * cache once committed (sessionsChanged), so it takes effect at once here; other processes see it within
 * the TTL, as they see an agent's revocation. Unknown tokens are not remembered. Lookups of one token in
 * flight are shared. What a person's own view reads (GET /auth/me) is remembered with their entry and
 * goes with it (remembered).
 */
export class SessionCache {
  private readonly entries = new Map<string, CachedPerson>();
  private readonly loading = new Map<string, Promise<PersonPrincipal | null>>();
  /** Moves on every change: a lookup begun before one must not fill the cache after it. */
  private generation = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly clock: Clock,
    private readonly lookup: (token: string) => Promise<PersonPrincipal | null>,
  ) {}

  async person(token: string): Promise<PersonPrincipal | null> {
    const now = this.clock.now().getTime();
    const hit = this.entries.get(token);
    if (hit && now - hit.at < this.ttlMs) return hit.principal;
    const shared = this.loading.get(token);
    if (shared) return shared;
    const generation = this.generation;
    const load = this.lookup(token).finally(() => {
      if (this.loading.get(token) === load) this.loading.delete(token);
    });
    this.loading.set(token, load);
    const principal = await load;
    if (this.ttlMs > 0 && this.generation === generation) {
      this.entries.delete(token);
      if (principal) {
        if (this.entries.size >= MAX_CACHED_SESSIONS) this.entries.delete(this.entries.keys().next().value!);
        this.entries.set(token, { principal, at: now });
      }
    }
    return principal;
  }

  /**
   * What `load` answers for `principal`'s session, read once and remembered with the session for as long as the
   * session itself is (so never past the bound, and forgotten by clear()). A principal this cache no longer
   * holds (its entry expired, or was emptied and read again) loads afresh, remembering nothing.
   */
  remembered<T>(token: string, principal: PersonPrincipal, key: string, load: () => Promise<T>): Promise<T> {
    const hit = this.entries.get(token);
    if (!hit || hit.principal !== principal || this.clock.now().getTime() - hit.at >= this.ttlMs) return load();
    const memo = (hit.memo ??= new Map());
    const known = memo.get(key) as Promise<T> | undefined;
    if (known) return known;
    const loading = load();
    memo.set(key, loading);
    // A failed read is not remembered: the next request tries again.
    loading.catch(() => memo.get(key) === loading && memo.delete(key));
    return loading;
  }

  /**
   * Forgets every session read so far, and what was remembered with them: something about sessions,
   * memberships or organisations changed.
   */
  clear(): void {
    this.generation++;
    this.entries.clear();
    this.loading.clear();
  }
}

/** Each database's session cache: one per process and database, as the pool it reads through. */
const sessionCaches = new WeakMap<Db, SessionCache>();

function sessionCacheOf(app: FastifyInstance): SessionCache {
  const { db, clock, config, principals } = app.deps;
  let cache = sessionCaches.get(db);
  if (!cache) {
    cache = new SessionCache(config.revocationCacheMs, clock, (token) => principals.person(token));
    sessionCaches.set(db, cache);
  }
  return cache;
}

/**
 * Says that sessions, memberships or organisations changed through `db` (and the change is committed): this
 * process reads every session, and what it remembered with one, afresh from now on. Call it after the
 * transaction, never inside it.
 */
export function sessionsChanged(db: Db): void {
  sessionCaches.get(db)?.clear();
}

/**
 * What a signed-in person's own view reads (their organisation, the organisations they belong to), remembered with
 * their session in this process for the same bound (docs/authentication.md, Sessions and their bound) and forgotten
 * with it: on a change through sessionsChanged(db), and when the session's entry expires. `key` names the view;
 * `load` must read only what sessionsChanged covers. A request not authenticated by a remembered session cookie
 * (a service token, TOKEN_REVOCATION_CACHE_SECONDS=0) reads afresh.
 */
export function rememberedWithSession<T>(req: FastifyRequest, key: string, load: () => Promise<T>): Promise<T> {
  const token = req.cookies[SESSION_COOKIE];
  const p = req.principal;
  const cache = sessionCaches.get(req.server.deps.db);
  if (!token || p?.kind !== 'person' || !cache) return load();
  return cache.remembered(token, p, key, load);
}

/** The person behind the session cookie, with the roles of the session's organisation. */
async function personFromSession(app: FastifyInstance, req: FastifyRequest): Promise<PersonPrincipal | null> {
  const token = req.cookies[SESSION_COOKIE];
  return token ? sessionCacheOf(app).person(token) : null;
}

/** The token of `Authorization: Bearer <token>`, if the request sends one. */
function bearerOf(req: FastifyRequest): string | null {
  const header = req.headers.authorization;
  const m = typeof header === 'string' ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  return m ? m[1]! : null;
}

/** The agent behind `Authorization: Bearer <token>`. Agent tokens work on gateway operations only. */
async function agentFromBearer(app: FastifyInstance, req: FastifyRequest): Promise<AgentPrincipal> {
  const bearer = bearerOf(req);
  if (!bearer) throw new ApiError('unauthenticated', 'Send the agent token as Authorization: Bearer <token>.');
  return app.deps.principals.agent(bearer);
}

/** What the onboarding cookie carries: who, until when, and its CSRF token; no personal data. */
interface OnboardingPayload {
  uid: string;
  exp: number;
  csrf: string;
}

/** The signed, short-lived onboarding cookie of a person who has no organisation yet. */
async function onboardingFromCookie(app: FastifyInstance, req: FastifyRequest): Promise<OnboardingPrincipal | null> {
  const raw = req.cookies[ONBOARDING_COOKIE];
  if (!raw) return null;
  const unsigned = req.unsignCookie(raw);
  if (!unsigned.valid || unsigned.value === null) return null;
  let p: OnboardingPayload;
  try {
    p = JSON.parse(Buffer.from(unsigned.value, 'base64url').toString('utf8')) as OnboardingPayload;
  } catch {
    return null;
  }
  if (typeof p.uid !== 'string' || typeof p.exp !== 'number' || typeof p.csrf !== 'string') return null;
  if (p.exp <= app.deps.clock.now().getTime()) return null;
  const person = await app.deps.principals.personById(p.uid);
  if (!person) return null;
  return {
    kind: 'onboarding',
    userId: person.id,
    email: person.email,
    displayName: person.displayName,
    expiresAt: new Date(p.exp),
    csrfToken: p.csrf,
  };
}

export function cookieOptions(app: FastifyInstance, maxAgeSeconds: number, httpOnly = true) {
  return {
    path: '/',
    httpOnly,
    sameSite: 'lax' as const,
    secure: app.deps.config.cookieSecure,
    maxAge: maxAgeSeconds,
  };
}

/** Sets the session and CSRF cookies. The CSRF cookie is readable by the page, the session one is not. */
export function setSessionCookies(
  app: FastifyInstance,
  reply: FastifyReply,
  session: { token: string; csrfToken: string },
): void {
  const ttl = app.deps.config.sessionTtlSeconds;
  reply.setCookie(SESSION_COOKIE, session.token, cookieOptions(app, ttl));
  reply.setCookie(CSRF_COOKIE, session.csrfToken, cookieOptions(app, ttl, false));
  reply.clearCookie(ONBOARDING_COOKIE, { path: '/' });
}

export function setOnboardingCookies(
  app: FastifyInstance,
  reply: FastifyReply,
  user: { id: string },
): { csrfToken: string; expiresAt: Date } {
  const ttl = app.deps.config.onboardingTtlSeconds;
  const csrf = randomBytes(32).toString('base64url');
  const expiresAt = new Date(app.deps.clock.now().getTime() + ttl * 1000);
  const payload: OnboardingPayload = { uid: user.id, exp: expiresAt.getTime(), csrf };
  const value = Buffer.from(JSON.stringify(payload)).toString('base64url');
  reply.setCookie(ONBOARDING_COOKIE, value, { ...cookieOptions(app, ttl), signed: true });
  reply.setCookie(CSRF_COOKIE, csrf, cookieOptions(app, ttl, false));
  reply.clearCookie(SESSION_COOKIE, { path: '/' });
  return { csrfToken: csrf, expiresAt };
}

export function clearAuthCookies(reply: FastifyReply): void {
  for (const name of [SESSION_COOKIE, CSRF_COOKIE, ONBOARDING_COOKIE]) reply.clearCookie(name, { path: '/' });
}

/**
 * The one place that decides who is calling: authentication (401), CSRF on unsafe methods (403
 * csrf_failed), then the operation's permission (403 forbidden, audited). Runs on every route that
 * declares a caller.
 */
export function registerAuthentication(app: FastifyInstance): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (req) => {
    const caller = req.routeOptions.config.caller;
    // Client credentials are checked by the token endpoint itself.
    if (!caller || caller === 'public' || caller === 'client') return;
    if (caller === 'agent') {
      req.principal = await agentFromBearer(app, req);
      return;
    }

    // A service token counts only without a session cookie: a browser's session always wins.
    const bearer = caller === 'onboarding' || req.cookies[SESSION_COOKIE] ? null : bearerOf(req);
    if (bearer) {
      req.principal = await app.deps.principals.service(bearer);
    } else {
      const person = await personFromSession(app, req);
      req.principal = person ?? (caller === 'onboarding' ? await onboardingFromCookie(app, req) : null);
    }
    const principal = req.principal;
    if (!principal) throw new ApiError('unauthenticated');

    // A bearer token is not sent by the browser on its own, so it needs no CSRF defence.
    if (UNSAFE.has(req.method) && principal.kind !== 'service') {
      const header = req.headers['x-csrf-token'];
      const cookie = req.cookies[CSRF_COOKIE];
      const ok =
        typeof header === 'string' &&
        typeof cookie === 'string' &&
        equalSecret(header, cookie) &&
        equalSecret(header, principal.csrfToken);
      if (!ok) throw new ApiError('csrf_failed');
    }

    if (PERMISSION_SET.has(caller) && (principal.kind === 'person' || principal.kind === 'service')) {
      const permission = caller as Permission;
      if (!principal.permissions.has(permission)) {
        await app.deps.principals.permissionDenied(principal, operationOf(req), permission, req.id);
        throw forbidden(permission);
      }
    }
  });
}

/**
 * The signed-in person of a route whose caller is a permission or `signed in`, for operations that
 * are a person's own (their session, profile, notifications) or that need a person (deciding
 * approvals, publishing policies). A service account gets 403 forbidden.
 */
export function personOf(req: FastifyRequest): PersonPrincipal {
  const p = req.principal;
  if (p?.kind === 'service') {
    throw new ApiError('forbidden', 'This operation takes a signed-in person; a service account cannot call it.', {
      required_principal: 'person',
    });
  }
  if (!p || p.kind !== 'person') throw new ApiError('unauthenticated');
  return p;
}

/** Who acts in an organisation on a route whose caller is a permission: a person or a service account. */
export function actorOf(req: FastifyRequest): ActorPrincipal {
  const p = req.principal;
  if (!p || (p.kind !== 'person' && p.kind !== 'service')) throw new ApiError('unauthenticated');
  return p;
}

/** The caller of an `onboarding` operation: the onboarding cookie's person, or a signed-in one. */
export function onboardingCallerOf(req: FastifyRequest): PersonPrincipal | OnboardingPrincipal {
  const p = req.principal;
  if (!p || p.kind === 'agent' || p.kind === 'service') throw new ApiError('unauthenticated');
  return p;
}

/** The agent of a gateway operation. */
export function agentOf(req: FastifyRequest): AgentPrincipal {
  const p = req.principal;
  if (!p || p.kind !== 'agent') throw new ApiError('unauthenticated');
  return p;
}
