import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { Client } from 'undici';
import { freePort, postgresBinDir } from '../test/support/postgres-cluster.js';
import { atLeast, atMost, record } from './results.js';
import { watchPauses } from './stall-trace.mjs';
import { adminSession, benchDatabase, cpuOf, metricSamples, percentiles, postgresCpuOf, rssOf, walBetween } from './support.js';
import { ROOT, spawnBuiltTollgate, stop, waitForHttp } from '../test/support/processes.js';

/**
 * bench/decisions: N concurrent agents submitting allowed actions through `tollgate api` on a durable
 * PostgreSQL (synchronous_commit on), for one organisation and then spread over ten; beside it, on
 * the same database at the same concurrency, the rate of bare single-row insert transactions
 * (pgbench), and the ratio of the two; and the floor: a minimal fastify endpoint doing one durable insert per
 * request on a pool of the same size (bench/floor-server.ts), driven by the same client, so that the ratio to it
 * separates the decision logic from "Node + HTTP + one write".
 */
export async function benchDecisions(opts: { seconds: number; connections: number }) {
  const { cluster, runtimeUrl } = await benchDatabase();
  let api: ReturnType<typeof spawnBuiltTollgate> | undefined;
  let floorServer: ChildProcess | undefined;
  try {
    const statements = process.env.BENCH_PG_STATEMENTS ? await statementStats(cluster) : undefined;
    const wal = process.env.BENCH_PG_WAL ? walStats(cluster) : undefined;
    const port = await freePort();
    // BENCH_CPU_PROF=<dir>: the API writes a V8 CPU profile there when it stops, and this process each measured
    // load's window to <dir>/loads.json, so that profile-summary.ts can summarise one load alone.
    const profileDir = process.env.BENCH_CPU_PROF;
    const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
    const windows: LoadWindow[] = [];
    // BENCH_HEAP_SAMPLE=<file>: the API samples what it allocates, garbage included, and writes it there when it stops.
    const heapSample = process.env.BENCH_HEAP_SAMPLE ? path.resolve(process.env.BENCH_HEAP_SAMPLE) : undefined;
    if (heapSample) profile.push(`--import=${path.join(ROOT, 'bench', 'heap-sample.mjs')}`);
    // BENCH_PACED_TRACE=<file>: the paced load's submissions and this process's pauses go to <file>.client.json, the
    // API's pauses to <file>.api.json (stall-trace.mjs, preloaded); bench/paced-summary.ts lays them side by side.
    const pacedTrace = process.env.BENCH_PACED_TRACE ? path.resolve(process.env.BENCH_PACED_TRACE) : undefined;
    if (pacedTrace) profile.push(`--import=${path.join(ROOT, 'bench', 'stall-trace.mjs')}`);
    api = spawnBuiltTollgate(
      ['api'],
      {
        PORT: String(port),
        DATABASE_URL: runtimeUrl,
        DATABASE_POOL_MAX: String(Math.max(10, opts.connections)),
        LOG_LEVEL: 'warn',
        ...(heapSample ? { HEAP_SAMPLE_FILE: heapSample } : {}),
        ...(pacedTrace ? { STALL_TRACE_FILE: `${pacedTrace}.api.json` } : {}),
        RATE_LIMIT_GATEWAY_PER_MINUTE: '1000000',
        RATE_LIMIT_PERSON_PER_MINUTE: '1000000',
        RATE_LIMIT_TOKEN_PER_MINUTE: '1000000',
        RATE_LIMIT_SIGNIN_PER_MINUTE: '1000000',
      },
      profile,
    );
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/healthz`, 60_000, api);

    const hot = await agentTokens(base, cluster.adminUrl('tollgate'), 1, opts.connections);
    const spread = await agentTokens(base, cluster.adminUrl('tollgate'), 10, Math.ceil(opts.connections / 10));
    const flowing = await agentTokens(base, cluster.adminUrl('tollgate'), 1, opts.connections, true);
    const inserts = bareInserts(cluster.adminUrl('tollgate'), cluster.port, opts);
    const floorPort = await freePort();
    floorServer = spawn(process.execPath, ['--import', 'tsx', 'bench/floor-server.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', PORT: String(floorPort), DATABASE_URL: cluster.adminUrl('tollgate'), POOL_MAX: String(Math.max(10, opts.connections)) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    await waitForHttp(`http://127.0.0.1:${floorPort}/healthz`, 30_000);
    const floorRun = await load(`http://127.0.0.1:${floorPort}`, ['floor'], opts, '/floor');
    const floor = floorRun.requests.average;
    // The bare inserts' and the floor's rows are no part of what follows: dropped, no autovacuum of their
    // table falls in the decisions' loads.
    psql(cluster.adminUrl('tollgate'), 'drop table bench_rows');

    const results = [];
    // CPU time per decision of the API and of PostgreSQL (every backend), from /proc: what the load
    // costs each, whoever else shares the cores.
    const perDecision = (ms: number, r: LoadResult) => Math.round((ms * 1000) / r.requests.total);
    const row = (name: string, r: LoadResult, cpu?: { api: number; postgres: number; client: number }, rssMb?: number, grouped?: Grouping) => ({
      load: `${opts.connections} agents, ${name}`,
      api_cpu_us_per_decision: cpu ? perDecision(cpu.api, r) : null,
      postgres_cpu_us_per_decision: cpu ? perDecision(cpu.postgres, r) : null,
      // The load's own client (this process) shares the cores too.
      client_cpu_us_per_decision: cpu ? perDecision(cpu.client, r) : null,
      decisions_per_second: Math.round(r.requests.average),
      p50_ms: r.latency.p50,
      p99_ms: r.latency.p99,
      bare_insert_tps: Math.round(inserts),
      ratio: Number((r.requests.average / inserts).toFixed(2)),
      floor_rps: Math.round(floor),
      ratio_to_floor: Number((r.requests.average / floor).toFixed(2)),
      // The API's resident memory as the load ends (the old generation's garbage since the last full GC
      // included: V8 lets it grow with the allocation rate).
      api_rss_mb_after: rssMb ?? null,
      // How the load was grouped, from the API's own metrics: submissions per group-commit batch, and
      // organisations' batches per transaction (D36). A batch's statements and a transaction's round trips
      // and commit are spread over these.
      submissions_per_batch: grouped ? grouped.submissionsPerBatch : null,
      batches_per_transaction: grouped ? grouped.batchesPerTransaction : null,
      // The API's garbage collections during the load: how many a second, and their pauses' time a decision.
      api_gc_per_second: grouped ? Math.round(grouped.gcCount / opts.seconds) : null,
      api_gc_us_per_decision: grouped ? Math.round((grouped.gcSeconds * 1e6) / r.requests.total) : null,
    });
    const measured = async (name: string, run: () => Promise<LoadResult>) => {
      statements?.reset();
      wal?.reset();
      const counted = await batchCounts(base);
      const before = { api: cpuOf([api!.pid!]), postgres: postgresCpuOf(cluster.dataDir) };
      const client = process.cpuUsage();
      const from = monotonicMicros();
      const result = await run();
      windows.push({ load: name, from_us: from, to_us: monotonicMicros() });
      const clientCpu = process.cpuUsage(client);
      statements?.report(name, result.requests.total);
      wal?.report(name, result.requests.total);
      const cpu = { api: cpuOf([api!.pid!]) - before.api, postgres: postgresCpuOf(cluster.dataDir) - before.postgres };
      return { result, cpu: { ...cpu, client: (clientCpu.user + clientCpu.system) / 1000 }, rss: rssOf(api!.pid!).rss, grouped: grouping(counted, await batchCounts(base)) };
    };
    results.push(row('floor: fastify + one durable insert per request', floorRun));
    // Unmeasured, a few seconds of the first load: the first seconds of a fresh process (V8 compiling the
    // hot path) are not the steady state the figures are about. After it, the first load measures as the same
    // load repeated later does, within this machine's spread of about ±20% (bench/README.md, Latest figures).
    await load(base, hot, { ...opts, seconds: WARM_UP_SECONDS });
    const hottest = await measured('one organisation', () => load(base, hot, opts));
    results.push(row('one organisation', hottest.result, hottest.cpu, hottest.rss, hottest.grouped));
    // The latency target is set at 70% of the maximum: the same agents, paced to that rate, evenly.
    const paced = Math.round(hottest.result.requests.average * 0.7);
    // Unmeasured, two seconds of it first: the paced client's own first second (its code not yet optimised, its
    // connections new) was the slowest of every run.
    await pacedLoad(base, hot, { ...opts, seconds: 2 }, paced);
    const pacedRun = await measured('paced', () => pacedLoad(base, hot, opts, paced, pacedTrace && `${pacedTrace}.client.json`));
    results.push(row(`one organisation, paced at 70% (${paced}/s)`, pacedRun.result, pacedRun.cpu, pacedRun.rss, pacedRun.grouped));
    const tenOrgs = await measured('ten organisations', () => load(base, spread, opts));
    results.push(row('ten organisations', tenOrgs.result, tenOrgs.cpu, tenOrgs.rss, tenOrgs.grouped));
    // Issue 21: a flow rule in play (session facts read behind the chain head's lock, no overlap of batches).
    const flow = await measured('one organisation, a flow rule in play', () => load(base, flowing, opts));
    results.push(row('one organisation, a flow rule in play', flow.result, flow.cpu, flow.rss, flow.grouped));
    const one = results[1]!;
    record('decisions', 'one organisation, a flow rule in play', results[4]!.decisions_per_second, 'decisions/s');
    record('decisions', 'one organisation, a flow rule in play, p99', results[4]!.p99_ms, 'ms');
    record('decisions', `one organisation, ${opts.connections} agents`, one.decisions_per_second, 'decisions/s', atLeast(TWICE_ISSUE_FIGURE));
    record('decisions', 'one organisation, ratio to bare inserts', one.ratio, '', atLeast(0.5));
    record('decisions', 'one organisation, ratio to the floor (fastify + one insert)', one.ratio_to_floor, '');
    record('decisions', 'ten organisations', Math.round(tenOrgs.result.requests.average), 'decisions/s', atLeast(one.decisions_per_second));
    record('decisions', 'one organisation paced at 70%, p99', results[2]!.p99_ms, 'ms', atMost(10));
    record('decisions', 'one organisation, the API\'s CPU per decision', one.api_cpu_us_per_decision!, 'µs');
    record('decisions', 'one organisation, PostgreSQL\'s CPU per decision', one.postgres_cpu_us_per_decision!, 'µs');
    record('decisions', 'ten organisations, the API\'s CPU per decision', results[3]!.api_cpu_us_per_decision!, 'µs');
    record('decisions', 'ten organisations, PostgreSQL\'s CPU per decision', results[3]!.postgres_cpu_us_per_decision!, 'µs');
    const grouped: Array<[string, number | null]> = [
      ['one organisation, submissions per batch', results[1]!.submissions_per_batch],
      ['ten organisations, submissions per batch', results[3]!.submissions_per_batch],
      ["ten organisations, organisations' batches per transaction", results[3]!.batches_per_transaction],
    ];
    for (const [figure, value] of grouped) if (value !== null) record('decisions', figure, value, '');
    record('decisions', 'bare inserts (pgbench)', Math.round(inserts), 'transactions/s');
    record('decisions', 'floor (fastify + one durable insert)', Math.round(floor), 'requests/s');
    if (profileDir) {
      mkdirSync(profileDir, { recursive: true });
      writeFileSync(path.join(profileDir, 'loads.json'), `${JSON.stringify(windows, null, 1)}\n`);
    }
    const memory = rssOf(api.pid!);
    record('decisions', 'api RSS after the loads', memory.rss, 'MB', atMost(250));
    record('decisions', 'api peak RSS during the loads', memory.peak, 'MB', atMost(250));
    return results;
  } finally {
    await stop(api);
    await stop(floorServer);
    cluster.stop();
  }
}

/** The sums and counts of the API's histograms of batch sizes and of batches per transaction (api/platform/metrics.ts). */
interface BatchCounts {
  batchSum: number;
  batchCount: number;
  transactionSum: number;
  transactionCount: number;
  /** V8's collections so far and their pauses' seconds, all kinds (prom-client's nodejs_gc_duration_seconds). */
  gcCount: number;
  gcSeconds: number;
}

interface Grouping {
  submissionsPerBatch: number;
  batchesPerTransaction: number;
  gcCount: number;
  gcSeconds: number;
}

/** The API's batch and transaction histograms' sums and counts, scraped from its /metrics. */
async function batchCounts(base: string): Promise<BatchCounts> {
  const samples = await metricSamples(`${base}/metrics`);
  const value = (name: string) => {
    const found = samples.get(name);
    if (found === undefined) throw new Error(`the API's /metrics has no ${name}`);
    return found;
  };
  return {
    batchSum: value('tollgate_decision_batch_size_sum'),
    batchCount: value('tollgate_decision_batch_size_count'),
    transactionSum: value('tollgate_decision_transaction_batches_sum'),
    transactionCount: value('tollgate_decision_transaction_batches_count'),
    gcCount: sumOf(samples, 'nodejs_gc_duration_seconds_count{'),
    gcSeconds: sumOf(samples, 'nodejs_gc_duration_seconds_sum{'),
  };
}

/** Submissions per batch and batches per transaction between two scrapes. */
function grouping(before: BatchCounts, after: BatchCounts): Grouping | undefined {
  const batches = after.batchCount - before.batchCount;
  const transactions = after.transactionCount - before.transactionCount;
  if (batches <= 0 || transactions <= 0) return undefined;
  const round = (n: number) => Number(n.toFixed(2));
  return {
    submissionsPerBatch: round((after.batchSum - before.batchSum) / batches),
    batchesPerTransaction: round((after.transactionSum - before.transactionSum) / transactions),
    gcCount: after.gcCount - before.gcCount,
    gcSeconds: after.gcSeconds - before.gcSeconds,
  };
}

/** The sum of the samples whose names (labels included) begin with `prefix`; throws when there are none. */
function sumOf(samples: Map<string, number>, prefix: string): number {
  let sum = 0;
  let found = false;
  for (const [name, value] of samples) {
    if (!name.startsWith(prefix)) continue;
    sum += value;
    found = true;
  }
  if (!found) throw new Error(`the API's /metrics has no ${prefix}`);
  return sum;
}

/**
 * Issue 20's target: at least twice the one-organisation figure it was filed with (1,244-1,269 decisions/s
 * on this 2-core machine), on the way to the ratio >= 0.5.
 */
const TWICE_ISSUE_FIGURE = 2 * 1269;
/** Seconds of unmeasured load before the first measured one. */
const WARM_UP_SECONDS = 3;

/**
 * Organisations with agents bound to the read-only sample tool, each with a fresh token; with `flowRule`,
 * each organisation also has a published rule that reads the session (and never matches this load: the
 * agents call one tool far fewer than a million times), so its decisions take the flow rules' path.
 */
async function agentTokens(base: string, adminUrl: string, orgs: number, perOrg: number, flowRule = false): Promise<string[]> {
  const tokens: string[] = [];
  for (let o = 0; o < orgs; o++) {
    const { call, tenant } = await adminSession(base, adminUrl, `Bench ${flowRule ? 'flow ' : ''}${o}`);
    if (flowRule) await publishFlowRule(call, adminUrl, tenant.id);
    const tools = (await call('GET', '/tools')).items as Array<{ id: string; tool_key: string }>;
    const lookup = tools.find((t) => t.tool_key === 'crm.lookup_customer')!;
    for (let a = 0; a < perOrg; a++) {
      const agent = await call('POST', '/agents', { name: `Bench agent ${a}` });
      await call('POST', `/agents/${agent.id}/permissions`, { target_kind: 'tool', target_id: lookup.id, actions: ['invoke'] });
      const identity = await call('POST', `/agents/${agent.id}/identities`);
      const res = await fetch(`${base}/api/v1/identities/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: identity.client_id, client_secret: identity.client_secret }),
      });
      tokens.push(((await res.json()) as { access_token: string }).access_token);
    }
  }
  return tokens;
}

/** A policy with one session rule, drafted through the API and published in SQL (four eyes need a second person). */
async function publishFlowRule(call: Awaited<ReturnType<typeof adminSession>>['call'], adminUrl: string, orgId: string) {
  const policy = await call('POST', '/policies', {
    key: 'bench-flow',
    name: 'A flow rule in play',
    rules: [
      {
        id: 'lookups-per-session',
        effect: 'require_approval',
        reason_code: 'FLOW_TOOL_OVERUSE',
        conditions: [{ field: 'session.same_tool_calls', op: 'gte', value: 1_000_000 }],
      },
    ],
  });
  const owner = new pg.Client({ connectionString: adminUrl });
  await owner.connect();
  try {
    await owner.query(`update policy_versions set published_at = now() where org_id = $1 and policy_id = $2 and number = 1`, [orgId, policy.id]);
    await owner.query(`update policies set published_version = 1, version = version + 1 where org_id = $1 and id = $2`, [orgId, policy.id]);
  } finally {
    await owner.end();
  }
}

/**
 * A measured load's start and end on the clock of V8's CPU profiles (the system's monotonic clock, in
 * microseconds, as the profile's `startTime`), for `bench/profile-summary.ts <dir> [top] <load>`.
 */
export interface LoadWindow {
  load: string;
  from_us: number;
  to_us: number;
}

const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);

/** What a load gives the rows: autocannon's result has these, and so has the paced load's. */
interface LoadResult {
  requests: { average: number; total: number };
  latency: { p50: number; p99: number };
}

const ACTION = JSON.stringify({ tool: 'crm.lookup_customer', target: 'crm://customers/42', parameters: { customer_id: '42' } });

/** Each connection submits as soon as its answer is in (closed loop): the most the API does with this many agents. */
function load(base: string, tokens: string[], opts: { seconds: number; connections: number }, route = '/api/v1/actions') {
  let n = 0;
  return autocannon({
    url: `${base}${route}`,
    connections: opts.connections,
    duration: opts.seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          const i = n++;
          return {
            ...req,
            body: ACTION,
            headers: {
              'content-type': 'application/json',
              authorization: `Bearer ${tokens[i % tokens.length]}`,
              'idempotency-key': `bench-${i}-${randomUUID()}`,
            },
          };
        },
      },
    ],
  }).then((r) => {
    if (r.non2xx > 0 || r.errors > 0) throw new Error(`decisions: ${r.non2xx} non-2xx, ${r.errors} errors`);
    return r;
  });
}

/**
 * The agents, paced evenly to `rate` submissions a second in all: agent k of n (its own keep-alive connection)
 * submits at start + k/rate + j·n/rate, or at once when its answer before came later than that. Each latency is
 * counted from when the submission was due, not from when it went out, so that a slow answer also counts in the
 * submissions it held back (coordinated omission). Not autocannon's `overallRate`: that is a quota a second, which
 * each connection spends as fast as it can, so its load runs at the maximum for the first part of each second and
 * then idles, and its latencies are the maximum load's (bench/README.md, Paced). With `trace`, writes there each
 * submission's due time (ms since the epoch) and latency, and this process's pauses over the load (stall-trace.mjs).
 */
async function pacedLoad(base: string, tokens: string[], opts: { seconds: number; connections: number }, rate: number, trace?: string): Promise<LoadResult> {
  const latencies: number[] = [];
  const dues: number[] = [];
  const pauses = trace ? watchPauses() : undefined;
  const period = (1000 * opts.connections) / rate;
  const started = performance.now() + 50;
  const ends = started + opts.seconds * 1000;
  let n = 0;
  const agent = async (k: number) => {
    const client = new Client(base, { pipelining: 1 });
    try {
      for (let due = started + (k * 1000) / rate; due < ends; due += period) {
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const res = await client.request({
          method: 'POST',
          path: '/api/v1/actions',
          body: ACTION,
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${tokens[k % tokens.length]}`,
            'idempotency-key': `bench-paced-${n++}-${randomUUID()}`,
          },
        });
        await res.body.text();
        if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`decisions, paced: ${res.statusCode}`);
        latencies.push(performance.now() - due);
        dues.push(due);
      }
    } finally {
      await client.close();
    }
  };
  await Promise.all(Array.from({ length: opts.connections }, (_, k) => agent(k)));
  const { p50, p99 } = percentiles(latencies);
  const round = (ms: number) => Number(ms.toFixed(2));
  if (trace) {
    const submissions = dues.map((due, i) => [round(performance.timeOrigin + due), round(latencies[i]!)]);
    writeFileSync(trace, JSON.stringify({ submissions, pauses: pauses!.stop() }));
  }
  return { requests: { average: latencies.length / opts.seconds, total: latencies.length }, latency: { p50: round(p50), p99: round(p99) } };
}

/** One statement through psql on `url`: its rows unaligned, a line each, without the trailing newline. */
function psql(url: string, sql: string): string {
  return execFileSync(path.join(postgresBinDir(), 'psql'), [url, '-qAtc', sql], { encoding: 'utf8' }).trim();
}

/**
 * BENCH_PG_STATEMENTS=<file>: PostgreSQL's own account of each load (pg_stat_statements, planning
 * included), appended to the file: per statement, calls, planning and execution time per decision.
 * The server is restarted with the extension loaded before the API starts.
 */
async function statementStats(cluster: Awaited<ReturnType<typeof benchDatabase>>['cluster']) {
  const url = cluster.adminUrl('tollgate');
  psql(url, "alter system set shared_preload_libraries = 'pg_stat_statements'");
  await cluster.halt('fast');
  await cluster.resume();
  psql(url, 'create extension pg_stat_statements');
  // Known once the library is loaded.
  psql(url, 'alter system set pg_stat_statements.track_planning = on');
  psql(url, 'select pg_reload_conf()');
  const file = process.env.BENCH_PG_STATEMENTS!;
  return {
    reset: () => psql(url, 'select pg_stat_statements_reset()'),
    report(load: string, decisions: number) {
      const rows = psql(
        url,
        `
        select round((total_plan_time + total_exec_time) * 1000 / ${decisions})::int || ' µs/decision, plan ' ||
               round(total_plan_time * 1000 / ${decisions})::int || ', exec ' || round(total_exec_time * 1000 / ${decisions})::int ||
               ', calls/decision ' || round(calls::numeric / ${decisions}, 3) || ' | ' || left(regexp_replace(query, $$[[:space:]]+$$, $$ $$, $$g$$), 160)
          from pg_stat_statements where dbid = (select oid from pg_database where datname = 'tollgate')
         order by total_plan_time + total_exec_time desc limit 15`,
      );
      appendFileSync(file, `## ${load} (${decisions} decisions)\n${rows}\n`);
    },
  };
}

/**
 * BENCH_PG_WAL=<file>: the write-ahead log each load wrote, per decision, by kind of record and with the
 * full-page images apart (pg_waldump --stats=record over the load's span), appended to the file.
 */
function walStats(cluster: Awaited<ReturnType<typeof benchDatabase>>['cluster']) {
  const url = cluster.adminUrl('tollgate');
  const file = process.env.BENCH_PG_WAL!;
  let start = '';
  return {
    reset: () => {
      start = psql(url, 'select pg_current_wal_insert_lsn()');
    },
    report(load: string, decisions: number) {
      const wal = walBetween(cluster.dataDir, start, psql(url, 'select pg_current_wal_lsn()'));
      appendFileSync(file, `## ${load} (${decisions} decisions, ${Math.round(wal.total / decisions)} bytes of WAL a decision)\n${wal.text}\n`);
    },
  };
}

/** Transactions of one single-row insert each, at the same concurrency, with pgbench. */
function bareInserts(adminUrl: string, port: number, opts: { seconds: number; connections: number }): number {
  const dir = mkdtempSync(path.join(tmpdir(), 'tollgate-bench-'));
  const script = path.join(dir, 'insert.sql');
  writeFileSync(script, 'insert into bench_rows (payload) values (md5(random()::text));\n');
  psql(adminUrl, 'create table if not exists bench_rows (id bigserial primary key, payload text)');
  const out = execFileSync(
    path.join(postgresBinDir(), 'pgbench'),
    ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-n', '-c', String(opts.connections), '-j', '2', '-T', String(opts.seconds), '-f', script, 'tollgate'],
    { encoding: 'utf8' },
  );
  const tps = /tps = ([\d.]+)/.exec(out);
  if (!tps) throw new Error(`pgbench said: ${out}`);
  return Number(tps[1]);
}
