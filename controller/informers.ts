import { CoreV1Api, CustomObjectsApi, NetworkingV1Api, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { systemClock, type Clock, type Timers } from '../lib/clock.js';
import { backoff, objectKey, statusOf, type ResourceRef } from './kube.js';

/** client-node's Watch, as a dependency: tests wrap it to break watches. */
export type Watcher = Pick<Watch, 'watch'>;

interface ObjectList<T> {
  metadata?: { resourceVersion?: string };
  items: T[];
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** Where an informer's changes go: a queue, the keys a change puts on it, and which changes count. */
export interface EventHandler<T> {
  queue: { add(key: string): void };
  /**
   * The keys a changed object puts on the queue: by default its own. A handler for objects that others
   * own or wait for answers theirs instead (controller-runtime's EnqueueRequestForOwner and
   * EnqueueRequestsFromMapFunc).
   */
  keysOf?: (obj: T) => string[];
  /**
   * Whether a change is worth a reconcile (controller-runtime's predicates); default every one. `old` is
   * the object as the cache held it before (undefined when it was not there).
   */
  predicate?: (type: EventType, obj: T, old: T | undefined) => boolean;
}

export interface InformerOptions<T = KubernetesObject> {
  /** Told of every object added, changed or deleted, after the cache holds the change. */
  handlers: EventHandler<T>[];
  /** Only the objects with these labels: the controller's own Secrets among all the cluster's. */
  labelSelector?: string;
  /** What the cache keeps of an object (client-go's transform): the Secret informer drops the data. */
  transform?: (obj: T) => T;
  watcher?: Watcher;
  /** Backoff between failed list or watch attempts. Default 1 s doubling to 30 s. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  clock?: Clock & Timers;
  onError?: (err: unknown) => void;
}

/** A watch shorter than this that saw no event counts as a failure, so a flapping server is not hammered. */
const HEALTHY_WATCH_MS = 1000;

/**
 * List, then watch from the list's resourceVersion, for one resource; every change updates a cache that
 * reconcilers read instead of the API server, then goes to the handlers' queues. When the watch ends
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
  private readonly listObjects: (labelSelector?: string) => Promise<ObjectList<T>>;
  private readonly watcher: Watcher;
  private readonly clock: Clock & Timers;

  constructor(
    kc: KubeConfig,
    private readonly resource: ResourceRef,
    private readonly opts: InformerOptions<T>,
  ) {
    this.listObjects = lister<T>(kc, resource);
    this.watcher = opts.watcher ?? new Watch(kc);
    this.clock = opts.clock ?? systemClock;
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
        const started = this.clock.now().getTime();
        const { err, events } = await this.watchOnce();
        if (this.stopped) break;
        if (statusOf(err) === 410) {
          this.resourceVersion = ''; // too old to resume: list again, at once (a failing list backs off)
          continue;
        }
        const healthy = events > 0 || this.clock.now().getTime() - started >= HEALTHY_WATCH_MS;
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
    const list = await this.listObjects(this.opts.labelSelector);
    if (this.stopped) return;
    const previous = new Map(this.cache);
    this.cache.clear();
    for (const o of list.items) this.cache.set(objectKey(o), this.keep(o));
    // What changed or vanished while we were not watching.
    for (const [key, old] of previous) if (!this.cache.has(key)) this.notify('DELETED', old, old);
    for (const [key, obj] of this.cache) {
      const old = previous.get(key);
      if (old?.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.notify(old ? 'MODIFIED' : 'ADDED', obj, old);
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    this.synced = true;
    this.failures = 0;
  }

  private keep(obj: T): T {
    return this.opts.transform ? this.opts.transform(obj) : obj;
  }

  private notify(type: EventType, obj: T, old: T | undefined): void {
    for (const handler of this.opts.handlers) {
      if (handler.predicate && !handler.predicate(type, obj, old)) continue;
      for (const key of handler.keysOf ? handler.keysOf(obj) : [objectKey(obj)]) handler.queue.add(key);
    }
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
      if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return; // BOOKMARK
      const key = objectKey(obj);
      const old = this.cache.get(key);
      const kept = this.keep(obj);
      if (type === 'DELETED') this.cache.delete(key);
      else this.cache.set(key, kept);
      this.notify(type, kept, old);
    };
    try {
      this.current = await this.watcher.watch(
        this.path,
        { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, labelSelector: this.opts.labelSelector },
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

/**
 * The list call of a resource: the custom objects API for the tollgate.dev kinds, the typed clients for
 * the built-in resources the controller watches (Secrets, Pods, NetworkPolicies).
 */
function lister<T>(kc: KubeConfig, resource: ResourceRef): (labelSelector?: string) => Promise<ObjectList<T>> {
  const { group, version, plural, namespace } = resource;
  if (group === 'networking.k8s.io' && version === 'v1' && plural === 'networkpolicies') {
    const net = kc.makeApiClient(NetworkingV1Api);
    return async (labelSelector) =>
      (namespace
        ? await net.listNamespacedNetworkPolicy({ namespace, labelSelector })
        : await net.listNetworkPolicyForAllNamespaces({ labelSelector })) as ObjectList<T>;
  }
  if (group) {
    const api = kc.makeApiClient(CustomObjectsApi);
    return async (labelSelector) =>
      (namespace
        ? await api.listNamespacedCustomObject({ group, version, plural, namespace, labelSelector })
        : await api.listClusterCustomObject({ group, version, plural, labelSelector })) as ObjectList<T>;
  }
  const core = kc.makeApiClient(CoreV1Api);
  if (version === 'v1' && plural === 'secrets') {
    return async (labelSelector) =>
      (namespace
        ? await core.listNamespacedSecret({ namespace, labelSelector })
        : await core.listSecretForAllNamespaces({ labelSelector })) as ObjectList<T>;
  }
  if (version === 'v1' && plural === 'pods') {
    return async (labelSelector) =>
      (namespace
        ? await core.listNamespacedPod({ namespace, labelSelector })
        : await core.listPodForAllNamespaces({ labelSelector })) as ObjectList<T>;
  }
  throw new Error(`no informer for core/${version} ${plural}: only Secrets and Pods`);
}
