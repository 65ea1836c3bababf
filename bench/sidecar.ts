import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { SIDECAR_NODE_OPTIONS } from '../controller/webhook/inject.js';
import { freePort } from '../test/support/postgres-cluster.js';
import { ROOT, spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { atMost, record } from './results.js';
import { adminSession, benchDatabase, boundAgent, cpuOf, rssOf } from './support.js';

type Tollgate = ReturnType<typeof spawnBuiltTollgate>;
/** The sidecar runs with the V8 options the injection webhook gives it (NODE_OPTIONS in the pod). */
const SIDECAR_FLAGS = SIDECAR_NODE_OPTIONS.split(' ');

const rssMb = (pid: number) => rssOf(pid).rss;

/**
 * Unmeasured load just before a process's measured halves: long enough for V8 to have optimised the request path
 * (after start-up, or again after an idle GC, it takes some 5-6 s at 500 requests/s).
 */
const WARM_UP_SECONDS = 8;

/** Samples a process's RSS every 100 ms while `during` runs: the highest seen. */
async function peakRss<T>(pid: number, during: Promise<T>): Promise<{ value: T; peakMb: number }> {
  let peak = rssMb(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
  try {
    return { value: await during, peakMb: peak };
  } finally {
    clearInterval(timer);
  }
}

/** A process's CPU time so far (user and system), in seconds. */
const cpuSeconds = (pid: number) => cpuOf([pid]) / 1000;

/**
 * bench/sidecar: the same allowed submission (`crm.lookup_customer`, executed by the API) at a fixed
 * rate, once straight to `POST /api/v1/actions` with the agent's token and once through `tollgate
 * sidecar` (`POST /v1/actions`, which adds the token, the correlation ID and the idempotency key), over
 * each transport an agent can use (the Unix socket, the loopback port), and the latency the hop adds at
 * p50 and p99; beside it the sidecar's CPU time per 1,000 requests/s, its resident memory idle and under
 * load, and its start-up time to `/healthz`. The processes are dist/cli.js, as shipped.
 */
export async function benchSidecar(opts: { seconds: number; rate: number; connections: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: Tollgate | undefined;
  let sidecar: Tollgate | undefined;
  try {
    const port = await freePort();
    api = spawnBuiltTollgate(['api'], {
      PORT: String(port),
      DATABASE_URL: runtimeUrl,
      DATABASE_POOL_MAX: '16',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_GATEWAY_PER_MINUTE: '1000000',
      RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
      RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);
    const { call } = await adminSession(base, cluster.adminUrl('tollgate'), 'Bench sidecar');
    const tools = (await call('GET', '/tools')).items as { id: string; tool_key: string }[];
    const crm = tools.find((t) => t.tool_key === 'crm.lookup_customer')!;
    const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-sidecar-'));
    const { token } = await boundAgent(base, call, crm.id, 'Bench sidecar agent', dir);

    const sidecarPort = await freePort();
    const socketDir = mkdtempSync(path.join(tmpdir(), 'tg-bench-sock-'));
    const socketPath = path.join(socketDir, 'sidecar.sock');
    sidecar = spawnBuiltTollgate(
      ['sidecar'],
      {
        TOLLGATE_API_URL: base,
        TOLLGATE_IDENTITY_DIR: dir,
        TOLLGATE_SIDECAR_PORT: String(sidecarPort),
        TOLLGATE_SIDECAR_SOCKET: socketPath,
        TOLLGATE_SIDECAR_METRICS_PORT: 'off',
        LOG_LEVEL: 'warn',
      },
      SIDECAR_FLAGS,
    );
    await waitForHttp(`http://127.0.0.1:${sidecarPort}/healthz`, 30_000, sidecar);

    const body = JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } });
    const run = (url: string, headers: () => Record<string, string>, socket?: string) =>
      autocannon({
        url,
        ...(socket ? { socketPath: socket } : {}),
        connections: opts.connections,
        duration: opts.seconds,
        overallRate: opts.rate,
        requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body, headers: { 'content-type': 'application/json', ...headers() } }) }],
      }).then((r) => {
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`sidecar bench: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      });
    const direct = () => ({ authorization: `Bearer ${token}`, 'idempotency-key': `bench-${randomUUID()}` });
    const hopUrl = `http://127.0.0.1:${sidecarPort}/v1/actions`;
    // Warm both paths (JIT, connections, the sidecar's token), then measure.
    await run(`${base}/api/v1/actions`, direct);
    await run(hopUrl, () => ({}), socketPath);
    const straight = await run(`${base}/api/v1/actions`, direct);
    const rows: Record<string, unknown>[] = [];
    for (const transport of ['unix socket', 'tcp loopback'] as const) {
      const cpuBefore = cpuSeconds(sidecar.pid!);
      const hop = await run(hopUrl, () => ({}), transport === 'unix socket' ? socketPath : undefined);
      const cpu = cpuSeconds(sidecar.pid!) - cpuBefore;
      rows.push({
        path: `in front of the real API, ${transport} (autocannon, 1 ms resolution)`,
        rate_per_second: opts.rate,
        direct_p50_ms: straight.latency.p50,
        direct_p99_ms: straight.latency.p99,
        sidecar_p50_ms: hop.latency.p50,
        sidecar_p99_ms: hop.latency.p99,
        added_p50_ms: Number((hop.latency.p50 - straight.latency.p50).toFixed(2)),
        added_p99_ms: Number((hop.latency.p99 - straight.latency.p99).toFixed(2)),
        sidecar_cpu_s_per_1000_rps: Number(((cpu / opts.seconds) * (1000 / hop.requests.average)).toFixed(3)),
      });
    }
    rmSync(socketDir, { recursive: true, force: true });
    const isolated = await isolatedHop(dir, opts);
    return [...isolated, ...rows];
  } finally {
    await stop(sidecar);
    await stop(api);
    cluster.stop();
  }
}

/**
 * The floor of a hop on this machine: a bare forwarder with the sidecar's transports (node:http on the loopback port
 * and a Unix socket) and its client (one keep-alive undici Pool, no pipelining), that reads the body, sends it to
 * the API and answers what came back; no token, keys, breaker, timers, metrics or logging. Run with the sidecar's
 * V8 options beside it, what the sidecar costs above this is its own; what this costs is Node, the kernel and the
 * machine (each paced call wakes both processes), which no change to the sidecar's code removes.
 */
const FLOOR_FORWARDER = `
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
const { Pool } = createRequire(process.env.FLOOR_ROOT + '/package.json')('undici');
const pool = new Pool(process.env.FLOOR_API, { pipelining: 1, keepAliveTimeout: 30000 });
const handle = (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    if (req.url === '/healthz') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    const answer = await pool.request({ method: 'POST', path: '/api/v1/actions', headers: { 'content-type': 'application/json', authorization: 'Bearer stub-token', 'idempotency-key': 'floor-key-0001' }, body: Buffer.concat(chunks) });
    const text = await answer.body.text();
    res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(text);
  });
};
createServer(handle).listen(Number(process.env.FLOOR_PORT), '127.0.0.1');
createServer(handle).listen(process.env.FLOOR_SOCKET);
process.on('SIGTERM', () => process.exit(0));
`;

/** Percentile of sorted values. */
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** Milliseconds from spawning `tollgate sidecar` to its first 200 on `/healthz` (polled every 2 ms). */
async function startUpMs(env: Record<string, string>, port: number): Promise<number> {
  const started = performance.now();
  const child = spawnBuiltTollgate(['sidecar'], { ...env, TOLLGATE_SIDECAR_PORT: String(port) }, SIDECAR_FLAGS);
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the sidecar exited: ${child.output()}`);
      const ok = await new Promise<boolean>((resolve) => {
        const req = get(`http://127.0.0.1:${port}/healthz`, (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        });
        req.on('error', () => resolve(false));
      });
      if (ok) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    await stop(child);
  }
}

/**
 * The hop alone: the sidecar in front of a stand-in for the API that answers at once with a fixed
 * submission result, so that the API's own variance (milliseconds) does not hide the sidecar's cost
 * (fractions of one). A paced client sends `rate` requests a second, timing each with hrtime, straight to
 * the stand-in and through the sidecar over each transport; the difference of the percentiles is what the
 * hop adds. Also here, where nothing else runs in the sidecar: its start-up time (median of seven starts),
 * its RSS 3 s after start and idle (45 s, no request yet), and its peak RSS under the load.
 */
async function isolatedHop(identityDir: string, opts: { seconds: number; rate: number }) {
  const answer = JSON.stringify({
    action: { id: randomUUID(), status: 'executed' },
    decision: { decision: 'allow', reason_codes: [] },
    execution: { status: 'succeeded', output_redacted: { customer: 'ACME' } },
    approval: null,
    replayed: false,
    idempotency_key: 'x',
  });
  const stub = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url?.endsWith('/identities/token')) res.end(JSON.stringify({ access_token: 'stub-token', token_type: 'Bearer', expires_in: 300, agent_uri: 'agent://x' }));
      else res.end(answer);
    });
  });
  await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
  const stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
  const socketDir = mkdtempSync(path.join(tmpdir(), 'tg-bench-sock-'));
  const socketPath = path.join(socketDir, 'sidecar.sock');
  const env = { TOLLGATE_API_URL: stubUrl, TOLLGATE_IDENTITY_DIR: identityDir, TOLLGATE_SIDECAR_METRICS_PORT: 'off', LOG_LEVEL: 'warn' };

  const port = await freePort();
  // BENCH_CPU_PROF=<dir>: the sidecar writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const sidecar = spawnBuiltTollgate(['sidecar'], { ...env, TOLLGATE_SIDECAR_PORT: String(port), TOLLGATE_SIDECAR_SOCKET: socketPath }, [...SIDECAR_FLAGS, ...profile]);
  const floorPort = await freePort();
  const floorSocket = path.join(socketDir, 'floor.sock');
  const floor = spawn(process.execPath, [...SIDECAR_FLAGS, '--input-type=module', '-e', FLOOR_FORWARDER], {
    env: { PATH: process.env.PATH ?? '', FLOOR_ROOT: ROOT, FLOOR_API: stubUrl, FLOOR_PORT: String(floorPort), FLOOR_SOCKET: floorSocket },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  try {
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 30_000, sidecar);
    await waitForHttp(`http://127.0.0.1:${floorPort}/healthz`, 30_000);
    const up = performance.now();
    await new Promise((r) => setTimeout(r, 3000));
    const startedMb = rssMb(sidecar.pid!);
    // While it idles (it takes no CPU), the start-up time of seven other sidecars.
    const starts: number[] = [];
    for (let i = 0; i < 7; i++) starts.push(await startUpMs(env, await freePort()));
    starts.sort((a, b) => a - b);
    // Idle: no call yet, and V8's memory reducer has had its major GC (it runs some 20-40 s into idleness):
    // what an agent's pod holds while the agent thinks.
    await new Promise((r) => setTimeout(r, Math.max(0, 45_000 - (performance.now() - up))));
    const idleMb = rssMb(sidecar.pid!);
    const floorIdleMb = rssMb(floor.pid!);
    const body = JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } });
    const paced = async (target: { origin: string; socketPath?: string }, path: string, headers: Record<string, string>, seconds: number) => {
      const pool = new Pool(target.origin, { connections: 8, ...(target.socketPath ? { socketPath: target.socketPath } : {}) });
      const times: number[] = [];
      const gap = 1000 / opts.rate;
      const started = performance.now();
      const inflight: Promise<void>[] = [];
      for (let i = 0; i < opts.rate * seconds; i++) {
        const due = started + i * gap;
        const wait = due - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        inflight.push(
          (async () => {
            const t0 = process.hrtime.bigint();
            const res = await pool.request({ method: 'POST', path, body, headers: { 'content-type': 'application/json', ...headers } });
            await res.body.text();
            if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode}`);
            times.push(Number(process.hrtime.bigint() - t0) / 1e6);
          })(),
        );
      }
      await Promise.all(inflight);
      await pool.close();
      return times.sort((a, b) => a - b);
    };
    const direct = { authorization: 'Bearer stub-token', 'idempotency-key': 'bench-key-0001' };
    const transports = [
      { name: 'unix socket', origin: 'http://localhost', socketPath },
      { name: 'tcp loopback', origin: `http://127.0.0.1:${port}` },
    ];
    const floors = [
      { name: 'unix socket', origin: 'http://localhost', socketPath: floorSocket },
      { name: 'tcp loopback', origin: `http://127.0.0.1:${floorPort}` },
    ];
    await paced({ origin: stubUrl }, '/api/v1/actions', direct, 2);
    const straight = await paced({ origin: stubUrl }, '/api/v1/actions', direct, opts.seconds);
    const r3 = (x: number) => Number(x.toFixed(3));
    // A paced run's latencies beside the direct calls', and the forwarder's CPU over it.
    const hopRow = (path: string, hop: number[], cpu: number) => ({
      path,
      rate_per_second: opts.rate,
      direct_p50_ms: r3(pct(straight, 50)),
      direct_p99_ms: r3(pct(straight, 99)),
      sidecar_p50_ms: r3(pct(hop, 50)),
      sidecar_p99_ms: r3(pct(hop, 99)),
      added_p50_ms: r3(pct(hop, 50) - pct(straight, 50)),
      added_p99_ms: r3(pct(hop, 99) - pct(straight, 99)),
      sidecar_cpu_s_per_1000_rps: r3((cpu / opts.seconds) * (1000 / opts.rate)),
    });
    const rows = [];
    // Each transport's load in two halves, in the order A B B A: whichever ran first paid for the process's first
    // seconds under load (its heap growing, V8 compiling), and came out above the other in every run. Answers each
    // path's latencies (sorted) and CPU seconds, and the process's peak RSS over the four. Warmed up just before,
    // unmeasured, WARM_UP_SECONDS over both paths: a process idle for some seconds (this one while the other is
    // measured, or the direct calls run) has its memory reducer's full GC, after which V8 optimises the whole
    // request path again, some 1 CPU-s over the next 5-6 s at this rate (docs/sidecar.md, Cost): the first
    // half after an idle paid for that, not for the hop.
    const abba = async (pid: number, paths: typeof transports) => {
      for (const t of paths) await paced(t, '/v1/actions', {}, WARM_UP_SECONDS / paths.length);
      const measured = new Map<string, { hop: number[]; cpu: number }>(paths.map((t) => [t.name, { hop: [], cpu: 0 }]));
      let peak = 0;
      for (const t of [paths[0]!, paths[1]!, paths[1]!, paths[0]!]) {
        const cpuBefore = cpuSeconds(pid);
        const { value: hop, peakMb } = await peakRss(pid, paced(t, '/v1/actions', {}, opts.seconds / 2));
        const m = measured.get(t.name)!;
        m.cpu += cpuSeconds(pid) - cpuBefore;
        m.hop.push(...hop);
        peak = Math.max(peak, peakMb);
      }
      const byPath = paths.map((t) => ({ name: t.name, hop: measured.get(t.name)!.hop.sort((a, b) => a - b), cpu: measured.get(t.name)!.cpu }));
      return { byPath, peakMb: peak };
    };
    const hops = await abba(sidecar.pid!, transports);
    const loadMb = hops.peakMb;
    for (const t of hops.byPath) {
      rows.push(hopRow(`hop alone, ${t.name} (stand-in API answering at once, hrtime)`, t.hop, t.cpu));
    }
    const [socket, tcp] = rows as [(typeof rows)[number], (typeof rows)[number]];
    // The same load through the floor (no target: what any Node forwarder costs here, for comparison).
    for (const { name, hop, cpu } of (await abba(floor.pid!, floors)).byPath) {
      const row = hopRow(`floor: a bare node:http + undici forwarder, ${name} (stand-in API, hrtime)`, hop, cpu);
      rows.push(row);
      record('sidecar', `floor forwarder: hop added p50, ${name}`, row.added_p50_ms, 'ms');
      record('sidecar', `floor forwarder: CPU per 1,000 rps, ${name}`, row.sidecar_cpu_s_per_1000_rps, 'CPU-s/s');
    }
    // The targets hold on the socket transport; the loopback port is held to the same ones, for comparison.
    record('sidecar', 'hop added p50, unix socket', socket.added_p50_ms, 'ms', atMost(0.3));
    record('sidecar', 'hop added p99, unix socket', socket.added_p99_ms, 'ms', atMost(1));
    record('sidecar', 'hop added p50, tcp loopback', tcp.added_p50_ms, 'ms', atMost(0.3));
    record('sidecar', 'hop added p99, tcp loopback', tcp.added_p99_ms, 'ms', atMost(1));
    record('sidecar', 'sidecar CPU per 1,000 rps, unix socket', socket.sidecar_cpu_s_per_1000_rps, 'CPU-s/s', atMost(0.2));
    record('sidecar', 'sidecar CPU per 1,000 rps, tcp loopback', tcp.sidecar_cpu_s_per_1000_rps, 'CPU-s/s', atMost(0.2));
    const startMs = Math.round(pct(starts, 50));
    record('sidecar', 'sidecar RSS 3 s after start', Number(startedMb.toFixed(1)), 'MB');
    record('sidecar', 'sidecar RSS idle (45 s, after the memory reducer)', Number(idleMb.toFixed(1)), 'MB', atMost(50));
    record('sidecar', `sidecar RSS under load (${opts.rate}/s)`, Number(loadMb.toFixed(1)), 'MB');
    record('sidecar', 'sidecar start to /healthz (median of 7)', startMs, 'ms', atMost(300));
    record('sidecar', 'floor forwarder RSS idle', Number(floorIdleMb.toFixed(1)), 'MB');
    return [
      ...rows,
      {
        path: 'the sidecar process (dist/cli.js sidecar)',
        rss_3s_after_start_mb: Number(startedMb.toFixed(1)),
        rss_idle_mb: Number(idleMb.toFixed(1)),
        rss_under_load_mb: Number(loadMb.toFixed(1)),
        start_to_healthz_ms_median: startMs,
        start_to_healthz_ms_all: starts.map((x) => Math.round(x)).join(' '),
      },
      { path: 'the floor forwarder (node:http and undici, nothing else)', rss_idle_mb: Number(floorIdleMb.toFixed(1)) },
    ];
  } finally {
    await stop(sidecar);
    await stop(floor);
    await new Promise<void>((r) => stub.close(() => r()));
    rmSync(socketDir, { recursive: true, force: true });
  }
}
