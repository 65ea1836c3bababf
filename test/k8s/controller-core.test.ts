import { readFileSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, CustomObjectsApi, Watch, type KubeConfig, type KubernetesObject, type V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { Informer, type Watcher } from '../../controller/informers.js';
import { KINDS } from '../../controller/kinds.js';
import { loadKubeConfig } from '../../controller/kube.js';
import { LeaderElector, leaseClient, type LeaseClient } from '../../controller/leader.js';
import { AGENT_LABEL, IDENTITY_SECRET_SELECTOR, identitySecretLabels } from '../../controller/resources.js';
import { startKube, type KubeCluster } from '../support/kube-cluster.js';
import { eventually, installCrds } from '../support/kubectl.js';
import { ROOT } from '../support/processes.js';

let cluster: KubeCluster;
let kc: KubeConfig;

type Agent = KubernetesObject & { spec: Record<string, unknown> };
const agent = (name: string, purpose: string): Agent => {
  const a = parse(readFileSync(path.join(ROOT, 'examples', 'agent.yaml'), 'utf8')) as Agent;
  return { ...a, metadata: { name, namespace: 'default' }, spec: { ...a.spec, environment: 'development', purpose } };
};

/** A recording queue: the keys the informer fed, in order. */
const recorder = () => {
  const keys: string[] = [];
  return { keys, add: (k: string) => void keys.push(k) };
};

/** The real Watch, with handles to break the open watch, make the next ones fail, or answer 410 Gone. */
class BreakableWatch implements Watcher {
  private readonly real: Watch;
  private open?: AbortController;
  failNext = 0;
  goneNext = false;
  /** Drops the open watch's events, as if they were lost. */
  deaf = false;
  started = 0;
  constructor(kc: KubeConfig) {
    this.real = new Watch(kc);
  }
  async watch(...args: Parameters<Watch['watch']>): Promise<AbortController> {
    this.started++;
    if (this.failNext > 0) {
      this.failNext--;
      throw Object.assign(new Error('Service Unavailable'), { statusCode: 503 });
    }
    const [path, query, onEvent, done] = args;
    if (this.goneNext) {
      this.goneNext = false;
      onEvent('ERROR', { kind: 'Status', code: 410, message: 'too old resource version' });
      done(null);
      return new AbortController();
    }
    this.deaf = false;
    this.open = await this.real.watch(path, query, (type, obj) => this.deaf || onEvent(type, obj), done);
    return this.open;
  }
  break(): void {
    this.open?.abort();
  }
}

describe('controller core on a real Kubernetes API server', () => {
  beforeAll(async () => {
    cluster = await startKube();
    await installCrds(cluster);
    kc = loadKubeConfig({ KUBECONFIG: cluster.kubeconfigPath });
  }, 30 * 60_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('the informer lists, then sees an Agent created, updated and deleted, and survives broken watches', async () => {
    const api = kc.makeApiClient(CustomObjectsApi);
    const { group, version, plural } = KINDS.Agent;
    const namespace = 'default';
    await api.createNamespacedCustomObject({ group, version, plural, namespace, body: agent('before', 'listed') });

    const queue = recorder();
    const watch = new BreakableWatch(kc);
    const errors: unknown[] = [];
    const informer = new Informer<Agent>(kc, KINDS.Agent, {
      handlers: [{ queue }], watcher: watch, baseDelayMs: 50, maxDelayMs: 400, onError: (e) => errors.push(e),
    });
    informer.start();
    try {
      await eventually(() => informer.hasSynced(), 10_000, 'synced');
      expect(queue.keys).toEqual(['default/before']);
      expect(informer.get('default/before')?.spec.purpose).toBe('listed');

      await api.createNamespacedCustomObject({ group, version, plural, namespace, body: agent('a1', 'first') });
      await eventually(() => informer.get('default/a1'), 10_000, 'a1 added');
      expect(queue.keys.at(-1)).toBe('default/a1');

      await api.patchNamespacedCustomObject({ group, version, plural, namespace, name: 'a1', body: [{ op: 'replace', path: '/spec/purpose', value: 'second' }] });
      await eventually(() => informer.get('default/a1')?.spec.purpose === 'second', 10_000, 'a1 updated');

      await api.deleteNamespacedCustomObject({ group, version, plural, namespace, name: 'a1' });
      await eventually(() => !informer.get('default/a1'), 10_000, 'a1 deleted');
      expect(queue.keys.filter((k) => k === 'default/a1')).toHaveLength(3);
      expect(informer.list().map((a) => a.metadata?.name)).toEqual(['before']);

      // A broken watch resumes from the last resourceVersion, and still sees later changes.
      const before = watch.started;
      watch.break();
      await eventually(() => watch.started > before, 10_000, 'watch restarted');
      await api.createNamespacedCustomObject({ group, version, plural, namespace, body: agent('a2', 'after a break') });
      await eventually(() => informer.get('default/a2'), 10_000, 'a2 after break');

      // A server that refuses watches for a while: retried with backoff, then back to normal.
      const n = watch.started;
      watch.failNext = 3;
      watch.break();
      await eventually(() => watch.started >= n + 4, 10_000, 'retries');
      expect(errors.length).toBeGreaterThanOrEqual(3);
      await api.deleteNamespacedCustomObject({ group, version, plural, namespace, name: 'before' });
      await eventually(() => !informer.get('default/before'), 10_000, 'before deleted after failures');
      expect(queue.keys.at(-1)).toBe('default/before');

      // Events lost, then 410 Gone: the informer lists again and enqueues what vanished meanwhile.
      watch.deaf = true;
      await api.deleteNamespacedCustomObject({ group, version, plural, namespace, name: 'a2' });
      await new Promise((r) => setTimeout(r, 200));
      expect(informer.get('default/a2')).toBeDefined(); // the deletion was not seen
      const seen = queue.keys.length;
      watch.goneNext = true;
      watch.break();
      await eventually(() => !informer.get('default/a2'), 10_000, 'a2 gone after relist');
      expect(queue.keys.slice(seen)).toEqual(['default/a2']);
      expect(informer.list()).toEqual([]);
    } finally {
      await informer.stop();
    }
  });

  it('an informer of Secrets sees the labelled ones only, caches no data, and queues the keys its handler maps them to', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const namespace = 'default';
    const secret = (name: string, agent?: string): V1Secret => ({
      metadata: { name, namespace, labels: agent ? identitySecretLabels(agent) : {} },
      stringData: { 'client-secret': 'not-for-the-cache' },
    });
    await core.createNamespacedSecret({ namespace, body: secret('id-first', 'first') });
    await core.createNamespacedSecret({ namespace, body: secret('unrelated') });

    const queue = recorder();
    const informer = new Informer<V1Secret>(kc, { group: '', version: 'v1', plural: 'secrets' }, {
      labelSelector: IDENTITY_SECRET_SELECTOR,
      transform: (s) => ({ metadata: s.metadata }),
      handlers: [{ queue, keysOf: (s) => [`owner/${s.metadata!.labels![AGENT_LABEL]!}`], predicate: (type) => type !== 'ADDED' }],
    });
    informer.start();
    try {
      await eventually(() => informer.hasSynced(), 10_000, 'synced');
      expect(informer.list().map((s) => s.metadata?.name)).toEqual(['id-first']);
      expect(informer.get('default/id-first')).not.toHaveProperty('data');
      await core.createNamespacedSecret({ namespace, body: secret('id-second', 'second') });
      await eventually(() => informer.get('default/id-second'), 10_000, 'id-second added');
      expect(queue.keys).toEqual([]); // additions are not worth it here

      await core.deleteNamespacedSecret({ namespace, name: 'unrelated' }); // not selected: no event
      await core.deleteNamespacedSecret({ namespace, name: 'id-first' });
      await eventually(() => !informer.get('default/id-first'), 10_000, 'id-first deleted');
      expect(queue.keys).toEqual(['owner/first']);
    } finally {
      await informer.stop();
    }
  });

  describe('leader election', () => {
    /** A LeaseClient whose calls hang while paused: a leader stalled (GC pause, partition) mid-term. */
    const pausable = (inner: LeaseClient) => {
      let gate: Promise<void> | undefined;
      let open = () => {};
      const wrap = <A extends unknown[], R>(f: (...a: A) => Promise<R>) => async (...a: A) => {
        while (gate) await gate;
        return f(...a);
      };
      return {
        client: { get: wrap(inner.get), create: wrap(inner.create), replace: wrap(inner.replace) } as LeaseClient,
        pause: () => void (gate = new Promise((r) => (open = () => { gate = undefined; r(); }))),
        resume: () => open(),
      };
    };

    /** Two electors on one Lease; `leaders` tracks who leads now, `overlap` whether two ever did. */
    const pair = (lease: string) => {
      const state = { leaders: new Set<string>(), overlap: false, started: [] as string[] };
      const make = (id: string) => {
        const p = pausable(leaseClient(kc));
        const elector = new LeaderElector({
          leases: p.client, namespace: 'default', name: lease, identity: id,
          leaseDurationSeconds: 2, renewDeadlineMs: 1200, renewPeriodMs: 300, retryPeriodMs: 200,
          onStartedLeading: () => {
            state.leaders.add(id);
            state.started.push(id);
            if (state.leaders.size > 1) state.overlap = true;
          },
          onStoppedLeading: () => void state.leaders.delete(id),
        });
        return { id, elector, ...p };
      };
      return { state, a: make('a'), b: make('b') };
    };

    const holder = async (lease: string) =>
      (await leaseClient(kc).get('default', lease))?.spec?.holderIdentity;

    it('exactly one of two candidates leads, and release hands over at once', async () => {
      const { state, a, b } = pair('handover');
      a.elector.start();
      await eventually(() => a.elector.isLeader(), 10_000, 'a leads');
      b.elector.start();
      // b keeps trying through several retry periods and lease renewals, and never gets in.
      await new Promise((r) => setTimeout(r, 1000));
      expect([a.elector.isLeader(), b.elector.isLeader()]).toEqual([true, false]);
      expect(await holder('handover')).toBe('a');

      const t = Date.now();
      await a.elector.release();
      expect(a.elector.isLeader()).toBe(false);
      await eventually(() => b.elector.isLeader(), 5000, 'b takes over');
      expect(Date.now() - t).toBeLessThan(1500); // not the 2 s lease duration: the holder was cleared
      expect(await holder('handover')).toBe('b');
      expect(state.started).toEqual(['a', 'b']);
      expect(state.overlap).toBe(false);
      await b.elector.release();
      expect(await holder('handover')).toBeUndefined();
    });

    it('a leader that stops renewing steps down, and the other takes the lease after the lease duration', async () => {
      const { state, a, b } = pair('stall');
      a.elector.start();
      await eventually(() => a.elector.isLeader(), 10_000, 'a leads');
      b.elector.start();
      await new Promise((r) => setTimeout(r, 500));
      a.pause();
      const t = Date.now();
      await eventually(() => !a.elector.isLeader(), 5000, 'a steps down'); // its renew deadline
      expect(b.elector.isLeader()).toBe(false);
      await eventually(() => b.elector.isLeader(), 10_000, 'b takes over');
      const took = Date.now() - t;
      expect(took).toBeGreaterThanOrEqual(1500); // about the lease duration after a's last renewal
      expect(took).toBeLessThan(5000);
      expect(await holder('stall')).toBe('b');

      a.resume(); // the stalled process comes back and finds the lease taken
      await new Promise((r) => setTimeout(r, 600));
      expect([a.elector.isLeader(), b.elector.isLeader()]).toEqual([false, true]);
      expect(state.overlap).toBe(false);
      await Promise.all([a.elector.release(), b.elector.release()]);
    });
  });
});
