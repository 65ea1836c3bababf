import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../test/support/processes.js';

/** A target a figure is held to: at least (`>=`) or at most (`<=`) `value`. */
export interface Target {
  op: '>=' | '<=';
  value: number;
}

/** One measured figure of a benchmark run, with its unit and, where the issues set one, its target. */
export interface Figure {
  bench: string;
  figure: string;
  value: number;
  unit: string;
  target?: Target;
}

const figures: Figure[] = [];

export const atLeast = (value: number): Target => ({ op: '>=', value });
export const atMost = (value: number): Target => ({ op: '<=', value });

/** Records a figure for the run's results file and its closing table. */
export function record(bench: string, figure: string, value: number, unit: string, target?: Target): void {
  figures.push({ bench, figure, value, unit, ...(target ? { target } : {}) });
}

const met = (f: Figure) => (f.target ? (f.target.op === '>=' ? f.value >= f.target.value : f.value <= f.target.value) : undefined);

/**
 * Writes the run's figures to `.cache/bench/<time>.json` (and `latest.json`) with the machine they were
 * measured on, and prints them beside their targets. Answers the file written, or nothing when no
 * figure was recorded.
 */
export function writeResults(commit: string): string | undefined {
  if (figures.length === 0) return undefined;
  const at = new Date();
  const run = {
    at: at.toISOString(),
    commit,
    machine: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model ?? 'unknown', memory_gb: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    figures: figures.map((f) => ({ ...f, ...(f.target ? { met: met(f) } : {}) })),
  };
  const dir = path.join(ROOT, '.cache', 'bench');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${at.toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(run, null, 2) + '\n');
  writeFileSync(path.join(dir, 'latest.json'), JSON.stringify(run, null, 2) + '\n');
  console.log(`\nfigures beside their targets (${run.machine.cpus} cores, ${run.machine.cpu_model}; ${path.relative(ROOT, file)})`);
  console.table(
    figures.map((f) => ({
      bench: f.bench,
      figure: f.figure,
      value: `${f.value} ${f.unit}`,
      target: f.target ? `${f.target.op} ${f.target.value} ${f.unit}` : '',
      met: f.target ? (met(f) ? 'yes' : 'NO') : '',
    })),
  );
  return file;
}
