import { benchApiRequests } from './api-requests.js';
import { benchTokenVerify } from './token-verify.js';

/**
 * `make bench`: every benchmark, printed as tables. BENCH_SECONDS and BENCH_CONNECTIONS tune the HTTP
 * load; BENCH_ONLY=<name> runs one (api-requests, token-verify).
 */
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const only = process.env.BENCH_ONLY;

if (!only || only === 'token-verify') {
  console.log('token-verify: in-process, 20000 verifications of one agent token');
  console.table(await benchTokenVerify(20_000));
}
if (!only || only === 'api-requests') {
  console.log(`api-requests: ${connections} connections, ${seconds} s per operation, durable PostgreSQL, 2-process loopback`);
  console.table(await benchApiRequests({ seconds, connections }));
}
