import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/**
 * Random bytes for the ids, drawn from the system's generator 4 KB at a time (256 ids) as Node's own
 * `randomUUID` does: the `uuid` package's `v7()` draws 16 bytes with `crypto.getRandomValues` for every id,
 * about 2 µs each where a slice of the pool costs nothing (D41).
 */
const pool = new Uint8Array(4096);
let drawn = pool.length;

function random16(): Uint8Array {
  if (drawn + 16 > pool.length) {
    randomFillSync(pool);
    drawn = 0;
  }
  return pool.subarray(drawn, (drawn += 16));
}

/** The last id's millisecond and counter: ids made in one millisecond count up from a random start. */
let lastMs = -Infinity;
let counter = 0;

/**
 * A new row's id for the tables that grow with use (actions, approvals, evidence records, audit events,
 * notifications): a UUID of version 7, its first 48 bits the time in milliseconds and the other 74 random,
 * increasing within the process. Their primary keys then fill at the right edge, as a sequence's does,
 * where a random (version 4) id lands on any page of the index: in a large table, after each checkpoint,
 * nearly every insert would write that whole page to the write-ahead log again, and read it in once it
 * has left the cache (D41). The other tables keep random ids.
 *
 * Within a millisecond the 32 bits after the version count up from a random 31-bit start, as `v7()` does
 * when given no options (the package keeps that state only for calls without options, and takes its random
 * bytes from an option only); a counter that runs over moves on to the next millisecond.
 */
export function timeOrderedId(): string {
  const random = random16();
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    counter = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
  } else {
    counter = (counter + 1) | 0;
    if (counter === 0) lastMs++;
  }
  return v7({ random, msecs: lastMs, seq: counter });
}
