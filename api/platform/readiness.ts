import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * How long /readyz waits for the database before it answers 503. A load balancer's probe has a timeout
 * of its own (often one second); an answer after it counts for nothing, so the bound stays under it.
 */
export const READINESS_TIMEOUT_MS = 800;

/**
 * Whether the database answers, within a bound. Probes that arrive while a check is in flight share it,
 * so a database that hangs collects one waiting statement, not one per probe.
 */
export class DatabaseProbe {
  private inFlight: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly timeoutMs = READINESS_TIMEOUT_MS,
  ) {}

  /** Resolves when the database answers `select 1`; rejects when it fails or does not answer in time. */
  async check(): Promise<void> {
    if (!this.inFlight) {
      const running = sql`select 1`.execute(this.db).then(() => undefined);
      this.inFlight = running;
      const clear = () => {
        if (this.inFlight === running) this.inFlight = null;
      };
      running.then(clear, clear);
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the database did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    try {
      await Promise.race([this.inFlight, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
