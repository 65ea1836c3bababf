import { execFileSync } from 'node:child_process';
import { benchApiRequests } from './api-requests.js';
import { benchAuthzen } from './authzen.js';
import { benchBreaker } from './breaker.js';
import { benchController } from './controller.js';
import { benchDecisions } from './decisions.js';
import { benchGraph } from './graph.js';
import { benchIds } from './ids.js';
import { benchLowLoad } from './low-load.js';
import { benchMcpProxy } from './mcp-proxy.js';
import { benchMemory } from './memory.js';
import { benchPolicy } from './policy.js';
import { benchReplay } from './replay.js';
import { benchRisk } from './risk.js';
import { writeResults } from './results.js';
import { benchSidecar } from './sidecar.js';
import { benchTokenVerify } from './token-verify.js';

/**
 * `make bench`: every benchmark, printed as tables. BENCH_SECONDS and BENCH_CONNECTIONS tune the HTTP
 * load; BENCH_ONLY=<name> runs one (token-verify, policy, api-requests, decisions, ids, authzen, controller, sidecar, low-load, mcp-proxy, breaker, risk, graph, replay, memory). BENCH_AGENTS sets
 * the concurrency of the decisions and authzen benchmarks (default 32); BENCH_CONTROLLER_AGENTS the Agent resources of the
 * controller benchmark (default 1000) and BENCH_CONTROLLER_WORKERS its reconciles in flight per kind (default 4).
 */
// The processes measured run dist/cli.js, the product as shipped: build it first when the sources changed.
execFileSync('make', ['-s', 'build'], { stdio: 'inherit' });

const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const only = process.env.BENCH_ONLY;

if (!only || only === 'token-verify') {
  console.log('token-verify: in-process, 20000 verifications of one agent token');
  console.table(await benchTokenVerify(20_000));
}
if (!only || only === 'policy') {
  console.log('policy: the pure decision engine in-process, 50 policies of 200 rules in all, a mix of 16 requests, CPU time of one thread');
  console.table(benchPolicy());
}
if (!only || only === 'api-requests') {
  console.log(`api-requests: ${connections} connections, ${seconds} s per operation, durable PostgreSQL, 2-process loopback`);
  console.table(await benchApiRequests({ seconds, connections }));
}

if (!only || only === 'decisions') {
  const agents = Number(process.env.BENCH_AGENTS ?? 32);
  console.log(`decisions: ${agents} concurrent agents, ${seconds} s per load, durable PostgreSQL, 2-process loopback`);
  console.table(await benchDecisions({ seconds, connections: agents }));
}

if (!only || only === 'ids') {
  const rows = Number(process.env.BENCH_IDS_ROWS ?? 1_000_000);
  console.log(`ids: a uuid-keyed table of ${rows.toLocaleString('en')} rows, random against time-ordered ids: 20,000 more rows in transactions of 10 right after a checkpoint, the WAL and PostgreSQL's CPU a row (durable PostgreSQL; no target, D41)`);
  console.table(await benchIds({ rows, inserts: 20_000 }));
}

if (!only || only === 'authzen') {
  const agents = Number(process.env.BENCH_AGENTS ?? 32);
  console.log(`authzen: ${agents} concurrent agents, ${seconds} s per load: POST /actions, AuthZEN single evaluations, batches of 10, MCP ext_authz checks; durable PostgreSQL, 2-process loopback (no target)`);
  console.table(await benchAuthzen({ seconds, connections: agents }));
}

if (!only || only === 'controller') {
  const agents = Number(process.env.BENCH_CONTROLLER_AGENTS ?? 1000);
  const workers = Number(process.env.BENCH_CONTROLLER_WORKERS ?? 4);
  console.log(`controller: kubectl apply of ${agents} Agent resources until every one is Ready (test API server, tollgate api and controller on this machine)`);
  console.table(await benchController({ agents, workers }));
}

if (!only || only === 'risk') {
  const requests = Number(process.env.BENCH_RISK_REQUESTS ?? 500);
  console.log(`risk: what-if and recalculation on 10,000 agents, 2,000 tools, 100,000 bindings; ${requests} sequential what-ifs per agent, durable PostgreSQL, 2-process loopback (target: what-if <= 20 ms)`);
  console.table(await benchRisk({ requests }));
}

if (!only || only === 'graph') {
  const requests = Number(process.env.BENCH_GRAPH_REQUESTS ?? 300);
  console.log(`graph: 10,000 agents, 2,000 tools, ~100,000 edges; ${requests} sequential requests per traversal, durable PostgreSQL, 2-process loopback (targets: traversals p99 <= 50 ms, high-risk-paths <= 500 ms, rebuild <= 10 s)`);
  console.table(await benchGraph({ requests }));
}

if (!only || only === 'replay') {
  const decisions = Number(process.env.BENCH_REPLAY_DECISIONS ?? 100_000);
  console.log(`replay: POST /policies/{id}/versions/2/replay over ${decisions} recorded decisions (8 agents, a 200-rule policy, a tenth of it changed), 3 runs, durable PostgreSQL, 2-process loopback (target, issue 21: <= 10 s)`);
  console.table(await benchReplay({ decisions, runs: 3 }));
}

if (!only || only === 'sidecar') {
  const rate = Number(process.env.BENCH_SIDECAR_RATE ?? 500);
  console.log(`sidecar: the same allowed submission at ${rate}/s for ${seconds} s, straight and through tollgate sidecar (targets: added p50 <= 0.3 ms, p99 <= 1 ms)`);
  console.table(await benchSidecar({ seconds, rate, connections: 8 }));
}

if (!only || only === 'low-load') {
  const calls = Number(process.env.BENCH_LOW_LOAD_CALLS ?? 500);
  console.log(`low-load: ${calls} sequential POST /actions on the embedded database (make run's), straight and through tollgate sidecar on its Unix socket (target, issue 20: p50 <= 2 ms through the sidecar)`);
  console.table(await benchLowLoad({ calls }));
}

if (!only || only === 'mcp-proxy') {
  const calls = Number(process.env.BENCH_MCP_CALLS ?? 1000);
  console.log(`mcp-proxy: ${calls} sequential MCP tools/call, straight to a real MCP server and through tollgate sidecar in front of the API on durable PostgreSQL (target, issue 20: added <= the decision's own time + 0.5 ms)`);
  console.table(await benchMcpProxy({ calls }));
}

if (!only || only === 'breaker') {
  const refusals = Number(process.env.BENCH_BREAKER_CALLS ?? 1000);
  console.log(`breaker: one agent calling through tollgate sidecar's MCP proxy while tollgate api is stopped with SIGSTOP; ${refusals} calls after the first ten (targets: one call waits for the 2 s timeout, refusals <= 50 ms)`);
  console.table(await benchBreaker({ refusals }));
}

if (!only || only === 'memory') {
  const maxSettleSeconds = Number(process.env.BENCH_MEMORY_SETTLE_SECONDS ?? 150);
  console.log(`memory: tollgate api on durable PostgreSQL and on the embedded database, start-up and RSS, idle once V8's memory reducer has run (up to ${maxSettleSeconds} s) (targets: <= 120 MB on PostgreSQL, <= 400 MB embedded)`);
  console.table(await benchMemory({ maxSettleSeconds }));
}

let commit = 'unknown';
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
} catch {
  // not a git checkout: the results say so
}
writeResults(commit);
