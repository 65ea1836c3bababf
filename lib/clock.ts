/**
 * Time as a dependency, for every process (API, controller, sidecar, client): code asks the clock it was
 * given instead of `new Date()`, so tests move time without sleeping.
 */
export interface Clock {
  now(): Date;
}

/** Timers as a dependency, beside the clock: the controller's queue and elector schedule with them. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock & Timers = {
  now: () => new Date(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
