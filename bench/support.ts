import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { migrate } from '../api/db/database.js';
import { postgresBinDir, startCluster, type Cluster } from '../test/support/postgres-cluster.js';
import { OWNER_ROLE, ROLE_PASSWORD, RUNTIME_ROLE, withDatabase } from '../test/support/pg-urls.js';

/** A durable PostgreSQL cluster (synchronous_commit on) with a migrated `tollgate` database. */
export async function benchDatabase(): Promise<{ cluster: Cluster; runtimeUrl: string }> {
  const cluster = await startCluster({ durable: true });
  const admin = new pg.Client({ connectionString: cluster.adminUrl() });
  await admin.connect();
  for (const role of [OWNER_ROLE, RUNTIME_ROLE]) await admin.query(`create role ${role} login password '${ROLE_PASSWORD}'`);
  await admin.query(`create database tollgate owner ${OWNER_ROLE}`);
  await admin.end();
  const owner = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: withDatabase(cluster.adminUrl(), 'tollgate', OWNER_ROLE) }) }),
  });
  await migrate(owner, RUNTIME_ROLE);
  await owner.destroy();
  return { cluster, runtimeUrl: withDatabase(cluster.adminUrl(), 'tollgate', RUNTIME_ROLE) };
}

/**
 * A new organisation on the enterprise plan (set in SQL as the owner would, given the database's
 * `adminUrl`; on the embedded database it stays on the plan new organisations start on) and its
 * administrator's session: `call(method, url, body)` sends a signed-in request to /api/v1 and answers its JSON.
 */
export async function adminSession(base: string, adminUrl: string | undefined, name: string) {
  const email = `bench-${randomUUID()}@example.com`;
  const login = await fetch(`${base}/api/v1/auth/dev-login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }) });
  const jar = () => login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const csrf = ((await login.json()) as { csrf_token: string }).csrf_token;
  const onboard = await fetch(`${base}/api/v1/tenants/onboard`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: jar(), 'x-csrf-token': csrf },
    body: JSON.stringify({ name, slug: `bench-${randomUUID().slice(0, 8)}`, primary_region: 'eu-west', admin_display_name: 'Bench Admin' }),
  });
  const cookie = onboard.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const session = (await onboard.json()) as { csrf_token: string; tenant: { id: string; slug: string } };
  if (adminUrl) {
    const org = new pg.Client({ connectionString: adminUrl });
    await org.connect();
    await org.query(`update organisations set plan = 'enterprise' where id = $1`, [session.tenant.id]);
    await org.end();
  }
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${base}/api/v1${url}`, {
      method,
      headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': session.csrf_token },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<any>;
  };
  return { call, tenant: session.tenant };
}

/**
 * An agent bound to one tool (`invoke`), its identity's credential written into `dir` as the files
 * `client-id` and `client-secret` (what the sidecar reads), and a token exchanged for it.
 */
export async function boundAgent(base: string, call: (method: string, url: string, body?: unknown) => Promise<any>, toolId: string, name: string, dir: string) {
  const agent = await call('POST', '/agents', { name });
  await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: toolId, actions: ['invoke'] });
  const identity = await call('POST', `/agents/${agent.id}/identities`);
  writeFileSync(path.join(dir, 'client-id'), identity.client_id);
  writeFileSync(path.join(dir, 'client-secret'), identity.client_secret);
  const res = await fetch(`${base}/api/v1/identities/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
  });
  return { agentId: agent.id as string, token: ((await res.json()) as { access_token: string }).access_token };
}

/** User and system CPU milliseconds of these processes so far (/proc/<pid>/stat, clock ticks of 10 ms). */
export function cpuOf(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    // A process that ended counts nothing.
    const fields = statFields(pid);
    if (fields) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * 10;
}

/**
 * User and system CPU milliseconds of a PostgreSQL server so far: its postmaster (named by the data
 * directory's postmaster.pid), the backends running now, and those that ended (counted in the
 * postmaster's children's time once it has reaped them).
 */
export function postgresCpuOf(dataDir: string): number {
  const postmaster = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const backends = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(statFields(Number(entry))?.[1]) === postmaster)
    .map(Number);
  const reaped = statFields(postmaster);
  return cpuOf([postmaster, ...backends]) + (reaped ? (Number(reaped[13]) + Number(reaped[14])) * 10 : 0);
}

/** The fields of /proc/<pid>/stat after the command's name (state first), or undefined once it has ended. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** A process's resident memory now and at its peak (VmRSS, VmHWM), in MB to a tenth (/proc/<pid>/status). */
export function rssOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  const mb = (k: number) => Math.round((k / 1024) * 10) / 10;
  return { rss: mb(kb('VmRSS')), peak: mb(kb('VmHWM')) };
}

/** The median and the 99th percentile of a list of latencies. */
export function percentiles(ms: number[]): { p50: number; p99: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
}

/** The value at quantile `q` (0 to 1) of a list sorted in ascending order (the one `percentiles` answers). */
export function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * The samples of the Prometheus text at `url` (prom-client's: no timestamps), by name with its labels as
 * written, e.g. `tollgate_sidecar_added_latency_seconds_count{kind="mcp_call"}`.
 */
export async function metricSamples(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(url)).text();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

/**
 * The write-ahead log a cluster wrote between two positions, as pg_waldump accounts for it by kind of
 * record: its table (`text`), the bytes of its records, full-page images included (`total`), and of those
 * images alone (`fullPages`). `start` may be `pg_current_wal_insert_lsn()`; `end` must be written already
 * (`pg_current_wal_lsn()`): pg_waldump reads the files, and a record inserted but not yet written there
 * (the insert position runs ahead of the write, with any background writes) stops it with an error.
 */
export function walBetween(dataDir: string, start: string, end: string): { text: string; total: number; fullPages: number } {
  const text = execFileSync(path.join(postgresBinDir(), 'pg_waldump'), ['--stats=record', '-p', path.join(dataDir, 'pg_wal'), '-s', start, '-e', end], {
    encoding: 'utf8',
  });
  const totals = /^Total\s+\d+\s+(\d+)\s+\[[\d.]+%\]\s+(\d+)/m.exec(text);
  if (!totals) throw new Error(`pg_waldump said: ${text}`);
  return { text, total: Number(totals[1]) + Number(totals[2]), fullPages: Number(totals[2]) };
}
