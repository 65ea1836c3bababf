import { benchApiRequests } from './api-requests.js';

/** `make bench`: every benchmark, printed as a table. BENCH_SECONDS and BENCH_CONNECTIONS tune the load. */
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);

console.log(`api-requests: ${connections} connections, ${seconds} s per operation, durable PostgreSQL, 2-process loopback`);
console.table(await benchApiRequests({ seconds, connections }));
