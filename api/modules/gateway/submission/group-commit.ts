/** The most submissions one group commit carries. */
export const MAX_BATCH = 128;

/** The most batches of one organisation in flight at once: one committing while the next is decided and signed. */
export const MAX_IN_FLIGHT = 2;

/**
 * The fewest jobs that start a batch while another of the organisation is in flight. A batch costs its
 * round trips and its commit whatever its size: a few jobs wait for the batch in flight and go together
 * with what comes meanwhile, where overlapping them would only split one organisation's load into more,
 * smaller batches (and many organisations' loads already overlap one another).
 */
export const MIN_TO_OVERLAP = 4;

/**
 * What a batch receives besides its jobs: `after`, the hand-over of the batch before it while that one
 * is still in flight; `release()`, to let the next batch start (once this one needs nothing more that
 * the next one would change); `handOver(value)`, what the next batch builds on (the evidence chain's
 * head after this batch's records, once this batch's transaction holds it), or undefined when there is
 * none.
 */
export interface Pipeline<H> {
  after: Promise<H | undefined> | undefined;
  release: () => void;
  handOver: (value: H | undefined) => void;
}

interface Flight<H> {
  handedOver: Promise<H | undefined>;
  released: Promise<void>;
  done: Promise<void>;
  settled: boolean;
}

interface OrgQueue<Job> {
  jobs: Job[];
  draining: boolean;
  /** Wakes a drain waiting for a job or for its last batch to end. */
  wake?: () => void;
}

/**
 * Group commit per organisation, pipelined: the jobs that arrive while a batch runs go together as the
 * next batch (at most `maxBatch`), so one transaction and one commit serve many submissions; and the
 * next batch starts as soon as the one before releases it (once its records are signed), so it is
 * decided while the one before writes and commits, and builds on that one's hand-over (its chain
 * head). At most `maxInFlight` batches of one organisation run at once. An idle organisation's first batch
 * starts in the next turn of the event loop, with every job added in this one. `runBatch` settles every job of
 * its batch itself and never rejects; a batch that ends without releasing or handing over does both.
 */
export class GroupCommit<Job, H> {
  private readonly orgs = new Map<string, OrgQueue<Job>>();

  constructor(
    private readonly runBatch: (orgId: string, batch: Job[], pipeline: Pipeline<H>) => Promise<void>,
    private readonly maxBatch = MAX_BATCH,
    private readonly maxInFlight = MAX_IN_FLIGHT,
    private readonly minToOverlap = MIN_TO_OVERLAP,
  ) {}

  add(orgId: string, job: Job): void {
    let queue = this.orgs.get(orgId);
    if (!queue) {
      queue = { jobs: [], draining: false };
      this.orgs.set(orgId, queue);
    }
    queue.jobs.push(job);
    queue.wake?.();
    if (queue.draining) return;
    // The first batch of an idle organisation starts once this turn of the event loop has read what
    // arrived with this job, and goes with it: several requests read in one turn (the process was busy
    // while they came) would otherwise go as a batch of one, then as a batch of the rest after its round
    // trips.
    queue.draining = true;
    setImmediate(() => void this.drain(orgId, queue));
  }

  private async drain(orgId: string, queue: OrgQueue<Job>): Promise<void> {
    queue.draining = true;
    const flights: Flight<H>[] = [];
    // The batch started last. Batches end in any order (a batch's commit can be answered before the
    // commit of the one it followed), so this, not the last batch still in flight, is what the next
    // one builds on, while any batch is in flight.
    let previous: Flight<H> | undefined;
    for (;;) {
      for (let i = flights.length - 1; i >= 0; i--) if (flights[i]!.settled) flights.splice(i, 1);
      const enough = flights.length === 0 ? 1 : this.minToOverlap;
      if (queue.jobs.length < enough || flights.length >= this.maxInFlight) {
        if (flights.length === 0) break;
        // Enough jobs to start a batch beside the one in flight, or the end of a batch in flight, whichever comes first.
        await new Promise<void>((resolve) => {
          queue.wake = flights.length < this.maxInFlight ? () => queue.jobs.length >= enough && resolve() : undefined;
          void Promise.race(flights.map((f) => f.done)).then(resolve);
        });
        queue.wake = undefined;
        continue;
      }
      const batch = queue.jobs.splice(0, this.maxBatch);
      let handOver!: (value: H | undefined) => void;
      let release!: () => void;
      const flight: Flight<H> = {
        handedOver: new Promise((resolve) => (handOver = resolve)),
        released: new Promise((resolve) => (release = resolve)),
        done: Promise.resolve(),
        settled: false,
      };
      const after = flights.length > 0 ? previous?.handedOver : undefined;
      flight.done = this.runBatch(orgId, batch, { after, release, handOver }).finally(() => {
        flight.settled = true;
        release();
        handOver(undefined);
      });
      flights.push(flight);
      previous = flight;
      // The next batch gathers what arrives until this one releases it.
      await flight.released;
    }
    queue.draining = false;
    if (queue.jobs.length > 0) void this.drain(orgId, queue);
    else this.orgs.delete(orgId);
  }
}
