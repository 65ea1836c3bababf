import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { ROOT } from './processes.js';

/**
 * What the evidence bundle tests share: an archive taken apart and put back together (to tamper with one byte of
 * one file), and the two offline verifiers run as a person runs them: `tollgate evidence verify` from source and
 * scripts/verify-evidence-bundle.sh.
 */

/** The archive's files, in their order. */
export async function unpackBundle(bytes: Buffer): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  extract.end(gunzipSync(bytes));
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry) chunks.push(chunk as Buffer);
    files.set(entry.header.name, Buffer.concat(chunks));
  }
  return files;
}

/** Files back into a .tar.gz, in the order given. */
export async function packBundle(files: Map<string, Buffer>): Promise<Buffer> {
  const pack = tar.pack();
  for (const [name, content] of files) pack.entry({ name, size: content.length }, content);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  return gzipSync(Buffer.concat(chunks));
}

/** The bundle with one file's text changed by `edit` (the other files as they were). */
export async function tamper(bytes: Buffer, name: string, edit: (text: string) => string): Promise<Buffer> {
  const files = await unpackBundle(bytes);
  const before = files.get(name);
  if (!before) throw new Error(`no ${name} in the bundle`);
  const after = edit(before.toString('utf8'));
  if (after === before.toString('utf8')) throw new Error(`the edit changed nothing in ${name}`);
  files.set(name, Buffer.from(after));
  return packBundle(files);
}

/** Changes line `index` (from 0) of a JSON-lines text. */
export const editLine = (index: number, edit: (line: string) => string) => (text: string) =>
  text
    .split('\n')
    .map((line, i) => (i === index ? edit(line) : line))
    .join('\n');

/** Removes line `index` (from 0) of a JSON-lines text. */
export const dropLine = (index: number) => (text: string) =>
  text
    .split('\n')
    .filter((_, i) => i !== index)
    .join('\n');

/** Replaces exactly one occurrence of `from`, which must occur once. */
export const replaceOnce = (from: string, to: string) => (text: string) => {
  if (text.split(from).length !== 2) throw new Error(`"${from}" does not occur exactly once`);
  return text.replace(from, to);
};

const dir = mkdtempSync(path.join(os.tmpdir(), 'tollgate-bundles-'));
let written = 0;

/** Writes bytes (or JSON) to a file of its own in a temporary folder and answers its path. */
export function fileOf(content: Buffer | object, name = `bundle-${++written}.tar.gz`): string {
  const file = path.join(dir, `${++written}-${name}`);
  writeFileSync(file, Buffer.isBuffer(content) ? content : JSON.stringify(content));
  return file;
}

export interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[]): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/** `tollgate evidence <args>` from source. */
export const tollgateEvidence = (...args: string[]) => run(process.execPath, ['--import', 'tsx', 'cli.ts', 'evidence', ...args]);

/** scripts/verify-evidence-bundle.sh <file>. */
export const verifyScript = (file: string) => run('bash', [path.join(ROOT, 'scripts', 'verify-evidence-bundle.sh'), file]);
