import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely';
import type pg from 'pg';
import { GENERIC_PLANS, piped, poolOf, scopeText, type Ahead, type Db, type Tx } from './database.js';
import type { DB } from './schema.js';

/** One organisation's part of a shared transaction: what inScopePiped takes for one organisation. */
export interface ScopedPart<F, T, A> {
  orgId: string;
  first: CompiledQuery<F>;
  body: (tx: Tx, first: F[]) => Promise<{ last?: CompiledQuery; written?: () => void; result: T }>;
  ahead?: Ahead<A>;
}

/** The shared transaction rolled back for another part's failure: nothing of this part stayed, and it may run again on its own. */
export class SharedRollback extends Error {
  constructor() {
    super('the shared transaction rolled back for another part');
  }
}

/**
 * Several organisations' parts in one transaction on one connection, in two writes as inScopePiped runs
 * one: every part's `ahead`, `begin`, then for each part its scope and its `first`; then each `body` in
 * turn, on a Kysely that sets its part's scope again before its first statement, if it sends one; then
 * for each part its scope and its `last`, and one `commit`. Every statement of a part runs in its own
 * organisation's scope, so row-level security holds it to that organisation as in a transaction of its
 * own. The parts go in organisation order, so two such transactions (in any process) take the
 * organisations' locks in the same order. A failure rolls back the whole transaction: the part that
 * failed is answered with its error, the others with SharedRollback (a failed commit answers every part
 * with its error). Answers each part's result in the parts' order.
 */
export async function inScopesPiped<F, T, A>(db: Db, parts: ScopedPart<F, T, A>[]): Promise<PromiseSettledResult<T>[]> {
  const pool = poolOf(db);
  if (!pool) throw new Error('a shared transaction runs on PostgreSQL');
  const order = parts.map((_, i) => i).sort((a, b) => (parts[a]!.orgId < parts[b]!.orgId ? -1 : parts[a]!.orgId > parts[b]!.orgId ? 1 : 0));
  const failed = (index: number | undefined, reason: unknown): PromiseSettledResult<T>[] =>
    parts.map((_, i) => ({ status: 'rejected', reason: index === undefined || i === index ? reason : new SharedRollback() }));
  const client = await pool.connect();
  // A client whose transaction may still be open, or whose pipeline failed half-way, is not lent again.
  let unclean: Error | undefined;
  const rollback = () => client.query('rollback').catch((err: Error) => (unclean = err));
  try {
    const aheads = order.filter((i) => parts[i]!.ahead);
    const opening = await piped(client, [
      ...aheads.map((i) => parts[i]!.ahead!.query),
      `begin; select ${GENERIC_PLANS}`,
      ...order.flatMap((i) => [scopeText({ orgId: parts[i]!.orgId }), parts[i]!.first]),
    ]);
    aheads.forEach((i, k) => {
      const went = opening[k]!;
      if (went.status === 'fulfilled') parts[i]!.ahead!.done(went.value.rows as A[]);
    });
    // Whose statement failed first: an `ahead`, `begin` (no one's), or a part's scope or `first`.
    const owners = [...aheads, undefined, ...order.flatMap((i) => [i, i])];
    const firstFailure = opening.findIndex((r) => r.status === 'rejected');
    if (firstFailure >= 0) {
      await rollback();
      return failed(owners[firstFailure], (opening[firstFailure] as PromiseRejectedResult).reason);
    }

    const scope = { current: parts[order.at(-1)!]!.orgId };
    const outs = new Map<number, { last?: CompiledQuery; written?: () => void; result: T }>();
    for (const [k, i] of order.entries()) {
      const rows = (opening[aheads.length + 2 + 2 * k] as PromiseFulfilledResult<pg.QueryResult>).value.rows as F[];
      try {
        outs.set(i, await parts[i]!.body(scopedOn(client, parts[i]!.orgId, scope), rows));
      } catch (err) {
        await rollback();
        return failed(i, err);
      }
    }

    const writing = order.filter((i) => outs.get(i)!.last);
    const closing = await piped(
      client,
      [...writing.flatMap((i) => [scopeText({ orgId: parts[i]!.orgId }), outs.get(i)!.last!]), 'commit'],
      writing.flatMap((i) => [undefined, outs.get(i)!.written]),
    );
    const committed = closing.at(-1)!;
    if (committed.status === 'rejected') unclean = committed.reason as Error;
    // A failed statement aborts the transaction, and `commit` ends it as a rollback.
    const wrongWrite = closing.findIndex((r) => r.status === 'rejected');
    if (wrongWrite >= 0 && wrongWrite < closing.length - 1) return failed(writing[Math.floor(wrongWrite / 2)], (closing[wrongWrite] as PromiseRejectedResult).reason);
    if (committed.status === 'rejected') return failed(undefined, committed.reason);
    return parts.map((_, i) => ({ status: 'fulfilled', value: outs.get(i)!.result }));
  } finally {
    client.release(unclean);
  }
}

/**
 * A Kysely on the shared transaction's client for one part's statements: the part's scope is set again
 * before a statement when another part's was set last.
 */
function scopedOn(client: pg.PoolClient, orgId: string, scope: { current: string }): Tx {
  const held = {
    query: async (text: string, values?: unknown[]) => {
      if (scope.current !== orgId) {
        await client.query(scopeText({ orgId }));
        scope.current = orgId;
      }
      return client.query(text, values);
    },
    release: () => undefined,
  };
  return new Kysely<DB>({
    dialect: new PostgresDialect({ pool: { connect: async () => held, end: async () => undefined } as unknown as pg.Pool }),
  }) as unknown as Tx;
}

/**
 * Gathers the parts that start in the same turn of the event loop into one shared transaction
 * (inScopesPiped), at most `maxParts` in one; a part alone runs as inScopePiped would. Many small
 * organisations' batches then cost one transaction's round trips and commit between them, where each
 * would cost the same as a large one (D36).
 */
export class SharedTransactions<F, T, A> {
  private forming: Array<{ part: ScopedPart<F, T, A>; resolve: (value: T) => void; reject: (reason: unknown) => void }> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly db: Db,
    private readonly alone: (part: ScopedPart<F, T, A>) => Promise<T>,
    /** Told how many parts each transaction carries. */
    private readonly carried?: (parts: number) => void,
    private readonly maxParts = MAX_SHARED_PARTS,
    private readonly maxInFlight = MAX_SHARED_IN_FLIGHT,
  ) {}

  run(part: ScopedPart<F, T, A>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.forming.push({ part, resolve, reject });
      if (this.forming.length >= this.maxParts && this.inFlight < this.maxInFlight) this.flush();
      else this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.forming.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const group = this.forming.splice(0, this.maxParts);
    if (group.length === 0) return;
    this.carried?.(group.length);
    this.inFlight++;
    const done = () => {
      this.inFlight--;
      this.schedule();
    };
    if (group.length === 1) {
      this.alone(group[0]!.part).then(group[0]!.resolve, group[0]!.reject).finally(done);
      return;
    }
    inScopesPiped(this.db, group.map((g) => g.part))
      .then(
        (results) => results.forEach((r, i) => (r.status === 'fulfilled' ? group[i]!.resolve(r.value) : group[i]!.reject(r.reason))),
        (err: unknown) => group.forEach((g) => g.reject(err)),
      )
      .finally(done);
  }
}

/** The most parts one shared transaction carries. */
export const MAX_SHARED_PARTS = 16;

/** The most shared transactions in flight at once: parts that come meanwhile wait and go together in the next. */
export const MAX_SHARED_IN_FLIGHT = 2;
