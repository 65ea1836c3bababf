import { CustomObjectsApi, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { backoff, objectKey, realClock, statusOf, type Clock } from './kube.js';

/** A namespaced resource to watch; `namespace` unset means every namespace. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  namespace?: string;
}

const tollgate = (plural: string): ResourceRef => ({ group: 'tollgate.dev', version: 'v1alpha1', plural });
/** The kinds of crds/ that the controller reconciles. */
export const KINDS = {
  Agent: tollgate('agents'),
  Tool: tollgate('tools'),
  MCPServer: tollgate('mcpservers'),
  Policy: tollgate('policies'),
} as const;

/** client-node's Watch, as a dependency: tests wrap it to break watches. */
export type Watcher = Pick<Watch, 'watch'>;

interface ObjectList<T> {
  metadata?: { resourceVersion?: string };
  items: T[];
}

export interface InformerOptions<T = KubernetesObject> {
  /** Receives the key of every object added, changed or deleted. */
  queue: { add(key: string): void };
  watcher?: Watcher;
  /** Backoff between failed list or watch attempts. Default 1 s doubling to 30 s. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  clock?: Clock;
  onError?: (err: unknown) => void;
  /**
   * Whether a MODIFIED event is worth a reconcile (controller-runtime's predicates); default every
   * change. The controller skips status-only changes, so its own status writes do not requeue.
   */
  changed?: (old: T | undefined, obj: T) => boolean;
}

/** A watch shorter than this that saw no event counts as a failure, so a flapping server is not hammered. */
const HEALTHY_WATCH_MS = 1000;

/**
 * List, then watch from the list's resourceVersion, for one resource; every change puts the object's key
 * on the queue and updates a cache that reconcilers read instead of the API server. When the watch ends
 * (the client's timeout, a dropped connection, an error) it resumes from the last resourceVersion seen;
 * when that is too old (410 Gone) it lists again, and enqueues what changed or vanished meanwhile.
 * Failures back off exponentially. client-node's makeInformer does not restart after an error, hence this.
 */
export class Informer<T extends KubernetesObject = KubernetesObject> {
  private readonly cache = new Map<string, T>();
  private resourceVersion = '';
  private synced = false;
  private stopped = true;
  private failures = 0;
  private current?: AbortController;
  private sleeping?: { handle: unknown; wake: () => void };
  private loop?: Promise<void>;
  private readonly api: CustomObjectsApi;
  private readonly watcher: Watcher;
  private readonly clock: Clock;

  constructor(
    kc: KubeConfig,
    private readonly resource: ResourceRef,
    private readonly opts: InformerOptions<T>,
  ) {
    this.api = kc.makeApiClient(CustomObjectsApi);
    this.watcher = opts.watcher ?? new Watch(kc);
    this.clock = opts.clock ?? realClock;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.abort();
    this.sleeping?.wake();
    await this.loop;
  }

  /** True once the first list has filled the cache: reconcilers should not start before. */
  hasSynced(): boolean {
    return this.synced;
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  private get path(): string {
    const { group, version, plural, namespace } = this.resource;
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    return namespace ? `${base}/namespaces/${namespace}/${plural}` : `${base}/${plural}`;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        const started = this.clock.now();
        const { err, events } = await this.watchOnce();
        if (this.stopped) break;
        if (statusOf(err) === 410) {
          this.resourceVersion = ''; // too old to resume: list again, at once (a failing list backs off)
          continue;
        }
        const healthy = events > 0 || this.clock.now() - started >= HEALTHY_WATCH_MS;
        // A watch that ran a while and ended (the client-side timeout included) just resumes.
        if (err && !(healthy && isTimeout(err))) throw err;
        if (!healthy) throw new Error(`watch ${this.path} ended at once`);
      } catch (err) {
        if (this.stopped) break;
        this.failures++;
        this.opts.onError?.(err);
        await this.sleep(backoff(this.failures, this.opts.baseDelayMs ?? 1000, this.opts.maxDelayMs ?? 30_000));
      }
    }
  }

  private async relist(): Promise<void> {
    const { group, version, plural, namespace } = this.resource;
    const list = (namespace
      ? await this.api.listNamespacedCustomObject({ group, version, plural, namespace })
      : await this.api.listClusterCustomObject({ group, version, plural })) as ObjectList<T>;
    if (this.stopped) return;
    const fresh = new Map(list.items.map((o) => [objectKey(o), o]));
    for (const [key, old] of this.cache) {
      if (!fresh.has(key)) this.opts.queue.add(key); // deleted while we were not watching
      else if (fresh.get(key)?.metadata?.resourceVersion === old.metadata?.resourceVersion) fresh.delete(key);
    }
    this.cache.clear();
    for (const o of list.items) this.cache.set(objectKey(o), o);
    for (const key of fresh.keys()) this.opts.queue.add(key);
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    this.synced = true;
    this.failures = 0;
  }

  /** One watch, until it ends; resolves with its error (if any) and how many events it delivered. */
  private async watchOnce(): Promise<{ err: unknown; events: number }> {
    let events = 0;
    let finish!: (err: unknown) => void;
    const ended = new Promise<unknown>((resolve) => (finish = resolve));
    let gone: unknown;
    const onEvent = (type: string, obj: T & { code?: number; message?: string }) => {
      if (type === 'ERROR') {
        // The server ends the watch after this; remember why.
        gone = Object.assign(new Error(`watch ${this.path}: ${obj.message ?? 'error'}`), { code: obj.code });
        return;
      }
      events++;
      this.failures = 0;
      const rv = obj.metadata?.resourceVersion;
      if (rv) this.resourceVersion = rv;
      if (type === 'BOOKMARK') return;
      const key = objectKey(obj);
      const old = this.cache.get(key);
      if (type === 'DELETED') this.cache.delete(key);
      else this.cache.set(key, obj);
      if (type === 'MODIFIED' && this.opts.changed && !this.opts.changed(old, obj)) return;
      this.opts.queue.add(key);
    };
    try {
      this.current = await this.watcher.watch(
        this.path,
        { resourceVersion: this.resourceVersion, allowWatchBookmarks: true },
        onEvent,
        (err: unknown) => finish(err),
      );
      if (this.stopped) this.current.abort();
    } catch (err) {
      finish(err);
    }
    const err = await ended;
    this.current = undefined;
    return { err: gone ?? err, events };
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.clock.clearTimeout(handle);
        this.sleeping = undefined;
        resolve();
      };
      const handle = this.clock.setTimeout(wake, ms);
      this.sleeping = { handle, wake };
    });
  }
}

function isTimeout(err: unknown): boolean {
  const name = (err as { name?: string } | null)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}
