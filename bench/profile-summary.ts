import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { LoadWindow } from './decisions.js';

/**
 * Summarises V8 CPU profiles (`--cpu-prof`, e.g. `BENCH_CPU_PROF=<dir> BENCH_ONLY=decisions make bench`) into a
 * Markdown table of the functions with the most self time, by share of the busy (non-idle) time, with the
 * process's idle share above it. Usage: `npx tsx bench/profile-summary.ts <dir or .cpuprofile> [top=30]`; the
 * largest profile of a directory is the busiest process's. Given a `.heapprofile` (`BENCH_HEAP_SAMPLE=<file>`,
 * bench/heap-sample.mjs), the functions that allocated the most, garbage included, by share of all allocated.
 * With a load's name after `top` (`npx tsx bench/profile-summary.ts <dir> 30 "ten organisations"`), the CPU profile's
 * samples taken during that load alone, by the windows bench/decisions writes beside its profile (`loads.json`).
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: Node[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
interface HeapNode {
  callFrame: Node['callFrame'];
  selfSize: number;
  children: HeapNode[];
}

/** A function's place: its file (relative to the repository or node_modules) and line. */
const whereOf = (frame: Node['callFrame']) =>
  frame.url ? `${frame.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '').replace(process.cwd() + '/', '')}:${frame.lineNumber + 1}` : '';
const keyOf = (frame: Node['callFrame']) => `${frame.functionName || '(anonymous)'}\t${whereOf(frame)}`;

/** The `top` keys of `amounts` as the rows of a Markdown table, each by share of `total`. */
function table(amounts: Map<string, number>, total: number, top: number, column: string): string[] {
  return [
    `| # | ${column} | function | where |`,
    '|---|---|---|---|',
    ...[...amounts.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([key, amount], i) => {
        const [fn, where] = key.split('\t');
        return `| ${i + 1} | ${((amount / total) * 100).toFixed(1)}% | \`${fn}\` | ${where ? `\`${where}\`` : ''} |`;
      }),
  ];
}

const [target, topArg, loadName] = process.argv.slice(2);
if (!target) {
  process.stderr.write('usage: npx tsx bench/profile-summary.ts <dir, file.cpuprofile or file.heapprofile> [top] [load]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
if (target.endsWith('.heapprofile')) {
  const heap = JSON.parse(readFileSync(target, 'utf8')) as { head: HeapNode };
  const allocated = new Map<string, number>();
  let total = 0;
  const walk = (node: HeapNode) => {
    total += node.selfSize;
    const key = keyOf(node.callFrame);
    allocated.set(key, (allocated.get(key) ?? 0) + node.selfSize);
    node.children.forEach(walk);
  };
  walk(heap.head);
  const lines = [`Heap sample: ${path.basename(target)}; ${(total / 2 ** 20).toFixed(0)} MB allocated while it ran (sampled).`, '', ...table(allocated, total, top, 'share of allocated bytes')];
  process.stdout.write(`${lines.join('\n')}\n`);
  process.exit(0);
}
const file = target.endsWith('.cpuprofile')
  ? target
  : readdirSync(target)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(target, f))
      .sort((a, b) => readFileSync(b).length - readFileSync(a).length)[0];
if (!file) {
  process.stderr.write(`no .cpuprofile in ${target}\n`);
  process.exit(1);
}
/** The window of the load named `name` (bench/decisions' loads.json beside the profile), or the whole profile. */
function windowOf(name: string | undefined): LoadWindow | undefined {
  if (!name) return undefined;
  const loads = path.join(statSync(target!).isDirectory() ? target! : path.dirname(target!), 'loads.json');
  if (!existsSync(loads)) {
    process.stderr.write(`no ${loads}: a load's window is written there by a BENCH_CPU_PROF run of bench/decisions\n`);
    process.exit(1);
  }
  const windows = JSON.parse(readFileSync(loads, 'utf8')) as LoadWindow[];
  const found = windows.find((w) => w.load === name);
  if (!found) {
    process.stderr.write(`no load "${name}" in ${loads}; it has: ${windows.map((w) => `"${w.load}"`).join(', ')}\n`);
    process.exit(1);
  }
  return found;
}
const window = windowOf(loadName);
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
let idle = 0;
let busy = 0;
// A sample's time: the profile's start plus the deltas up to it, on the clock of the windows.
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  at += dt;
  if (window && (at < window.from_us || at > window.to_us)) return;
  const frame = byId.get(id)!.callFrame;
  if (frame.functionName === '(idle)') {
    idle += dt;
    return;
  }
  busy += dt;
  const key = keyOf(frame);
  self.set(key, (self.get(key) ?? 0) + dt);
});
if (idle + busy === 0) {
  process.stderr.write(`${file} has no samples${window ? ` in the load "${window.load}"` : ''}\n`);
  process.exit(1);
}
const lines = [
  `Profile: ${path.basename(file)}${window ? `, the load "${window.load}" alone (${((window.to_us - window.from_us) / 1e6).toFixed(1)} s)` : ''}; ${(idle / (idle + busy) * 100).toFixed(1)}% idle, ${(busy / 1e6).toFixed(2)} s busy.`,
  '',
  ...table(self, busy, top, 'share of busy time'),
];
process.stdout.write(`${lines.join('\n')}\n`);
