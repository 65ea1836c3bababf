import type { Clock } from '../lib/clock.js';
import { AuthenticationError, GatewayApiError } from './errors.js';
import { apiErrorOf, type Transport } from './transport.js';

/** A workload identity's client credentials (`POST /agents/{id}/identities` answers them once). */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** The credentials, or a function called at every exchange (for example reading files a Secret mounts). */
export type CredentialsSource = ClientCredentials | (() => ClientCredentials | Promise<ClientCredentials>);

interface Token {
  value: string;
  /** Exchange again from this instant (ms of the client's clock). */
  refreshAt: number;
}

/**
 * A bearer token from a `client_credentials` exchange, held in memory only (rule 1): exchanged on first
 * use, reused until `refreshBeforeMs` before its expiry, exchanged again after that. Concurrent callers
 * share one exchange. The credentials and the token live in private fields, so neither shows when the
 * client is inspected or serialised. The agent's token comes from `/identities/token`; the
 * controller's (a service account's) from `/service-accounts/token`.
 */
export class TokenCache {
  #token: Token | undefined;
  #exchanging: Promise<Token> | undefined;
  readonly #credentials: CredentialsSource;

  constructor(
    credentials: CredentialsSource,
    private readonly transport: Transport,
    private readonly clock: Clock,
    private readonly refreshBeforeMs: number,
    private readonly tokenPath = '/identities/token',
  ) {
    this.#credentials = credentials;
  }

  /** The token held, while it is valid for at least `refreshBeforeMs` more; undefined when `get` would exchange. */
  current(): string | undefined {
    const token = this.#token;
    return token && this.clock.now().getTime() < token.refreshAt ? token.value : undefined;
  }

  /** A token valid for at least `refreshBeforeMs` more, exchanging the credentials when needed. */
  async get(correlationId: string): Promise<string> {
    const held = this.current();
    if (held !== undefined) return held;
    this.#exchanging ??= this.exchange(correlationId).finally(() => (this.#exchanging = undefined));
    this.#token = await this.#exchanging;
    return this.#token.value;
  }

  /** Forgets `token` after the API refused it, unless another call has already replaced it. */
  discard(token: string): void {
    if (this.#token?.value === token) this.#token = undefined;
  }

  private async exchange(correlationId: string): Promise<Token> {
    const source = this.#credentials;
    const { clientId, clientSecret } = typeof source === 'function' ? await source() : source;
    if (typeof clientId !== 'string' || typeof clientSecret !== 'string') {
      throw new TypeError('credentials must provide clientId and clientSecret as strings');
    }
    // The lifetime counts from before the request, so network time never makes the token look younger.
    const sentAt = this.clock.now().getTime();
    const answer = await this.transport.send({
      method: 'POST',
      path: this.tokenPath,
      correlationId,
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret }),
    });
    if (answer.status === 401) throw apiErrorOf(answer, AuthenticationError);
    if (answer.status !== 200) throw apiErrorOf(answer, GatewayApiError);
    const { access_token, expires_in } = (answer.body ?? {}) as { access_token?: unknown; expires_in?: unknown };
    if (typeof access_token !== 'string' || typeof expires_in !== 'number') {
      throw new GatewayApiError({
        status: answer.status,
        code: 'invalid_response',
        message: 'The token answer has no access_token or expires_in.',
        correlationId: answer.correlationId,
      });
    }
    return { value: access_token, refreshAt: sentAt + expires_in * 1000 - this.refreshBeforeMs };
  }
}
