import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { BreakerState } from './breaker.js';

export type CallKind = 'action' | 'authorise' | 'mcp_call' | 'mcp_list';
export type CallOutcome = 'allow' | 'deny' | 'approval_required' | 'contained' | 'unavailable' | 'upstream_error' | 'bad_request';

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, open: 1, half_open: 2 };

/**
 * The sidecar's Prometheus metrics, on a registry of its own (no global one): calls by kind and outcome,
 * the latency the sidecar adds, and the circuit breaker. The names are fixed: the chart's dashboard
 * reads them (docs/sidecar.md, Metrics).
 */
export class SidecarMetrics {
  readonly registry = new Registry();
  readonly #calls = new Counter({
    name: 'tollgate_sidecar_calls_total',
    help: 'Calls the sidecar answered, by kind and outcome',
    labelNames: ['kind', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly #added = new Histogram({
    name: 'tollgate_sidecar_added_latency_seconds',
    help: "Time in the sidecar before it answered or forwarded (decision and proxy), the upstream MCP server's own time left out",
    labelNames: ['kind'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly #breaker = new Gauge({
    name: 'tollgate_sidecar_breaker_state',
    help: 'The circuit breaker in front of Tollgate: 0 closed, 1 open, 2 half-open',
    registers: [this.registry],
  });
  readonly #transitions = new Counter({
    name: 'tollgate_sidecar_breaker_transitions_total',
    help: 'Circuit breaker transitions, by the state moved to',
    labelNames: ['to'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.#breaker.set(0);
  }

  /** One call answered: its outcome, and the seconds the sidecar itself spent on it. */
  call(kind: CallKind, outcome: CallOutcome, addedSeconds: number): void {
    this.#calls.inc({ kind, outcome });
    this.#added.observe({ kind }, addedSeconds);
  }

  breaker(to: BreakerState): void {
    this.#breaker.set(BREAKER_VALUE[to]);
    this.#transitions.inc({ to });
  }
}

/**
 * `GET /metrics` on its own listener, on all addresses so that Prometheus can scrape the pod; the
 * agent-facing server stays on loopback. Nothing else is served.
 */
export async function startMetricsServer(metrics: SidecarMetrics, port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET', 'content-type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics failed\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
