import { existsSync, readFileSync } from 'node:fs';
import type { Pause } from './stall-trace.mjs';
import { quantile } from './support.js';

/**
 * Where the paced load's slowest submissions come from: `npx tsx bench/paced-summary.ts <file>` after a
 * `BENCH_PACED_TRACE=<file>` run of bench/decisions. Prints the load's percentiles, then its episodes (the
 * submissions slower than its p99, grouped while less than 300 ms apart), and beside each the pauses of the
 * API and of the load client from its start less 100 ms to its end: GC by V8's kind and event-loop stalls
 * over 15 ms. A submission due in a pause waits for it, and so do those due until its backlog is worked off.
 */
const file = process.argv[2];
if (!file) {
  console.error('usage: npx tsx bench/paced-summary.ts <BENCH_PACED_TRACE file>');
  process.exit(2);
}
const read = <T>(name: string): T => {
  if (!existsSync(name)) {
    console.error(`${name} is missing: run BENCH_PACED_TRACE=${file} BENCH_ONLY=decisions node --import tsx bench/run.ts first`);
    process.exit(2);
  }
  return JSON.parse(readFileSync(name, 'utf8')) as T;
};
const client = read<{ submissions: Array<[number, number]>; pauses: Pause[] }>(`${file}.client.json`);
const api = read<{ pauses: Pause[] }>(`${file}.api.json`);

// In the order they were due (each agent's connection recorded its own in turn).
const submissions = [...client.submissions].sort((a, b) => a[0] - b[0]);
if (submissions.length === 0) {
  console.error(`${file}.client.json holds no submissions`);
  process.exit(2);
}
const start = submissions[0]![0];
const sorted = submissions.map(([, ms]) => ms).sort((a, b) => a - b);
const at = (q: number) => quantile(sorted, q);
const p99 = at(0.99);
console.log(
  `${submissions.length} submissions over ${((submissions.at(-1)![0] - start) / 1000).toFixed(1)} s: ` +
    `p50 ${at(0.5).toFixed(1)} ms, p90 ${at(0.9).toFixed(1)}, p99 ${p99.toFixed(1)}, max ${sorted.at(-1)!.toFixed(1)}`,
);

const episodes: Array<{ from: number; to: number; count: number; worst: number }> = [];
for (const [due, ms] of submissions) {
  if (ms <= p99) continue;
  const last = episodes.at(-1);
  if (last && due - last.to < 300) {
    last.to = Math.max(last.to, due + ms);
    last.count++;
    last.worst = Math.max(last.worst, ms);
  } else episodes.push({ from: due, to: due + ms, count: 1, worst: ms });
}

const kinds: Record<string, string> = { '1': 'scavenge', '2': 'mark-compact', '4': 'incremental marking', '8': 'weak callbacks', stall: 'stall' };
const during = (pauses: Pause[], from: number, to: number) => {
  const by = new Map<string, { n: number; ms: number; longest: number }>();
  for (const [t, ms, kind] of pauses) {
    if (t + ms < from || t > to) continue;
    const name = kinds[String(kind)] ?? String(kind);
    const s = by.get(name) ?? { n: 0, ms: 0, longest: 0 };
    s.n++;
    s.ms += ms;
    s.longest = Math.max(s.longest, ms);
    by.set(name, s);
  }
  return [...by].map(([name, s]) => `${name} ${s.n}× ${s.ms.toFixed(1)} ms (longest ${s.longest.toFixed(1)})`).join(', ') || 'none';
};

console.log(`${episodes.length} episodes hold the ${submissions.filter(([, ms]) => ms > p99).length} submissions over the p99:`);
const rows = episodes.map((e) => ({
  'at (s)': Number(((e.from - start) / 1000).toFixed(2)),
  'length (ms)': Math.round(e.to - e.from),
  'over p99': e.count,
  'worst (ms)': Number(e.worst.toFixed(1)),
  'API pauses': during(api.pauses, e.from - 100, e.to),
  'client pauses': during(client.pauses, e.from - 100, e.to),
}));
console.table(rows);
const end = submissions.reduce((latest, [t, ms]) => Math.max(latest, t + ms), start);
console.log(`over the whole load: API ${during(api.pauses, start, end)}; client ${during(client.pauses, start, end)}`);
