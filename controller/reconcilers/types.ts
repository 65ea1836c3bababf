import type { Informer } from '../informers.js';
import type { Kind, KindObject, TollgateObject } from '../kinds.js';
import type { SecretStore } from '../objects.js';
import type { TollgateApi } from '../tollgate-api.js';

/** What a reconcile found and did; the controller turns it into the object's status. */
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
  /** Reconcile the object again after this long (controller-runtime's RequeueAfter). */
  requeueAfterMs?: number;
  /** Events on the object, written after its status (IdentityRotated...). */
  events?: { type: 'Normal' | 'Warning'; reason: string; message: string }[];
}

/** The informers of the four kinds, each with its objects' types. */
export type Informers = { [K in Kind]: Informer<KindObject<K>> };

export interface ReconcileContext {
  api: TollgateApi;
  /** The informers' caches, for references between objects (a Tool's MCPServer, an Agent's tools). */
  informers: Informers;
  /** Each Agent's identity Secret. */
  secrets: SecretStore;
}

export interface KindReconciler<O extends TollgateObject = TollgateObject> {
  /** Makes the registry hold the object as declared. Throws to retry with backoff. */
  apply(obj: O): Promise<Outcome>;
  /**
   * The registry's side of deleting the object, run before the finalizer is removed; absent when a
   * delete leaves Tollgate alone (Policy).
   */
  finalize?(obj: O): Promise<void>;
}

/**
 * How long a reconcile waiting for something (an object it refers to) waits before it looks again. The
 * object's own watch usually brings it back sooner: the controller requeues the Tools of an MCPServer and
 * the Agents of a Tool once its registry id is recorded. This is for what no watch sees: a tool
 * registered through the REST API.
 */
export const WAIT_MS = 30_000;

/** Ready=False while waiting for something: not an error (no backoff), the generation stays unobserved. */
export function waiting(reason: string, message: string, registryId?: string): Outcome {
  return { registryId, ready: false, reason, message, requeueAfterMs: WAIT_MS };
}
