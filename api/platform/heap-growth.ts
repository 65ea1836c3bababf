import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the heap grow past what its last full collection kept before it collects again
 * (HEAP_GROWTH_PERCENT; docs/decisions.md D39): at 100, to twice that. V8's own choice goes up to four
 * times in a process that allocates fast and collects quickly, which is what `tollgate api` under load
 * is; its resident memory then grows with its garbage, not with what it holds. V8 reads this setting at
 * each full collection, so setting it as a command starts takes effect from the next one. 0 leaves V8's
 * own choice.
 */
export function limitHeapGrowth(percent: number): void {
  if (percent > 0) setFlagsFromString(`--heap-growing-percent=${percent}`);
}
