import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');

/** Starts `tollgate <args>` from source, as `node dist/cli.js` would run it after a build. */
export function spawnTollgate(
  args: string[],
  env: Record<string, string>,
  nodeFlags: string[] = [],
): ChildProcess & { output: () => string } {
  return spawnNode([...nodeFlags, '--import', 'tsx', 'cli.ts', ...args], env);
}

/**
 * Starts `tollgate <args>` as it ships: the compiled dist/cli.js (which `make build` makes), so a benchmark
 * measures the product and not the TypeScript loader.
 */
export function spawnBuiltTollgate(
  args: string[],
  env: Record<string, string>,
  nodeFlags: string[] = [],
): ChildProcess & { output: () => string } {
  return spawnNode([...nodeFlags, 'dist/cli.js', ...args], env);
}

function spawnNode(argv: string[], env: Record<string, string>): ChildProcess & { output: () => string } {
  const child = spawn(process.execPath, argv, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return Object.assign(child, { output: () => out });
}

/** Polls url until it answers 200, or throws after timeoutMs. */
export async function waitForHttp(
  url: string,
  timeoutMs: number,
  child?: ChildProcess & { output?: () => string },
): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (child && child.exitCode !== null) {
      throw new Error(`process exited with ${child.exitCode}: ${child.output?.() ?? ''}`);
    }
    try {
      const res = await fetch(url);
      if (res.ok) return Date.now() - started;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * Runs one of the caching build scripts (scripts/build-kube.sh, scripts/build-helm.sh): it builds
 * what is missing (minutes on a fresh machine, its progress shown on stderr) and prints the cache
 * directory last on stdout, which this answers.
 */
export async function cachedBuild(script: string, args: string[] = []): Promise<string> {
  const child = spawn('bash', [path.join(ROOT, 'scripts', script), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
    process.stderr.write(d);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  const dir = out.trim().split('\n').pop() ?? '';
  if (code !== 0 || !dir) throw new Error(`scripts/${script} failed (exit ${code}):\n${err.split('\n').slice(-40).join('\n')}`);
  return dir;
}
