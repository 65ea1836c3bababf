import type { RegistryClient } from '../registry.js';
import type { Informer } from '../informers.js';
import type { SecretStore } from '../objects.js';
import type { TollgateObject } from '../resources.js';

/** What a reconcile found and did; the manager turns it into the object's status. */
export interface Outcome {
  registryId?: string;
  ready: boolean;
  /** CamelCase, as metav1.Condition wants: Reconciled, Revoked, NameConflict... */
  reason: string;
  message: string;
  /**
   * A refusal that retrying cannot cure (a revoked agent, a name another object holds): the generation
   * counts as observed, and the key comes back only with a change or the periodic resync.
   */
  settled?: boolean;
  /** Registry fields changed outside Kubernetes and put back in this reconcile (drift). */
  putBack?: string[];
  /** Kind-specific status fields (trustState, latestVersion...). */
  status?: Record<string, unknown>;
}

export type Kind = 'Agent' | 'Tool' | 'MCPServer' | 'Policy';

export interface ReconcileContext {
  registry: RegistryClient;
  /** The informers' caches, for references between objects (a Tool's MCPServer). */
  informers: Record<Kind, Informer<TollgateObject>>;
  /** Each Agent's identity Secret. */
  secrets: SecretStore;
}

export interface KindReconciler {
  /** Makes the registry hold the object as declared. Throws to retry with backoff. */
  apply(obj: TollgateObject): Promise<Outcome>;
  /**
   * The registry's side of deleting the object, run before the finalizer is removed; absent when a
   * delete leaves Tollgate alone (Policy).
   */
  finalize?(obj: TollgateObject): Promise<void>;
}

/** A reconcile that must wait for something else (an object it refers to): retried with backoff. */
export class Waiting extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.reason = reason;
  }
}
