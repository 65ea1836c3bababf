import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * A throwaway PostgreSQL cluster (Debian's postgresql-15 or newer): initdb and pg_ctl in a temp
 * dir, listening on 127.0.0.1 at a free port. PostgreSQL refuses to run as root, so as root the
 * server runs as the `postgres` system user.
 */
export interface Cluster {
  host: string;
  port: number;
  /** The cluster's data directory (its postmaster.pid names the server's process). */
  dataDir: string;
  /** Superuser URL for the given database. */
  adminUrl(database?: string): string;
  /**
   * Stops the server and keeps its data: `immediate` is a crash (no checkpoint; the WAL is replayed on
   * the next start), `fast` a clean shutdown that ends every session.
   */
  halt(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Starts the server again on the same data directory and port, and waits until it accepts connections. */
  resume(): Promise<void>;
  /** Stops the server for good and removes its data. */
  stop(): void;
}

export function postgresBinDir(): string {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .map(Number)
        .filter((v) => v >= 15 && existsSync(path.join(base, String(v), 'bin', 'initdb')))
        .sort((a, b) => b - a)
    : [];
  if (versions.length === 0) {
    throw new Error('PostgreSQL 15 or newer is not installed (apt-get install postgresql-15), or set DATABASE_URL');
  }
  return path.join(base, String(versions[0]), 'bin');
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export async function startCluster(opts: { durable?: boolean } = {}): Promise<Cluster> {
  const bin = postgresBinDir();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-pg-'));
  const data = path.join(dir, 'data');
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const command = (cmd: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]] : [path.join(bin, cmd), args];
  const run = (cmd: string, args: string[]) => execFileSync(...command(cmd, args), { stdio: ['ignore', 'pipe', 'pipe'], cwd: dir });
  // Without blocking the event loop: clients in the same process keep going while the server stops or starts.
  const runAsync = (cmd: string, args: string[]) =>
    new Promise<void>((resolve, reject) =>
      execFile(...command(cmd, args), { cwd: dir }, (err, _out, stderr) => (err ? reject(new Error(`${cmd}: ${err.message}\n${stderr}`)) : resolve())),
    );
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--locale=C']);
  const port = await freePort();
  // Tests trade durability for speed; benchmarks and crash tests keep PostgreSQL's defaults (synchronous_commit on).
  const fast = opts.durable ? '' : ' -c fsync=off -c full_page_writes=off -c synchronous_commit=off';
  const startArgs = [
    '-D', data, '-w', '-t', '60', '-l', path.join(dir, 'server.log'),
    '-o', `-p ${port} -h 127.0.0.1 -k ${dir} -c max_connections=300${fast}`,
    'start',
  ];
  run('pg_ctl', startArgs);
  let running = true;
  let stopped = false;
  return {
    host: '127.0.0.1',
    port,
    dataDir: data,
    adminUrl: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async halt(mode = 'immediate') {
      if (!running) return;
      running = false;
      await runAsync('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
    },
    async resume() {
      if (running || stopped) return;
      await runAsync('pg_ctl', startArgs);
      running = true;
    },
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        if (running) run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      } finally {
        running = false;
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
