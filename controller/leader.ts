import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { systemClock, type Clock, type Timers } from '../lib/clock.js';
import { defaultIdentity, statusOf } from './kube.js';

/** The Lease calls the elector makes; a dependency so that tests can stall one elector's API server. */
export interface LeaseClient {
  get(namespace: string, name: string): Promise<V1Lease | undefined>;
  create(namespace: string, lease: V1Lease): Promise<V1Lease>;
  replace(namespace: string, name: string, lease: V1Lease): Promise<V1Lease>;
}

export function leaseClient(kc: KubeConfig): LeaseClient {
  const api = kc.makeApiClient(CoordinationV1Api);
  return {
    async get(namespace, name) {
      try {
        return await api.readNamespacedLease({ name, namespace });
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    },
    create: (namespace, body) => api.createNamespacedLease({ namespace, body }),
    replace: (namespace, name, body) => api.replaceNamespacedLease({ name, namespace, body }),
  };
}

export interface LeaderElectorOptions {
  leases: LeaseClient;
  namespace: string;
  name: string;
  /** Unique per candidate. Default hostname_pid. */
  identity?: string;
  /** How long others wait, after the last renewal they saw, before taking the lease. Default 15. */
  leaseDurationSeconds?: number;
  /** How long the leader keeps leading without a successful renewal. Default 10 s; below the lease duration. */
  renewDeadlineMs?: number;
  /** How often the leader renews. Default 5 s. */
  renewPeriodMs?: number;
  /** How often a candidate tries to acquire, and a leader retries a failed renewal. Default 2 s. */
  retryPeriodMs?: number;
  /** Starts the leader's work; `signal` aborts when leadership ends. A returned promise is awaited by release(). */
  onStartedLeading: (signal: AbortSignal) => void | Promise<void>;
  onStoppedLeading?: () => void;
  onError?: (err: unknown) => void;
  clock?: Clock & Timers;
}

/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's: a candidate takes the lease when it
 * is free or when its record has not changed for the lease duration (measured on the candidate's own
 * clock, so clock skew between nodes does not matter); the leader renews it, every write guarded by
 * resourceVersion. A leader that cannot renew within the renew deadline stops leading on its own, before
 * anyone else may take over; it then stands as a candidate again. release() hands over at once.
 */
export class LeaderElector {
  readonly identity: string;
  private readonly o: Required<Omit<LeaderElectorOptions, 'identity' | 'onStoppedLeading' | 'onError' | 'clock'>>;
  private readonly clock: Clock & Timers;
  private stopped = true;
  private leading?: { controller: AbortController; work: Promise<void>; deadline: unknown };
  private observed?: { resourceVersion: string; at: number };
  private sleeping?: () => void;
  private loop?: Promise<void>;

  constructor(private readonly opts: LeaderElectorOptions) {
    this.identity = opts.identity ?? defaultIdentity();
    this.clock = opts.clock ?? systemClock;
    this.o = {
      leases: opts.leases,
      namespace: opts.namespace,
      name: opts.name,
      leaseDurationSeconds: opts.leaseDurationSeconds ?? 15,
      renewDeadlineMs: opts.renewDeadlineMs ?? 10_000,
      renewPeriodMs: opts.renewPeriodMs ?? 5_000,
      retryPeriodMs: opts.retryPeriodMs ?? 2_000,
      onStartedLeading: opts.onStartedLeading,
    };
    if (this.o.renewDeadlineMs >= this.o.leaseDurationSeconds * 1000) {
      throw new Error('renewDeadlineMs must be below the lease duration, or two leaders may overlap');
    }
  }

  isLeader(): boolean {
    return this.leading !== undefined;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  /**
   * Stops: ends leadership (aborting the leader's signal and awaiting its work), then clears the Lease's
   * holder so that another candidate takes over without waiting for the lease to expire.
   */
  async release(): Promise<void> {
    this.stopped = true;
    this.sleeping?.();
    await this.loop;
    const work = this.leading?.work;
    this.stopLeading();
    await work;
    const lease = await this.o.leases.get(this.o.namespace, this.o.name);
    if (lease?.spec?.holderIdentity !== this.identity) return;
    const now = new V1MicroTime(this.clock.now());
    await this.o.leases.replace(this.o.namespace, this.o.name, {
      ...lease,
      spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: now, acquireTime: now },
    });
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (!this.leading) {
        if (await this.attempt()) this.startLeading();
        else await this.sleep(this.o.retryPeriodMs);
        continue;
      }
      await this.sleep(this.o.renewPeriodMs);
      // Retry a failed renewal until it succeeds or the deadline timer ends leadership.
      while (this.leading && !this.stopped && !(await this.attempt())) await this.sleep(this.o.retryPeriodMs);
    }
  }

  /** One try to acquire or renew; true when this candidate holds the lease afterwards. */
  private async attempt(): Promise<boolean> {
    const { leases, namespace, name, leaseDurationSeconds } = this.o;
    const wasLeading = this.leading;
    try {
      const stamp = new V1MicroTime(this.clock.now());
      const lease = await leases.get(namespace, name);
      if (this.stopped || wasLeading !== this.leading) return false; // released or deposed meanwhile
      if (!lease) {
        const created = await leases.create(namespace, {
          metadata: { name, namespace },
          spec: { holderIdentity: this.identity, leaseDurationSeconds, acquireTime: stamp, renewTime: stamp, leaseTransitions: 0 },
        });
        return this.succeeded(created);
      }
      this.observe(lease);
      const holder = lease.spec?.holderIdentity;
      const mine = holder === this.identity;
      if (holder && !mine && !this.expired(lease)) return false;
      const spec = { ...lease.spec, holderIdentity: this.identity, leaseDurationSeconds, renewTime: stamp };
      if (!mine) {
        spec.acquireTime = stamp;
        spec.leaseTransitions = (lease.spec?.leaseTransitions ?? 0) + 1;
      }
      // metadata carries resourceVersion: a write racing another candidate's fails with 409.
      return this.succeeded(await leases.replace(namespace, name, { ...lease, spec }));
    } catch (err) {
      if (statusOf(err) !== 409) this.opts.onError?.(err);
      return false;
    }
  }

  private succeeded(lease: V1Lease): boolean {
    this.observe(lease);
    if (this.leading) this.armDeadline();
    return true;
  }

  /** Notes when the lease record last changed, on this process's clock. */
  private observe(lease: V1Lease): void {
    const rv = lease.metadata?.resourceVersion ?? '';
    if (this.observed?.resourceVersion !== rv) this.observed = { resourceVersion: rv, at: this.clock.now().getTime() };
  }

  private expired(lease: V1Lease): boolean {
    const seconds = lease.spec?.leaseDurationSeconds ?? this.o.leaseDurationSeconds;
    return !this.observed || this.clock.now().getTime() >= this.observed.at + seconds * 1000;
  }

  private startLeading(): void {
    const controller = new AbortController();
    this.leading = { controller, work: Promise.resolve(), deadline: undefined };
    this.armDeadline();
    this.leading.work = Promise.resolve()
      .then(() => this.o.onStartedLeading(controller.signal))
      .catch((err: unknown) => this.opts.onError?.(err));
  }

  private armDeadline(): void {
    if (!this.leading) return;
    this.clock.clearTimeout(this.leading.deadline);
    this.leading.deadline = this.clock.setTimeout(() => {
      this.stopLeading();
      this.sleeping?.(); // back to trying every retry period
    }, this.o.renewDeadlineMs);
  }

  private stopLeading(): void {
    const leading = this.leading;
    if (!leading) return;
    this.leading = undefined;
    this.clock.clearTimeout(leading.deadline);
    leading.controller.abort();
    this.opts.onStoppedLeading?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.clock.clearTimeout(handle);
        this.sleeping = undefined;
        resolve();
      };
      const handle = this.clock.setTimeout(wake, ms);
      this.sleeping = wake;
    });
  }
}
