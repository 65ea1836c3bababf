/** The most submissions one group commit carries. */
export const MAX_BATCH = 128;

/**
 * Group commit per organisation: while one batch of an organisation runs, the next jobs queue, and
 * then go together as the next batch (at most `maxBatch`), so one transaction and one commit serve
 * many submissions. `runBatch` settles every job of its batch itself.
 */
export class GroupCommit<Job> {
  private readonly queues = new Map<string, Job[]>();
  private readonly draining = new Set<string>();

  constructor(
    private readonly runBatch: (orgId: string, batch: Job[]) => Promise<void>,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  add(orgId: string, job: Job): void {
    const queue = this.queues.get(orgId) ?? [];
    queue.push(job);
    this.queues.set(orgId, queue);
    if (!this.draining.has(orgId)) void this.drain(orgId);
  }

  private async drain(orgId: string): Promise<void> {
    this.draining.add(orgId);
    try {
      for (let queue = this.queues.get(orgId); queue && queue.length > 0; queue = this.queues.get(orgId)) {
        await this.runBatch(orgId, queue.splice(0, this.maxBatch));
      }
    } finally {
      this.draining.delete(orgId);
      this.queues.delete(orgId);
    }
  }
}
