import {
  AuthenticationError,
  GatewayApiError,
  GatewayClientError,
  type ActionResult,
  type AgentPermissions,
  type GatewayClient,
  SESSION_ID,
} from '../client/index.js';
import type { IncomingMessage } from 'node:http';
import { BreakerOpenError, type CircuitBreaker } from './breaker.js';

/**
 * The reason codes of a contained agent: the decision engine's (api/modules/gateway/engine/steps/agent-state.ts)
 * and IDENTITY_REVOKED for an identity the API no longer accepts (a revoked agent's identities are revoked with it).
 */
export const CONTAINMENT_CODES: ReadonlySet<string> = new Set(['AGENT_SUSPENDED', 'AGENT_REVOKED', 'IDENTITY_REVOKED', 'GATEWAY_ACCESS_DISABLED']);

/** What the sidecar answers an agent whose `Tollgate-Session` header is malformed (400). */
export const SESSION_PROBLEM = 'Tollgate-Session must be 1-200 characters of A-Z a-z 0-9 . _ : -';

/**
 * The session an agent names on a request (header `Tollgate-Session`), passed on to Tollgate for flow
 * rules; undefined when it names none (Tollgate then takes the access token's lifetime), null when the
 * header is malformed.
 */
export function sessionOf(req: IncomingMessage): string | undefined | null {
  const named = req.headers['tollgate-session'];
  if (named === undefined) return undefined;
  return typeof named === 'string' && SESSION_ID.test(named) ? named : null;
}

/** The token exchange's `details.reason` (api/modules/identities/identities.service.ts), as a reason code. */
const EXCHANGE_REASONS: Record<string, string> = {
  agent_suspended: 'AGENT_SUSPENDED',
  agent_revoked: 'AGENT_REVOKED',
  identity_revoked: 'IDENTITY_REVOKED',
};

/**
 * The containment behind a refusal, as reason codes, or null when it is something else. A contained agent
 * is refused in one of two places: its token (401 `session_revoked` or `identity_revoked`, the exchange
 * naming the reason), or, while its token still stands, the decision (a deny with the engine's code).
 */
export function containmentOf(subject: unknown): string[] | null {
  if (subject instanceof AuthenticationError) {
    const reason = (subject.details as { reason?: unknown } | null)?.reason;
    if (typeof reason === 'string' && EXCHANGE_REASONS[reason]) return [EXCHANGE_REASONS[reason]];
    // Without a reason (a request's own 401): a revoked identity, or a revoked agent's (revoked with it).
    return subject.code === 'identity_revoked' ? ['IDENTITY_REVOKED'] : null;
  }
  const result = subject as Partial<ActionResult> | null;
  if (result && result.decision === 'deny' && Array.isArray(result.reason_codes)) {
    const codes = result.reason_codes.filter((c) => CONTAINMENT_CODES.has(c));
    return codes.length > 0 ? codes : null;
  }
  return null;
}

/**
 * A failure of Tollgate itself, which the breaker counts: a 5xx, an answer the client cannot read, a
 * refused connection or a timeout. A deny, an approval outcome, a 4xx (a contained agent's 401 included)
 * and the breaker's own refusal are not.
 */
export function isOutage(err: unknown): boolean {
  if (err instanceof BreakerOpenError) return false;
  if (err instanceof GatewayApiError) return err.status >= 500 || err.code === 'invalid_response';
  return !(err instanceof GatewayClientError);
}

/**
 * The gateway client behind the circuit breaker: every call to the API is admitted (or refused) by it. A
 * call still waiting after `slowMs` makes the breaker read the API's readiness (`suspect`), so a hung API
 * is found during the first call's wait, not after its timeout (0: never).
 */
export class Tollgate {
  constructor(
    readonly gateway: GatewayClient,
    readonly breaker: CircuitBreaker,
    private readonly slowMs = 0,
  ) {}

  async run<T>(call: (gateway: GatewayClient) => Promise<T>): Promise<T> {
    const ticket = this.breaker.enter();
    const slow = this.slowMs > 0 ? setTimeout(() => this.breaker.suspect(), this.slowMs) : undefined;
    slow?.unref();
    try {
      const value = await call(this.gateway);
      this.breaker.done(ticket, true);
      return value;
    } catch (err) {
      this.breaker.done(ticket, !isOutage(err));
      throw err;
    } finally {
      clearTimeout(slow);
    }
  }
}

/**
 * The agent's effective permissions for the filtered `tools/list`, kept `ttlMs` (0: read every time);
 * concurrent readers share one read. A contained agent whose token the API refuses reads as contained
 * with no tools. `invalidate` after a deny or a containment refusal, so the next list is fresh.
 */
export class PermissionsCache {
  #value: { at: number; permissions: AgentPermissions } | undefined;
  #reading: Promise<AgentPermissions> | undefined;
  #generation = 0;

  constructor(
    private readonly tollgate: Tollgate,
    private readonly ttlMs: number,
  ) {}

  async get(): Promise<AgentPermissions> {
    const cached = this.#value;
    if (cached && Date.now() - cached.at < this.ttlMs) return cached.permissions;
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  invalidate(): void {
    this.#generation += 1;
    this.#value = undefined;
  }

  async #read(): Promise<AgentPermissions> {
    const generation = this.#generation;
    let permissions: AgentPermissions;
    try {
      permissions = await this.tollgate.run((g) => g.permissions());
    } catch (err) {
      const codes = containmentOf(err);
      if (!codes) throw err;
      permissions = { agent_id: '', contained: true, reason_codes: codes, operation: 'invoke', tools: [], registry_version: '', evaluated_at: new Date().toISOString() };
    }
    // An invalidation while reading means the answer may be stale already: use it once, keep nothing.
    if (generation === this.#generation) this.#value = { at: Date.now(), permissions };
    return permissions;
  }
}
