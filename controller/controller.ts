import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AgentStatusPoller } from './agent-status.js';
import { EgressController, type EgressSettings } from './egress.js';
import { Informer, type EventHandler, type EventType } from './informers.js';
import { GROUP, KIND_NAMES, KINDS, VERSION, type Kind, type KindObject, type Status, type TollgateObject, type ToolSpec } from './kinds.js';
import { backoff, objectKey, statusOf, type ResourceRef } from './kube.js';
import { LeaderElector, leaseClient, type LeaderElectorOptions } from './leader.js';
import { ControllerMetrics } from './metrics.js';
import { ObjectWriter, secretStore, setCondition } from './objects.js';
import { WorkQueue, type ReconcileResult } from './queue.js';
import { agentReconciler } from './reconcilers/agent.js';
import { mcpServerReconciler, toolReconciler } from './reconcilers/inventory.js';
import { policyReconciler } from './reconcilers/policy.js';
import type { Informers, KindReconciler, Outcome, ReconcileContext } from './reconcilers/types.js';
import { AGENT_LABEL, FINALIZER, IDENTITY_ANNOTATION, IDENTITY_SECRET_SELECTOR, ORGANISATION_ANNOTATION } from './resources.js';
import { TollgateApiError, type TollgateApi } from './tollgate-api.js';

export interface ControllerOptions {
  kubeConfig: KubeConfig;
  api: TollgateApi;
  /** The slug of the organisation the credential belongs to (GET /tenants/current). */
  organisation: string;
  /** Reconcile namespaces without the tollgate.dev/organization annotation. Default true. */
  claimUnannotated?: boolean;
  /** Where the leader-election Lease lives. */
  leaseNamespace: string;
  /** Default tollgate-controller-<organisation>: one leader per organisation. */
  leaseName?: string;
  identity?: string;
  /** Reconciles in flight per kind. Default 4. */
  workers?: number;
  /** Every object is reconciled again this often (drift repair). Default 5 minutes. */
  resyncMs?: number;
  /** Lease timings (tests shorten them). */
  lease?: Partial<Pick<LeaderElectorOptions, 'leaseDurationSeconds' | 'renewDeadlineMs' | 'renewPeriodMs' | 'retryPeriodMs'>>;
  /** A NetworkPolicy per injected pod (docs/kubernetes.md); absent: none. */
  egress?: EgressSettings;
  /** How often the Agents' status (risk band, last decision, containment) is read from Tollgate. Default 60 s. */
  statusPollMs?: number;
  /** At most one CallsDenied Event per agent this often. Default 5 minutes. */
  deniedIntervalMs?: number;
  /** Where the reconcile, queue and leader metrics go; the controller makes its own when absent. */
  metrics?: ControllerMetrics;
  log: Logger;
}

/** The Agents' identity Secrets (core/v1), which the controller watches besides its kinds. */
const SECRETS: ResourceRef = { group: '', version: 'v1', plural: 'secrets' };

/** The name an object takes in the registry: two objects of one organisation may not share it. */
function registryName(kind: Kind, obj: TollgateObject): string {
  return kind === 'Tool' ? (obj.spec as ToolSpec).toolKey : obj.metadata!.name!;
}

function earlier(a: TollgateObject, b: TollgateObject): boolean {
  const ta = Date.parse(String(a.metadata?.creationTimestamp ?? ''));
  const tb = Date.parse(String(b.metadata?.creationTimestamp ?? ''));
  return ta !== tb ? ta < tb : objectKey(a) < objectKey(b);
}

/**
 * Which namespaces this controller reconciles: those annotated tollgate.dev/organization with its
 * organisation's slug, and (with claimUnannotated) those without the annotation. Read through a
 * 30-second cache, so a changed annotation takes effect within a resync.
 */
class NamespaceScope {
  private readonly cache = new Map<string, { managed: boolean; at: number }>();
  private readonly core: CoreV1Api;

  constructor(
    kc: KubeConfig,
    private readonly organisation: string,
    private readonly claimUnannotated: boolean,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
  }

  async manages(namespace: string): Promise<boolean> {
    const hit = this.cache.get(namespace);
    if (hit && Date.now() - hit.at < 30_000) return hit.managed;
    let annotation: string | undefined;
    try {
      const ns = await this.core.readNamespace({ name: namespace });
      annotation = ns.metadata?.annotations?.[ORGANISATION_ANNOTATION];
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
    const managed = annotation === undefined ? this.claimUnannotated : annotation === this.organisation;
    this.cache.set(namespace, { managed, at: Date.now() });
    return managed;
  }

  /** The last answer for the namespace, without asking the API server; false when never asked. */
  known(namespace: string): boolean {
    return this.cache.get(namespace)?.managed ?? false;
  }
}

/**
 * `tollgate controller`: one leader per organisation (a coordination.k8s.io Lease) runs a work queue and
 * an informer per kind (and one on the Agents' identity Secrets) and reconciles every Agent, Tool,
 * MCPServer and Policy of its namespaces into the registry through the Tollgate API. Standbys wait for the Lease. stop() finishes the reconciles in
 * flight, releases the Lease (a standby takes over at once) and closes the API connections.
 */
export class Controller {
  private readonly elector: LeaderElector;
  private readonly writer: ObjectWriter;
  private readonly scope: NamespaceScope;
  private informers?: Informers;
  private reconcilers?: Record<Kind, KindReconciler>;
  private readonly log: Logger;
  readonly metrics: ControllerMetrics;
  /** Reconciles finished since the start (tests and the benchmark watch it). */
  reconciles = 0;

  constructor(private readonly opts: ControllerOptions) {
    this.log = opts.log;
    this.metrics = opts.metrics ?? new ControllerMetrics();
    this.scope = new NamespaceScope(opts.kubeConfig, opts.organisation, opts.claimUnannotated ?? true);
    const lease = opts.leaseName ?? `tollgate-controller-${opts.organisation}`;
    this.metrics.leading(lease, false);
    this.elector = new LeaderElector({
      leases: leaseClient(opts.kubeConfig),
      namespace: opts.leaseNamespace,
      name: lease,
      identity: opts.identity,
      ...opts.lease,
      onStartedLeading: (signal) => {
        this.metrics.leading(lease, true);
        return this.lead(signal);
      },
      onStoppedLeading: () => {
        this.metrics.leading(lease, false);
        this.log.info('stopped leading');
      },
      onError: (err) => this.log.warn({ err: describe(err) }, 'leader election'),
    });
    this.writer = new ObjectWriter(opts.kubeConfig, 'tollgate-controller', this.elector.identity);
  }

  get identity(): string {
    return this.elector.identity;
  }

  isLeader(): boolean {
    return this.elector.isLeader();
  }

  start(): void {
    this.log.info({ organisation: this.opts.organisation, identity: this.elector.identity }, 'controller starting');
    this.elector.start();
  }

  /** Graceful shutdown: reconciles in flight finish, the Lease is released, connections close. */
  async stop(): Promise<void> {
    await this.elector.release();
    await this.opts.api.close();
    this.log.info('controller stopped');
  }

  /** The leader's work, until `signal` aborts. */
  private async lead(signal: AbortSignal): Promise<void> {
    const stopping = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    if (!(await this.waitForCrds(signal, stopping))) return;
    this.log.info('leading: starting informers');
    const workers = this.opts.workers ?? 4;
    this.metrics.dropQueues();
    const queues = Object.fromEntries(
      KIND_NAMES.map((kind) => {
        const name = kind.toLowerCase();
        const queue = new WorkQueue({
          metrics: this.metrics.queue(name),
          onError: (key, err) => this.log.warn({ kind, key, err: describe(err) }, 'reconcile failed; retrying with backoff'),
        });
        this.metrics.controller(name, queue, workers);
        return [kind, queue];
      }),
    ) as Record<Kind, WorkQueue>;
    const informers = this.watchKinds(queues);
    const secrets = this.watchIdentitySecrets(queues.Agent, informers);
    const ctx: ReconcileContext = { api: this.opts.api, informers, secrets: secretStore(this.opts.kubeConfig) };
    this.informers = informers;
    this.reconcilers = {
      Agent: agentReconciler(ctx),
      Tool: toolReconciler(ctx),
      MCPServer: mcpServerReconciler(ctx),
      Policy: policyReconciler(ctx),
    };
    const all = [...Object.values(informers), secrets];
    for (const informer of all) informer.start();
    const egress = this.opts.egress
      ? new EgressController({
          kubeConfig: this.opts.kubeConfig,
          settings: this.opts.egress,
          manages: (ns) => this.scope.manages(ns),
          writer: this.writer,
          log: this.log,
          metrics: this.metrics,
          workers,
        })
      : undefined;
    egress?.start();
    let egressRunning: Promise<void> | undefined;
    let polling: Promise<void> | undefined;
    try {
      // The kinds' caches only: the Secrets' is a trigger that reconciles do not read, and may be refused (RBAC).
      while (!signal.aborted && !Object.values(informers).every((i) => i.hasSynced())) {
        await Promise.race([stopping, new Promise((r) => setTimeout(r, 50))]);
      }
      if (signal.aborted) return;
      this.log.info('caches synced: reconciling');
      const resync = setInterval(() => {
        for (const kind of KIND_NAMES) for (const obj of informers[kind].list()) queues[kind].add(objectKey(obj));
        if (egress?.hasSynced()) egress.resync();
      }, this.opts.resyncMs ?? 300_000);
      const running = KIND_NAMES.map((kind) =>
        queues[kind].run(workers, (key) => this.metrics.reconcile(kind.toLowerCase(), () => this.reconcile(kind, key))),
      );
      // The pods' caches apart: pods the controller may not watch (RBAC) must not hold up the kinds.
      if (egress) egressRunning = this.runEgress(egress, signal, stopping);
      polling = this.pollStatus(informers, signal, stopping);
      await stopping;
      clearInterval(resync);
      await Promise.all([...KIND_NAMES.map((kind) => queues[kind].shutDown()), egress?.queue.shutDown()]);
      await Promise.all([...running, egressRunning, polling]);
    } finally {
      await Promise.all([...all.map((i) => i.stop()), egress?.stop()]);
      this.log.info('leading ended: informers stopped');
    }
  }

  /**
   * Waits until the API server serves the four kinds: a controller started before `kubectl apply -f
   * crds/` says so once, at info, and looks again with backoff (1 s doubling to 16 s) instead of
   * logging every failed list; it starts reconciling as soon as they appear, without a restart. False
   * when leadership ended first.
   */
  private async waitForCrds(signal: AbortSignal, stopping: Promise<void>): Promise<boolean> {
    const custom = this.opts.kubeConfig.makeApiClient(CustomObjectsApi);
    let attempts = 0;
    let told = false;
    while (!signal.aborted) {
      let missing: string[] = KIND_NAMES.map((k) => KINDS[k].plural);
      try {
        const served = new Set((await custom.getAPIResources({ group: GROUP, version: VERSION })).resources.map((r) => r.name));
        missing = missing.filter((p) => !served.has(p));
      } catch (err) {
        // 404: the group is not served at all yet. Anything else is worth a line.
        if (statusOf(err) !== 404) this.log.warn({ err: describe(err) }, 'could not read the tollgate.dev API group; retrying with backoff');
      }
      if (!missing.length) {
        if (told) this.log.info('the tollgate.dev CRDs are installed: starting');
        return true;
      }
      if (!told) {
        this.log.info({ missing: missing.map((p) => `${p}.${GROUP}`) }, `waiting for the ${GROUP} CRDs (kubectl apply -f crds/)`);
        told = true;
      }
      attempts++;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stopping, new Promise((r) => (timer = setTimeout(r, backoff(attempts, 1000, 16_000))))]);
      clearTimeout(timer);
    }
    return false;
  }

  /** The pods' egress policies, once its caches are filled. */
  private async runEgress(egress: EgressController, signal: AbortSignal, stopping: Promise<void>): Promise<void> {
    while (!signal.aborted && !egress.hasSynced()) await Promise.race([stopping, new Promise((r) => setTimeout(r, 50))]);
    if (signal.aborted) return;
    this.log.info('egress: pods and policies synced');
    egress.resync(); // policies whose pod went while no controller watched
    await egress.run();
  }

  /** The Agents' status from Tollgate (AgentStatusPoller), every statusPollMs, until leadership ends. */
  private async pollStatus(informers: Informers, signal: AbortSignal, stopping: Promise<void>): Promise<void> {
    const poller = new AgentStatusPoller({
      api: this.opts.api,
      agents: informers.Agent,
      manages: (ns) => this.scope.known(ns),
      writer: this.writer,
      log: this.log,
      deniedIntervalMs: this.opts.deniedIntervalMs ?? 300_000,
    });
    while (!signal.aborted) {
      try {
        await poller.poll();
      } catch (err) {
        this.log.warn({ err: describe(err) }, 'agent status poll failed; polling again at the next period');
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stopping, new Promise((r) => (timer = setTimeout(r, this.opts.statusPollMs ?? 60_000)))]);
      clearTimeout(timer);
    }
  }

  /**
   * An informer per kind. Each queues its own objects when their spec changes or their deletion starts
   * (status-only changes, the controller's own writes among them, are not worth a reconcile), and the
   * objects that wait for it once it is registered: an MCPServer's Tools, a Tool's Agents.
   */
  private watchKinds(queues: Record<Kind, WorkQueue>): Informers {
    const informer = <K extends Kind>(kind: K, ...waiting: EventHandler<KindObject<K>>[]) =>
      new Informer<KindObject<K>>(this.opts.kubeConfig, KINDS[kind], {
        handlers: [{ queue: queues[kind], predicate: specChanged }, ...waiting],
        onError: (err) =>
          // 404: the CRD is not served (yet, just after discovery lists it, or any more): debug, not a warning per retry.
          statusOf(err) === 404
            ? this.log.debug({ kind }, `${KINDS[kind].plural}.${GROUP} not served; retrying with backoff`)
            : this.log.warn({ kind, err: describe(err) }, 'watch failed; resuming with backoff'),
      });
    const sameNamespace = (a: TollgateObject, b: TollgateObject) => a.metadata?.namespace === b.metadata?.namespace;
    const informers: Informers = {
      Agent: informer('Agent'),
      Tool: informer('Tool', {
        queue: queues.Agent,
        predicate: registered,
        keysOf: (tool) =>
          informers.Agent.list()
            .filter((a) => sameNamespace(a, tool) && (a.spec.tools ?? []).some((t) => t.tool === tool.spec.toolKey))
            .map(objectKey),
      }),
      MCPServer: informer('MCPServer', {
        queue: queues.Tool,
        predicate: registered,
        keysOf: (server) =>
          informers.Tool.list()
            .filter((t) => sameNamespace(t, server) && t.spec.mcpServerRef?.name === server.metadata?.name)
            .map(objectKey),
      }),
      Policy: informer('Policy'),
    };
    return informers;
  }

  /**
   * The identity Secrets (selected by their labels; the cache keeps their metadata only, no credential):
   * one deleted, or holding another identity than the controller wrote, requeues its Agent at once instead
   * of at the next resync, as cert-manager does with the Secrets it owns. Their creation is the
   * controller's own write, not worth a reconcile. Without RBAC to watch Secrets cluster-wide (the chart's
   * secretsScope=namespaces) the resync alone repairs a lost one.
   */
  private watchIdentitySecrets(agents: WorkQueue, informers: Informers): Informer<V1Secret> {
    const annotation = (s: V1Secret | undefined) => s?.metadata?.annotations?.[IDENTITY_ANNOTATION];
    let refused = false;
    return new Informer<V1Secret>(this.opts.kubeConfig, SECRETS, {
      labelSelector: IDENTITY_SECRET_SELECTOR,
      transform: (s) => ({ apiVersion: s.apiVersion, kind: s.kind, metadata: s.metadata }),
      handlers: [
        {
          queue: agents,
          predicate: (type, secret, old) => type === 'DELETED' || (type === 'MODIFIED' && annotation(secret) !== annotation(old)),
          keysOf: (secret) => {
            const key = `${secret.metadata!.namespace!}/${secret.metadata!.labels![AGENT_LABEL]!}`;
            const agent = informers.Agent.get(key);
            // An Agent being deleted deletes its Secret itself.
            return agent && !agent.metadata?.deletionTimestamp ? [key] : [];
          },
        },
      ],
      onError: (err) => {
        if (statusOf(err) !== 403) return this.log.warn({ err: describe(err) }, 'watch of identity Secrets failed; resuming with backoff');
        if (!refused) this.log.warn('no permission to watch Secrets in every namespace: a lost identity Secret is repaired at the next resync');
        refused = true;
      },
    });
  }

  /** One pass over one object: the finalizer on delete, else apply and report in the status. */
  private async reconcile(kind: Kind, key: string): Promise<ReconcileResult | undefined> {
    const obj: TollgateObject | undefined = this.informers![kind].get(key);
    if (!obj) return undefined; // gone: its finalizer ran before
    if (!(await this.scope.manages(obj.metadata!.namespace!))) return undefined;
    const ref = KINDS[kind];
    const reconciler = this.reconcilers![kind];
    const finalizers = obj.metadata!.finalizers ?? [];
    const conflict = this.conflictOf(kind, obj);

    if (obj.metadata!.deletionTimestamp) {
      if (!finalizers.includes(FINALIZER)) return undefined;
      if (!conflict && reconciler.finalize) await reconciler.finalize(obj);
      await this.ignoreGone(this.writer.setFinalizers(ref, obj, finalizers.filter((f) => f !== FINALIZER)));
      this.log.info({ kind, key }, conflict ? 'deleted (held no registry record)' : 'deleted: registry side done');
      this.reconciles++;
      return undefined;
    }

    let current = obj;
    let outcome: Outcome;
    if (conflict) {
      outcome = {
        ready: false,
        settled: true,
        reason: 'NameConflict',
        message: `${kind} ${objectKey(conflict)} already stands for "${registryName(kind, obj)}" in this organisation`,
      };
    } else {
      if (reconciler.finalize && !finalizers.includes(FINALIZER)) {
        current = await this.writer.setFinalizers(ref, obj, [...finalizers, FINALIZER]);
      }
      try {
        outcome = await reconciler.apply(current);
      } catch (err) {
        await this.report(ref, current, failure(err)).catch((e: unknown) =>
          this.log.warn({ kind, key, err: describe(e) }, 'status write failed'),
        );
        throw err;
      }
    }
    const generation = current.metadata!.generation!;
    const putBack = outcome.putBack ?? [];
    if (putBack.length && current.status?.observedGeneration === generation) {
      // Changed through the API since the last reconcile of this very generation: drift, put back.
      const message = `registry fields changed outside Kubernetes were put back: ${putBack.join(', ')}`;
      this.log.warn({ kind, key, registryId: outcome.registryId, fields: putBack }, 'drift corrected');
      outcome = { ...outcome, message: `${outcome.message}; ${message} at ${new Date().toISOString()}` };
      await this.writer.event(current, 'Warning', 'DriftCorrected', message).catch((e: unknown) =>
        this.log.warn({ kind, key, err: describe(e) }, 'event write failed'),
      );
    }
    await this.report(ref, current, outcome);
    for (const e of outcome.events ?? []) {
      this.log.info({ kind, key, reason: e.reason }, e.message);
      await this.writer.event(current, e.type, e.reason, e.message).catch((err: unknown) =>
        this.log.warn({ kind, key, err: describe(err) }, 'event write failed'),
      );
    }
    this.reconciles++;
    return { requeueAfterMs: outcome.requeueAfterMs };
  }

  /** Another object of the kind, older, that stands for the same registry record. */
  private conflictOf(kind: Kind, obj: TollgateObject): TollgateObject | undefined {
    const name = registryName(kind, obj);
    return this.informers![kind]
      .list()
      .find(
        (o) =>
          o.metadata?.uid !== obj.metadata?.uid &&
          !o.metadata?.deletionTimestamp &&
          registryName(kind, o) === name &&
          this.scope.known(o.metadata!.namespace!) &&
          earlier(o, obj),
      );
  }

  /** Writes the status an outcome amounts to; a generation counts as observed once ready or settled. */
  private async report(ref: ResourceRef, obj: TollgateObject, outcome: Outcome): Promise<void> {
    const generation = obj.metadata!.generation!;
    const observed = outcome.ready || outcome.settled;
    // A merge patch of the fields reconciles own: the status poller's (riskBand...) are left as they are.
    const status: Status = {
      ...outcome.status,
      observedGeneration: observed ? generation : obj.status?.observedGeneration,
      registryId: outcome.registryId ?? obj.status?.registryId,
      conditions: setCondition(
        obj.status?.conditions,
        {
          type: 'Ready',
          status: outcome.ready ? 'True' : 'False',
          reason: outcome.reason,
          message: outcome.message.slice(0, 32_000),
          observedGeneration: generation,
        },
        new Date(),
      ),
    };
    await this.ignoreGone(this.writer.writeStatus(ref, obj, status));
  }

  private async ignoreGone(p: Promise<unknown>): Promise<void> {
    try {
      await p;
    } catch (err) {
      if (statusOf(err) !== 404) throw err;
    }
  }
}

/** Whether a change of one of the controller's objects is worth reconciling it: not a status-only one. */
function specChanged(type: EventType, obj: TollgateObject, old: TollgateObject | undefined): boolean {
  return (
    type !== 'MODIFIED' ||
    old?.metadata?.generation !== obj.metadata?.generation ||
    !!old?.metadata?.deletionTimestamp !== !!obj.metadata?.deletionTimestamp
  );
}

/** Whether an object got its registry id: the objects that wait for it can go on. */
function registered(type: EventType, obj: TollgateObject, old: TollgateObject | undefined): boolean {
  const id = obj.status?.registryId;
  return type !== 'DELETED' && !!id && id !== old?.status?.registryId;
}

/** The Ready=False outcome of a failed reconcile (the generation stays unobserved; the queue retries). */
function failure(err: unknown): Outcome {
  if (err instanceof TollgateApiError) {
    const fields = (err.details as { fields?: { field: string; message: string }[] } | null)?.fields;
    const detail = fields?.length ? ` (${fields.map((f) => `${f.field}: ${f.message}`).join('; ')})` : '';
    return { ready: false, reason: 'RegistryRefused', message: `Tollgate answered ${err.message}${detail}` };
  }
  return { ready: false, reason: 'ReconcileError', message: describe(err) };
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
