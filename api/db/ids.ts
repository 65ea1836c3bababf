import { v7 } from 'uuid';

/**
 * A new row's id for the tables that grow with use (actions, approvals, evidence records, audit events,
 * notifications): a UUID of version 7, its first 48 bits the time in milliseconds and the other 74 random,
 * increasing within the process. Their primary keys then fill at the right edge, as a sequence's does,
 * where a random (version 4) id lands on any page of the index: in a large table, after each checkpoint,
 * nearly every insert would write that whole page to the write-ahead log again, and read it in once it
 * has left the cache (D41). The other tables keep random ids.
 */
export function timeOrderedId(): string {
  return v7();
}
