// Preloaded into a process (`node --import <this file>`, bench/decisions.ts with BENCH_HEAP_SAMPLE=<file>): V8's
// sampling heap profiler (a sample about every 16 KB allocated) from start to exit, the objects collected since
// included (where `--heap-prof` keeps only those still alive at exit: not the garbage the collector spends its time
// on). At exit the profile is written to HEAP_SAMPLE_FILE; `npx tsx bench/profile-summary.ts <file>` summarises it.
// Plain JavaScript: the process measured runs as built, without tsx.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const file = process.env.HEAP_SAMPLE_FILE;
if (file) {
  const session = new Session();
  session.connect();
  // A session in the process's own thread answers at once, so the profile can be taken in the exit handler.
  session.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true });
  process.on('exit', () => {
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (!err) writeFileSync(file, JSON.stringify(result.profile));
    });
  });
}
