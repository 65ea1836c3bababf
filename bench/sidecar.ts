import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { Pool } from 'undici';
import { freePort } from '../test/support/postgres-cluster.js';
import { spawnTollgate, stop, waitForHttp } from '../test/support/processes.js';
import { adminSession, benchDatabase, boundAgent } from './support.js';

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100/s)
}

/**
 * bench/sidecar: the same allowed submission (`crm.lookup_customer`, executed by the API) at a fixed
 * rate, once straight to `POST /api/v1/actions` with the agent's token and once through `tollgate
 * sidecar` (`POST /v1/actions`, which adds the token, the correlation ID and the idempotency key), and
 * the latency the hop adds at p50 and p99; beside it the sidecar's CPU time per 1,000 requests/s.
 */
export async function benchSidecar(opts: { seconds: number; rate: number; connections: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnTollgate> | undefined;
  let sidecar: ReturnType<typeof spawnTollgate> | undefined;
  try {
    const port = await freePort();
    api = spawnTollgate(['api'], {
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
    sidecar = spawnTollgate(['sidecar'], {
      TOLLGATE_API_URL: base,
      TOLLGATE_IDENTITY_DIR: dir,
      TOLLGATE_SIDECAR_PORT: String(sidecarPort),
      TOLLGATE_SIDECAR_METRICS_PORT: 'off',
      LOG_LEVEL: 'warn',
    });
    await waitForHttp(`http://127.0.0.1:${sidecarPort}/healthz`, 30_000, sidecar);

    const body = JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } });
    const run = (url: string, headers: () => Record<string, string>) =>
      autocannon({
        url,
        connections: opts.connections,
        duration: opts.seconds,
        overallRate: opts.rate,
        requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, body, headers: { 'content-type': 'application/json', ...headers() } }) }],
      }).then((r) => {
        if (r.non2xx > 0 || r.errors > 0) throw new Error(`sidecar bench: ${r.non2xx} non-2xx, ${r.errors} errors`);
        return r;
      });
    const direct = () => ({ authorization: `Bearer ${token}`, 'idempotency-key': `bench-${randomUUID()}` });
    // Warm both paths (JIT, connections, the sidecar's token), then measure.
    await run(`${base}/api/v1/actions`, direct);
    await run(`http://127.0.0.1:${sidecarPort}/v1/actions`, () => ({}));
    const straight = await run(`${base}/api/v1/actions`, direct);
    const cpuBefore = cpuSeconds(sidecar.pid!);
    const hop = await run(`http://127.0.0.1:${sidecarPort}/v1/actions`, () => ({}));
    const cpu = cpuSeconds(sidecar.pid!) - cpuBefore;
    const rate = hop.requests.average;
    const isolated = await isolatedHop(dir, opts);
    return [
      isolated,
      {
        path: 'through the real API (autocannon, 1 ms resolution)',
        rate_per_second: opts.rate,
        direct_p50_ms: straight.latency.p50,
        direct_p99_ms: straight.latency.p99,
        sidecar_p50_ms: hop.latency.p50,
        sidecar_p99_ms: hop.latency.p99,
        added_p50_ms: Number((hop.latency.p50 - straight.latency.p50).toFixed(2)),
        added_p99_ms: Number((hop.latency.p99 - straight.latency.p99).toFixed(2)),
        sidecar_cpu_s_per_1000_rps: Number(((cpu / opts.seconds) * (1000 / rate)).toFixed(2)),
      },
    ];
  } finally {
    await stop(sidecar);
    await stop(api);
    cluster.stop();
  }
}

/** Percentile of sorted values. */
const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/**
 * The hop alone: the sidecar in front of a stand-in for the API that answers at once with a fixed
 * submission result, so that the API's own variance (milliseconds) does not hide the sidecar's cost
 * (fractions of one). A paced client sends `rate` requests a second, timing each with hrtime, straight to
 * the stand-in and through the sidecar; the difference of the percentiles is what the hop adds.
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
  const port = await freePort();
  // BENCH_CPU_PROF=<dir>: the sidecar writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const sidecar = spawnTollgate(
    ['sidecar'],
    { TOLLGATE_API_URL: stubUrl, TOLLGATE_IDENTITY_DIR: identityDir, TOLLGATE_SIDECAR_PORT: String(port), TOLLGATE_SIDECAR_METRICS_PORT: 'off', LOG_LEVEL: 'warn' },
    profile,
  );
  try {
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, 30_000, sidecar);
    const body = JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } });
    const paced = async (origin: string, path: string, headers: Record<string, string>, seconds: number) => {
      const pool = new Pool(origin, { connections: 8 });
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
    await paced(stubUrl, '/api/v1/actions', direct, 2);
    await paced(`http://127.0.0.1:${port}`, '/v1/actions', {}, 2);
    const straight = await paced(stubUrl, '/api/v1/actions', direct, opts.seconds);
    const cpuBefore = cpuSeconds(sidecar.pid!);
    const hop = await paced(`http://127.0.0.1:${port}`, '/v1/actions', {}, opts.seconds);
    const cpu = cpuSeconds(sidecar.pid!) - cpuBefore;
    const r2 = (x: number) => Number(x.toFixed(3));
    return {
      path: 'hop alone (stand-in API answering at once, hrtime)',
      rate_per_second: opts.rate,
      direct_p50_ms: r2(pct(straight, 50)),
      direct_p99_ms: r2(pct(straight, 99)),
      sidecar_p50_ms: r2(pct(hop, 50)),
      sidecar_p99_ms: r2(pct(hop, 99)),
      added_p50_ms: r2(pct(hop, 50) - pct(straight, 50)),
      added_p99_ms: r2(pct(hop, 99) - pct(straight, 99)),
      sidecar_cpu_s_per_1000_rps: Number(((cpu / opts.seconds) * (1000 / opts.rate)).toFixed(2)),
      meets_target: pct(hop, 50) - pct(straight, 50) <= 0.3 && pct(hop, 99) - pct(straight, 99) <= 1,
    };
  } finally {
    await stop(sidecar);
    await new Promise<void>((r) => stub.close(() => r()));
  }
}
