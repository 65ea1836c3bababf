import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Summarises V8 CPU profiles (`--cpu-prof`, e.g. `BENCH_CPU_PROF=<dir> BENCH_ONLY=decisions make bench`) into a
 * Markdown table of the functions with the most self time, by share of the busy (non-idle) time, with the
 * process's idle share above it. Usage: `npx tsx bench/profile-summary.ts <dir or .cpuprofile> [top=30]`; the
 * largest profile of a directory is the busiest process's.
 */
interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [target, topArg] = process.argv.slice(2);
if (!target) {
  process.stderr.write('usage: npx tsx bench/profile-summary.ts <dir or file.cpuprofile> [top]\n');
  process.exit(2);
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
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map<string, number>();
let idle = 0;
let busy = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  const frame = byId.get(id)!.callFrame;
  if (frame.functionName === '(idle)') {
    idle += dt;
    return;
  }
  busy += dt;
  const where = frame.url ? `${frame.url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '').replace(process.cwd() + '/', '')}:${frame.lineNumber + 1}` : '';
  const key = `${frame.functionName || '(anonymous)'}\t${where}`;
  self.set(key, (self.get(key) ?? 0) + dt);
});
const top = Number(topArg ?? 30);
const lines = [
  `Profile: ${path.basename(file)}; ${(idle / (idle + busy) * 100).toFixed(1)}% idle, ${(busy / 1e6).toFixed(2)} s busy.`,
  '',
  '| # | share of busy time | function | where |',
  '|---|---|---|---|',
  ...[...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, t], i) => {
      const [fn, where] = key.split('\t');
      return `| ${i + 1} | ${((t / busy) * 100).toFixed(1)}% | \`${fn}\` | ${where ? `\`${where}\`` : ''} |`;
    }),
];
process.stdout.write(`${lines.join('\n')}\n`);
