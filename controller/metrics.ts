import { createServer, type Server } from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueMetrics, WorkQueue } from './queue.js';

/** controller-runtime's buckets for reconcile and work-queue durations (seconds). */
const RECONCILE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60];
const QUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000];

export type ReconcileResultLabel = 'success' | 'error' | 'requeue' | 'requeue_after';
const RESULTS: ReconcileResultLabel[] = ['success', 'error', 'requeue', 'requeue_after'];

/**
 * The controller's Prometheus metrics, named as controller-runtime and client-go name theirs so that the
 * dashboards and alerts written for Go operators work unchanged: reconciles by controller and result,
 * reconcile errors and durations, active and maximum workers, the work queues' depth, adds, latency,
 * work time, retries and stuck work, and the leader-election status; plus the process's default metrics.
 * One Registry per controller (no global): two controllers in one process, as in tests, do not collide.
 */
export class ControllerMetrics {
  readonly registry = new Registry();
  private readonly reconcileTotal: Counter<'controller' | 'result'>;
  private readonly reconcileErrors: Counter<'controller'>;
  private readonly reconcileTime: Histogram<'controller'>;
  private readonly activeWorkers: Gauge<'controller'>;
  private readonly maxConcurrent: Gauge<'controller'>;
  private readonly adds: Counter<'name'>;
  private readonly queueDuration: Histogram<'name'>;
  private readonly workDuration: Histogram<'name'>;
  private readonly retries: Counter<'name'>;
  private readonly leader: Gauge<'name'>;
  /** The queues the depth and in-flight gauges read at scrape time. */
  private readonly queues = new Map<string, WorkQueue>();

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.activeWorkers = new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    });
    this.maxConcurrent = new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers,
    });
    const queues = this.queues;
    new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: ['name'],
      registers,
      collect() {
        this.reset();
        for (const [name, q] of queues) this.set({ name }, q.length);
      },
    });
    this.adds = new Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames: ['name'], registers });
    this.queueDuration = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.workDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name'],
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.retries = new Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames: ['name'], registers });
    new Gauge({
      name: 'workqueue_unfinished_work_seconds',
      help: 'How many seconds of work has been done that is in progress and hasn\'t been observed by work_duration. Large values indicate stuck threads.',
      labelNames: ['name'],
      registers,
      collect() {
        this.reset();
        for (const [name, q] of queues) this.set({ name }, q.inFlightSeconds().reduce((sum, s) => sum + s, 0));
      },
    });
    new Gauge({
      name: 'workqueue_longest_running_processor_seconds',
      help: 'How many seconds has the longest running processor for workqueue been running.',
      labelNames: ['name'],
      registers,
      collect() {
        this.reset();
        for (const [name, q] of queues) this.set({ name }, Math.max(0, ...q.inFlightSeconds()));
      },
    });
    this.leader = new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. \'name\' is the string used to identify the lease.',
      labelNames: ['name'],
      registers,
    });
  }

  /** Declares a controller and its queue: the series exist (at zero) before the first reconcile. */
  controller(name: string, queue: WorkQueue, workers: number): void {
    for (const result of RESULTS) this.reconcileTotal.inc({ controller: name, result }, 0);
    this.reconcileErrors.inc({ controller: name }, 0);
    this.activeWorkers.set({ controller: name }, 0);
    this.maxConcurrent.set({ controller: name }, workers);
    this.adds.inc({ name }, 0);
    this.retries.inc({ name }, 0);
    this.queues.set(name, queue);
  }

  /** A queue's metrics under `name` (the controller's name, as controller-runtime names its queues). */
  queue(name: string): QueueMetrics {
    return {
      added: () => this.adds.inc({ name }),
      queued: (s) => this.queueDuration.observe({ name }, s),
      worked: (s) => this.workDuration.observe({ name }, s),
      retried: () => this.retries.inc({ name }),
    };
  }

  /** Times one reconcile and counts its result. */
  async reconcile<T extends { requeueAfterMs?: number } | void | undefined>(controller: string, run: () => Promise<T>): Promise<T> {
    const end = this.reconcileTime.startTimer({ controller });
    this.activeWorkers.inc({ controller });
    try {
      const result = await run();
      const after = (result as { requeueAfterMs?: number } | undefined)?.requeueAfterMs;
      this.reconcileTotal.inc({ controller, result: after !== undefined && after > 0 ? 'requeue_after' : 'success' });
      return result;
    } catch (err) {
      this.reconcileTotal.inc({ controller, result: 'error' });
      this.reconcileErrors.inc({ controller });
      throw err;
    } finally {
      this.activeWorkers.dec({ controller });
      end();
    }
  }

  leading(lease: string, leading: boolean): void {
    this.leader.set({ name: lease }, leading ? 1 : 0);
  }

  /** Forgets the queues of a leadership that ended (a new term makes new ones). */
  dropQueues(): void {
    this.queues.clear();
  }
}

/**
 * `GET /metrics` in Prometheus's text format, plain HTTP on every address (Prometheus scrapes the pod's
 * IP); port 0 picks a free one (tests). Anything else answers 404.
 */
export async function startMetricsServer(registry: Registry, port: number): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found: GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(text);
      },
      (err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`metrics failed: ${err instanceof Error ? err.message : String(err)}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve());
  });
  return {
    server,
    port: (server.address() as { port: number }).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
