import { execFileSync } from 'node:child_process';
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
  /** Superuser URL for the given database. */
  adminUrl(database?: string): string;
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
  const run = (cmd: string, args: string[]) =>
    execFileSync(asRoot ? 'runuser' : path.join(bin, cmd), asRoot ? ['-u', 'postgres', '--', path.join(bin, cmd), ...args] : args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      cwd: dir,
    });
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--locale=C']);
  const port = await freePort();
  // Tests trade durability for speed; benchmarks keep PostgreSQL's defaults (synchronous_commit on).
  const fast = opts.durable ? '' : ' -c fsync=off -c full_page_writes=off -c synchronous_commit=off';
  run('pg_ctl', [
    '-D', data, '-w', '-t', '60', '-l', path.join(dir, 'server.log'),
    '-o', `-p ${port} -h 127.0.0.1 -k ${dir} -c max_connections=300${fast}`,
    'start',
  ]);
  let stopped = false;
  return {
    host: '127.0.0.1',
    port,
    adminUrl: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
