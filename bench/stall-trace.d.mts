/** A pause: [start in ms since the epoch, ms, V8's GC kind or "stall"] (stall-trace.mjs). */
export type Pause = [at: number, ms: number, kind: number | string];

/** Records this process's pauses from now until `stop()`, which answers them. */
export function watchPauses(): { stop: () => Pause[] };
