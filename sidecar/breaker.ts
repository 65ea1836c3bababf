import type { Logger } from 'pino';

export type BreakerState = 'closed' | 'open' | 'half_open';

/** The breaker is open: Tollgate was failing, so the call is refused at once and nothing is forwarded. */
export class BreakerOpenError extends Error {
  override name = 'BreakerOpenError';
  constructor(readonly state: BreakerState) {
    super(state === 'open' ? 'Tollgate is failing; the sidecar refuses calls until it answers again' : 'Tollgate is recovering; one trial call is in flight');
  }
}

export interface BreakerOptions {
  /** Consecutive failures that open it. */
  threshold: number;
  /** Whether the API answers again (its readiness check); never throws. */
  probe: () => Promise<boolean>;
  /** Time between two probes while open. */
  probeIntervalMs: number;
  log: Logger;
  onTransition?: (to: BreakerState) => void;
}

/** What `enter` hands a caller, given back to `done`. */
export interface Ticket {
  trial: boolean;
}

/**
 * A circuit breaker in front of the central API. Closed: calls go through; `threshold` consecutive
 * failures (5xx, timeouts, refused connections; never a deny or a refusal of a contained agent) open it,
 * and so does a single failure, or a call still waiting after `slowMs`, that the API's readiness check
 * confirms (read in the background): a hung API opens it while the first call that met it is still
 * waiting for its timeout, so the calls after it are refused at once instead of each waiting too.
 * Open: every call is refused at once, and a background probe reads the API's readiness every
 * `probeIntervalMs`; when it answers, half-open. Half-open: one call goes through as the trial (others are
 * refused meanwhile); its success closes the breaker, its failure opens it again.
 * So a hung API costs each call in flight when it hung one timeout, and the calls after that none.
 */
export class CircuitBreaker {
  #state: BreakerState = 'closed';
  #failures = 0;
  #trialInFlight = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #confirming = false;

  constructor(private readonly opts: BreakerOptions) {}

  get state(): BreakerState {
    return this.#state;
  }

  /** Admits a call, or throws BreakerOpenError. */
  enter(): Ticket {
    if (this.#state === 'closed') return { trial: false };
    if (this.#state === 'half_open' && !this.#trialInFlight) {
      this.#trialInFlight = true;
      return { trial: true };
    }
    throw new BreakerOpenError(this.#state);
  }

  /** The call's outcome: `ok` false only for a failure of Tollgate itself. */
  done(ticket: Ticket, ok: boolean): void {
    if (ticket.trial) this.#trialInFlight = false;
    if (ok) {
      this.#failures = 0;
      if (ticket.trial && this.#state === 'half_open') this.#move('closed');
      return;
    }
    this.#failures += 1;
    if (ticket.trial && this.#state === 'half_open') this.#move('open');
    else if (this.#state === 'closed' && this.#failures >= this.opts.threshold) this.#move('open');
    else if (this.#state === 'closed') void this.#confirm();
  }

  /**
   * A call has been waiting long (`Tollgate.run`'s slow timer): read the API's readiness now, and open if it
   * does not answer, before that call's own timeout ends.
   */
  suspect(): void {
    if (this.#state === 'closed') void this.#confirm(true);
  }

  /** Stops the probe (at shutdown). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #move(to: BreakerState): void {
    const from = this.#state;
    this.#state = to;
    if (to === 'closed') this.#failures = 0;
    if (to === 'open') {
      this.#trialInFlight = false;
      this.opts.log.warn({ from, failures: this.#failures }, 'sidecar: Tollgate failing, circuit open: calls are refused at once until it answers');
      this.#scheduleProbe();
    } else {
      this.opts.log.info({ from, to }, to === 'closed' ? 'sidecar: circuit closed, Tollgate answers again' : 'sidecar: Tollgate answers its readiness check, circuit half-open');
    }
    this.opts.onTransition?.(to);
  }

  /** After a failure or during a slow call: if the API does not answer its readiness check either, open now. */
  async #confirm(slowCall = false): Promise<void> {
    if (this.#confirming || this.#stopped) return;
    this.#confirming = true;
    try {
      const up = await this.opts.probe();
      // Still failing (no success reset the count meanwhile) and not ready: Tollgate is down, not one call unlucky.
      if (!up && this.#state === 'closed' && (slowCall || this.#failures > 0)) this.#move('open');
    } finally {
      this.#confirming = false;
    }
  }

  #scheduleProbe(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#probe(), this.opts.probeIntervalMs);
    this.#timer.unref();
  }

  async #probe(): Promise<void> {
    if (this.#state !== 'open' || this.#stopped) return;
    const up = await this.opts.probe();
    if (this.#state !== 'open') return;
    if (up) this.#move('half_open');
    else this.#scheduleProbe();
  }
}
