import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { systemClock, type Clock } from '../lib/clock.js';
import {
  ActionDeniedError,
  ApprovalNotGrantedError,
  ApprovalTimeoutError,
  AuthenticationError,
  GatewayApiError,
} from './errors.js';
import {
  isAgentPermissions,
  isGatewayStatus,
  isSubmissionBody,
  toResult,
  type ActionRequest,
  type ActionResult,
  type AgentPermissions,
  type GatewayActionStatus,
} from './result.js';
import { TokenCache, type CredentialsSource } from './tokens.js';
import { apiErrorOf, errorCode, timeoutError, Transport, type HttpAnswer } from './transport.js';

export interface GatewayClientOptions {
  /** The central API: its origin (`http://tollgate-api:8080`) or its `/api/v1` base; operations go under `/api/v1`. */
  baseUrl: string;
  /** The workload identity's credentials, or a function called at every token exchange. */
  credentials: CredentialsSource;
  /** Exchange the credentials again this long before the token expires. Default 30. */
  refreshBeforeExpirySeconds?: number;
  /** Each HTTP request as a whole. Default 15. */
  timeoutSeconds?: number;
  /** Making the connection. Default 5. */
  connectTimeoutSeconds?: number;
  /**
   * One submission as a whole (token exchange, request, and the retry of rule 2), and one status read:
   * the caller gets the timeout's error when it passes, and the request is aborted. Default none (each
   * HTTP request keeps its own `timeoutSeconds`). Approval waits are not cut by it.
   */
  decisionTimeoutSeconds?: number;
  /** Authorise-and-execute: how long to wait for an approval; 0 returns at once. Default 0. */
  waitSeconds?: number;
  /** Authorise-and-execute: time between two reads of the gateway status. Default 3. */
  pollIntervalSeconds?: number;
  /** Authorise-and-execute: the longest wait for an approval, whatever `waitSeconds` asks. Default 900. */
  approvalTimeoutSeconds?: number;
  /** For tests: the clock token lifetimes and approval waits are measured on. Default the system clock. */
  clock?: Clock;
  /** For tests: how the client waits between polls. Default a timer. */
  sleep?: (ms: number) => Promise<void>;
}

/** The settings in force, defaults applied; never the credentials. */
export interface GatewayClientSettings {
  baseUrl: string;
  refreshBeforeExpirySeconds: number;
  timeoutSeconds: number;
  connectTimeoutSeconds: number;
  decisionTimeoutSeconds: number | null;
  waitSeconds: number;
  pollIntervalSeconds: number;
  approvalTimeoutSeconds: number;
}

export interface CallOptions {
  /**
   * Sent as X-Correlation-ID, prefixed `sdk-` unless it already starts so; the result must be 8-100
   * characters of `A-Z a-z 0-9 . _ -`. Default `sdk-` + a random UUID, one per call.
   */
  correlationId?: string;
}

export interface SubmitOptions extends CallOptions {
  /** Default `sdk-` + 32 hex characters. Retrying with the same key (and body) is safe: the API replays. */
  idempotencyKey?: string;
  /**
   * The agent's session, sent as `Tollgate-Session` for flow rules (1-200 characters of `A-Z a-z 0-9 . _ : -`);
   * without it the API takes the access token's lifetime as the session.
   */
  session?: string;
}

/** What `SubmitOptions.session` (the `Tollgate-Session` header) may hold. */
export const SESSION_ID = /^[A-Za-z0-9._:-]{1,200}$/;

export interface AuthoriseOptions extends SubmitOptions {
  waitSeconds?: number;
  pollIntervalSeconds?: number;
  approvalTimeoutSeconds?: number;
}

export const DEFAULTS = {
  refreshBeforeExpirySeconds: 30,
  timeoutSeconds: 15,
  connectTimeoutSeconds: 5,
  waitSeconds: 0,
  pollIntervalSeconds: 3,
  approvalTimeoutSeconds: 900,
} as const;

/** A fresh token cures these (rule 2); any other 401 does not. */
const RETRY_WITH_FRESH_TOKEN = new Set(['token_expired', 'session_revoked']);
/** Approval outcomes that end the wait without a token (rule 5). */
const NOT_GRANTED = new Set(['rejected', 'expired', 'cancelled', 'revoked']);
const CORRELATION_ID = /^[A-Za-z0-9._-]{8,100}$/;

/**
 * The client of the Tollgate gateway: the spec's "Gateway client flow" (docs/client.md). It submits
 * proposed tool calls (`submit`), and can wait for an approval and resubmit (`authoriseAndExecute`).
 * It never runs a tool itself: the state the gateway answers is authoritative (rule 8).
 */
export class GatewayClient {
  readonly settings: Readonly<GatewayClientSettings>;
  readonly #transport: Transport;
  readonly #tokens: TokenCache;
  readonly #clock: Clock;
  readonly #sleep: (ms: number) => Promise<void>;

  /** Makes no request: the credentials are first exchanged on the first call (rule 1). */
  constructor(options: GatewayClientOptions) {
    if (!options || typeof options.baseUrl !== 'string') throw new TypeError('baseUrl is required');
    if (!options.credentials) throw new TypeError('credentials are required');
    const pick = (name: keyof typeof DEFAULTS, min: number, exclusive = false): number => {
      const v = options[name] ?? DEFAULTS[name];
      // Only the wait may be unbounded (approvalTimeoutSeconds still caps it).
      const finite = name === 'waitSeconds' || Number.isFinite(v);
      if (typeof v !== 'number' || Number.isNaN(v) || !finite || v < min || (exclusive && v === min)) {
        throw new RangeError(`${name} must be a number ${exclusive ? 'above' : 'of at least'} ${min}`);
      }
      return v;
    };
    const settings = {
      baseUrl: '',
      refreshBeforeExpirySeconds: pick('refreshBeforeExpirySeconds', 0),
      timeoutSeconds: pick('timeoutSeconds', 0, true),
      connectTimeoutSeconds: pick('connectTimeoutSeconds', 0, true),
      decisionTimeoutSeconds: decisionTimeoutOf(options.decisionTimeoutSeconds),
      waitSeconds: pick('waitSeconds', 0),
      pollIntervalSeconds: pick('pollIntervalSeconds', 0, true),
      approvalTimeoutSeconds: pick('approvalTimeoutSeconds', 0),
    };
    this.#transport = new Transport(options.baseUrl, {
      timeoutMs: settings.timeoutSeconds * 1000,
      connectTimeoutMs: settings.connectTimeoutSeconds * 1000,
    });
    settings.baseUrl = this.#transport.baseUrl;
    this.settings = Object.freeze(settings);
    this.#clock = options.clock ?? systemClock;
    this.#sleep = options.sleep ?? ((ms) => delay(ms));
    this.#tokens = new TokenCache(options.credentials, this.#transport, this.#clock, settings.refreshBeforeExpirySeconds * 1000);
  }

  /**
   * Submits one proposed tool call and returns its result whatever the decision: allow, deny and
   * require_approval are all results (rule 4). Raises only when the request fails: a GatewayApiError
   * for an error answer (AuthenticationError for authentication), or the network's own error.
   */
  async submit(action: ActionRequest, options: SubmitOptions = {}): Promise<ActionResult> {
    const key = options.idempotencyKey ?? newIdempotencyKey();
    return this.#submitBody(JSON.stringify(action), key, correlationIdOf(options.correlationId), sessionOf(options.session));
  }

  /**
   * Authorise-and-execute (rule 5): submits; when approval is required and the wait is above zero,
   * reads the gateway status every poll interval until an approval token exists, then resubmits the
   * same bytes under the same key with the token. Raises ActionDeniedError on deny,
   * ApprovalNotGrantedError when the approval is rejected, expires or is cancelled, and
   * ApprovalTimeoutError when no approval comes in time. Any other outcome (executed, failed, approved
   * for the caller's proxy to run, or still waiting when the wait is 0) is returned.
   */
  async authoriseAndExecute(action: ActionRequest, options: AuthoriseOptions = {}): Promise<ActionResult> {
    const key = options.idempotencyKey ?? newIdempotencyKey();
    const correlationId = correlationIdOf(options.correlationId);
    const session = sessionOf(options.session);
    const waitSeconds = nonNegative('waitSeconds', options.waitSeconds ?? this.settings.waitSeconds);
    const pollSeconds = nonNegative('pollIntervalSeconds', options.pollIntervalSeconds ?? this.settings.pollIntervalSeconds);
    if (pollSeconds === 0) throw new RangeError('pollIntervalSeconds must be above 0');
    const capSeconds = nonNegative('approvalTimeoutSeconds', options.approvalTimeoutSeconds ?? this.settings.approvalTimeoutSeconds);

    // Serialised once, without any token: every submission of this request sends these same bytes.
    const { approval_token: given, ...request } = action;
    const body = JSON.stringify(request);
    const first = await this.#submitBody(given ? withApprovalToken(body, given) : body, key, correlationId, session);

    if (first.decision === 'deny') throw new ActionDeniedError(first);
    if (NOT_GRANTED.has(first.state)) throw new ApprovalNotGrantedError(first, first.state);
    if (!first.needs_approval || waitSeconds === 0) return first;

    const waitMs = Math.min(waitSeconds, capSeconds) * 1000;
    const started = this.#clock.now().getTime();
    const deadline = started + waitMs;
    let token: string | undefined;
    for (;;) {
      const remaining = deadline - this.#clock.now().getTime();
      if (remaining <= 0) throw new ApprovalTimeoutError(first, (this.#clock.now().getTime() - started) / 1000);
      await this.#sleep(Math.min(pollSeconds * 1000, remaining));
      const status = await this.#status(first.action_id, correlationId);
      token = status.approval?.approval_token;
      if (token) break;
      const outcome = NOT_GRANTED.has(status.state) ? status.state : status.approval && NOT_GRANTED.has(status.approval.status) ? status.approval.status : null;
      if (outcome) throw new ApprovalNotGrantedError(first, outcome, status);
      // Already run by another submission under this key (its token is spent): the replay returns the result.
      if (status.state === 'executed' || status.state === 'failed') break;
    }

    const final = await this.#submitBody(token ? withApprovalToken(body, token) : body, key, correlationId, session);
    if (final.decision === 'deny') throw new ActionDeniedError(final);
    if (NOT_GRANTED.has(final.state)) throw new ApprovalNotGrantedError(final, final.state);
    return final;
  }

  /** The agent's view of one of its actions (`GET /actions/gateway/{id}`), with the approval token once approved. */
  async actionStatus(actionId: string, options: CallOptions = {}): Promise<GatewayActionStatus> {
    return this.#status(actionId, correlationIdOf(options.correlationId));
  }

  /**
   * The agent's containment state and the tools it may invoke (`GET /gateway/permissions`, an extension
   * of Tollgate's beyond the spec), with the retry of rule 2 and the decision timeout.
   */
  async permissions(options: CallOptions = {}): Promise<AgentPermissions> {
    const correlationId = correlationIdOf(options.correlationId);
    const deadline = this.#deadline();
    const answer = await this.#authorised(
      correlationId,
      (bearer) => this.#transport.send({ method: 'GET', path: '/gateway/permissions', correlationId, headers: { authorization: bearer }, deadline }),
      deadline,
    );
    if (!isAgentPermissions(answer.body)) throw invalidResponse(answer, 'The permissions answer is not a permission list.');
    return answer.body;
  }

  /** Whether the API answers its readiness check (`/readyz` beside `/api/v1`) in time; never throws. */
  ready(timeoutSeconds = this.settings.decisionTimeoutSeconds ?? this.settings.timeoutSeconds): Promise<boolean> {
    return this.#transport.probe('/readyz', timeoutSeconds * 1000);
  }

  /** Closes the client's connections. */
  close(): Promise<void> {
    return this.#transport.close();
  }

  /**
   * The deadline of one decision starting now (`performance.now()` milliseconds), when one is set: each request
   * of the call is aborted with a TimeoutError when it passes (Transport.send), and a wait for the token ends
   * then. A number, not an AbortSignal: no controller, timer or listeners a call beside the request's own.
   */
  #deadline(): number | undefined {
    const s = this.settings.decisionTimeoutSeconds;
    return s === null ? undefined : performance.now() + s * 1000;
  }

  async #submitBody(body: string, key: string, correlationId: string, session: string | undefined): Promise<ActionResult> {
    const deadline = this.#deadline();
    const answer = await this.#authorised(
      correlationId,
      (bearer) =>
        this.#transport.send({
          method: 'POST',
          path: '/actions',
          correlationId,
          body,
          headers: session ? { authorization: bearer, 'idempotency-key': key, 'tollgate-session': session } : { authorization: bearer, 'idempotency-key': key },
          deadline,
        }),
      deadline,
    );
    if (!isSubmissionBody(answer.body)) throw invalidResponse(answer, 'The submission answer is not a result.');
    return toResult(answer.body, key);
  }

  async #status(actionId: string, correlationId: string): Promise<GatewayActionStatus> {
    const deadline = this.#deadline();
    const answer = await this.#authorised(
      correlationId,
      (bearer) => this.#transport.send({ method: 'GET', path: `/actions/gateway/${encodeURIComponent(actionId)}`, correlationId, headers: { authorization: bearer }, deadline }),
      deadline,
    );
    if (!isGatewayStatus(answer.body)) throw invalidResponse(answer, 'The status answer is not an action.');
    return answer.body;
  }

  /**
   * One request with the agent token (rule 2): after 401 `token_expired` or `session_revoked`, the
   * credentials are exchanged again and the request is sent once more, unchanged; a 401 then, or any
   * other 401, is an AuthenticationError. Other error answers are GatewayApiErrors.
   */
  async #authorised(correlationId: string, send: (authorization: string) => Promise<HttpAnswer>, deadline: number | undefined): Promise<HttpAnswer> {
    const token = this.#tokens.current() ?? (await untilDeadline(this.#tokens.get(correlationId), deadline));
    let answer = await send(`Bearer ${token}`);
    if (answer.status === 401 && RETRY_WITH_FRESH_TOKEN.has(errorCode(answer) ?? '')) {
      const first = apiErrorOf(answer, AuthenticationError);
      this.#tokens.discard(token);
      const fresh = await untilDeadline(this.#tokens.get(correlationId), deadline);
      answer = await send(`Bearer ${fresh}`);
      if (answer.status === 401) throw apiErrorOf(answer, AuthenticationError, { cause: first });
    }
    if (answer.status === 401) throw apiErrorOf(answer, AuthenticationError);
    if (answer.status < 200 || answer.status >= 300) throw apiErrorOf(answer, GatewayApiError);
    return answer;
  }
}

/**
 * Rule 3: `sdk-` followed by 32 hex characters: a random UUID's (122 random bits), which Node draws from a pool it
 * fills 128 at a time, where 16 random bytes of their own cost a system call per submission (3% of a sidecar's
 * busy time at 500 submissions a second, bench/sidecar.ts's profile).
 */
export function newIdempotencyKey(): string {
  return `sdk-${randomUUID().replaceAll('-', '')}`;
}

/** Rule 3: every request carries an X-Correlation-ID starting `sdk-`. */
function correlationIdOf(given: string | undefined): string {
  if (given === undefined) return `sdk-${randomUUID()}`;
  const id = given.startsWith('sdk-') ? given : `sdk-${given}`;
  if (!CORRELATION_ID.test(id)) throw new TypeError('correlationId must make 8-100 characters of A-Z a-z 0-9 . _ - with its sdk- prefix');
  return id;
}

/** The session to send, checked before anything is sent. */
function sessionOf(given: string | undefined): string | undefined {
  if (given === undefined) return undefined;
  if (!SESSION_ID.test(given)) throw new TypeError('session must be 1-200 characters of A-Z a-z 0-9 . _ : -');
  return given;
}

/** The same bytes with `approval_token` added as the last member (the API's request hash leaves it out). */
function withApprovalToken(body: string, token: string): string {
  return `${body.slice(0, -1)}${body === '{}' ? '' : ','}"approval_token":${JSON.stringify(token)}}`;
}

function decisionTimeoutOf(v: number | undefined): number | null {
  if (v === undefined) return null;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError('decisionTimeoutSeconds must be a number above 0');
  return v;
}

/**
 * `p`, or a TimeoutError at `deadline` (`performance.now()` milliseconds). A token exchange is shared by
 * concurrent callers, so one caller's deadline stops its own wait, not the exchange (which keeps its own
 * request timeout).
 */
function untilDeadline<T>(p: Promise<T>, deadline: number | undefined): Promise<T> {
  if (deadline === undefined) return p;
  const ms = deadline - performance.now();
  if (ms <= 0) return Promise.reject(timeoutError());
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(timeoutError()), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

function nonNegative(name: string, v: number): number {
  if (typeof v !== 'number' || Number.isNaN(v) || v < 0 || (v === Infinity && name !== 'waitSeconds')) {
    throw new RangeError(`${name} must be a finite number of at least 0`);
  }
  return v;
}

function invalidResponse(answer: HttpAnswer, message: string): GatewayApiError {
  return new GatewayApiError({ status: answer.status, code: 'invalid_response', message, correlationId: answer.correlationId });
}
