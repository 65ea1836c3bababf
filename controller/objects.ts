import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig, type KubernetesObject, type V1Secret } from '@kubernetes/client-node';
import type { Condition, Status, TollgateObject } from './kinds.js';
import { statusOf, type ResourceRef } from './kube.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The controller's name on its Events (events.k8s.io/v1 reportingController, core/v1 reportingComponent). */
export const REPORTING_CONTROLLER = 'tollgate.dev/controller';

/** Several occurrences of one thing folded into one Event (core/v1 count, first and last timestamps). */
export interface Occurrences {
  count: number;
  first: Date;
  last: Date;
}

/** The writes the reconcilers make to the API server: status, finalizers, events. */
export class ObjectWriter {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;

  constructor(
    kc: KubeConfig,
    private readonly component = 'tollgate-controller',
    /** This replica (the leader-election identity): events.k8s.io/v1 reportingInstance. */
    private readonly instance = component,
  ) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  /** Replaces the status (merge patch of the status subresource). */
  async writeStatus(ref: ResourceRef, obj: TollgateObject, status: Status): Promise<void> {
    const { namespace, name } = obj.metadata as { namespace: string; name: string };
    await this.custom.patchNamespacedCustomObjectStatus(
      { group: ref.group, version: ref.version, plural: ref.plural, namespace, name, body: { status } },
      mergePatch,
    );
  }

  /**
   * Sets metadata.finalizers, guarded by the object's resourceVersion (409 when it changed meanwhile,
   * so a finalizer someone else added or removed is never lost). Answers the updated object.
   */
  async setFinalizers(ref: ResourceRef, obj: TollgateObject, finalizers: string[]): Promise<TollgateObject> {
    const { namespace, name, resourceVersion } = obj.metadata as { namespace: string; name: string; resourceVersion: string };
    return (await this.custom.patchNamespacedCustomObject(
      {
        group: ref.group,
        version: ref.version,
        plural: ref.plural,
        namespace,
        name,
        body: { metadata: { finalizers: finalizers.length ? finalizers : null, resourceVersion } },
      },
      mergePatch,
    )) as TollgateObject;
  }

  /** Merges `fields` into the status (a null removes a field); the other fields stay as they are. */
  async patchStatus(ref: ResourceRef, obj: TollgateObject, fields: Record<string, unknown>): Promise<void> {
    const { namespace, name } = obj.metadata as { namespace: string; name: string };
    await this.custom.patchNamespacedCustomObjectStatus(
      { group: ref.group, version: ref.version, plural: ref.plural, namespace, name, body: { status: fields } },
      mergePatch,
    );
  }

  /**
   * A core/v1 Event on the object (kubectl describe shows it), reported by tollgate.dev/controller;
   * `occurrences` folds several into one (count, first and last time), as the API server's own
   * aggregation does. Best effort: a failure is only logged by the caller.
   */
  async event(obj: KubernetesObject, type: 'Normal' | 'Warning', reason: string, message: string, occurrences?: Occurrences): Promise<void> {
    const { namespace, name, uid, resourceVersion } = obj.metadata as { namespace: string; name: string; uid: string; resourceVersion: string };
    const involved = { apiVersion: obj.apiVersion, kind: obj.kind, name, namespace, uid, resourceVersion };
    const now = new Date();
    const first = occurrences?.first ?? now;
    const last = occurrences?.last ?? now;
    await this.core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { generateName: `${name}.`, namespace },
        involvedObject: involved,
        reason,
        message: message.slice(0, 1024),
        type,
        source: { component: this.component },
        firstTimestamp: first,
        lastTimestamp: last,
        count: occurrences?.count ?? 1,
        reportingComponent: REPORTING_CONTROLLER,
        reportingInstance: this.instance.slice(0, 128),
      },
    });
  }
}

/** The Secrets the controller keeps (each Agent's workload identity). */
export interface SecretStore {
  get(namespace: string, name: string): Promise<V1Secret | undefined>;
  /** Creates the Secret, or replaces it when it exists. */
  put(secret: V1Secret & { metadata: { name: string; namespace: string } }): Promise<void>;
  delete(namespace: string, name: string): Promise<void>;
}

export function secretStore(kc: KubeConfig): SecretStore {
  const core = kc.makeApiClient(CoreV1Api);
  return {
    async get(namespace, name) {
      try {
        return await core.readNamespacedSecret({ namespace, name });
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    },
    async put(secret) {
      const { namespace, name } = secret.metadata;
      try {
        await core.createNamespacedSecret({ namespace, body: secret });
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
        await core.replaceNamespacedSecret({ namespace, name, body: secret });
      }
    },
    async delete(namespace, name) {
      try {
        await core.deleteNamespacedSecret({ namespace, name });
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
      }
    },
  };
}

/**
 * The conditions after setting one: lastTransitionTime moves only when the status changes, as
 * metav1's SetStatusCondition does.
 */
export function setCondition(conditions: Condition[] | undefined, next: Omit<Condition, 'lastTransitionTime'>, now: Date): Condition[] {
  const list = conditions ?? [];
  const old = list.find((c) => c.type === next.type);
  const lastTransitionTime = old && old.status === next.status ? old.lastTransitionTime : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return [...list.filter((c) => c.type !== next.type), { ...next, lastTransitionTime }];
}
