// A process's pauses: its GC pauses (with V8's kind: 1 scavenge, 2 mark-compact, 4 incremental marking, 8 weak
// callbacks) and its event-loop stalls over 15 ms (kind "stall", from a 5 ms timer), as [start in ms since the
// epoch, ms, kind]. Preloaded into the API (`node --import <this file>`, bench/decisions.ts with
// BENCH_PACED_TRACE=<file>), it records them from start to exit and writes them to STALL_TRACE_FILE; the decisions
// benchmark records the load client's over the paced load with `watchPauses`. `npx tsx bench/paced-summary.ts
// <file>` lays the paced load's slowest submissions beside both.
// Plain JavaScript: the process measured runs as built, without tsx.
import { writeFileSync } from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';

/** Records this process's pauses from now until `stop()`, which answers them. */
export function watchPauses() {
  const pauses = [];
  const round = (ms) => Number(ms.toFixed(2));
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push([round(performance.timeOrigin + e.startTime), round(e.duration), e.detail?.kind]);
  });
  gc.observe({ entryTypes: ['gc'] });
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    if (now - last > 15) pauses.push([round(performance.timeOrigin + last), round(now - last), 'stall']);
    last = now;
  }, 5).unref();
  return {
    stop: () => {
      gc.disconnect();
      clearInterval(ticker);
      return pauses;
    },
  };
}

const file = process.env.STALL_TRACE_FILE;
if (file) {
  const watch = watchPauses();
  process.on('exit', () => writeFileSync(file, JSON.stringify({ pauses: watch.stop() })));
}
