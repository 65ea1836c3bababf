import type { KindObject } from '../kinds.js';
import { differing, policyRules, sameJson } from '../resources.js';
import { TollgateApiError } from '../tollgate-api.js';
import type { KindReconciler, ReconcileContext } from './types.js';

interface PolicyRecord extends Record<string, unknown> {
  id: string;
  key: string;
  version: number;
  latest_version: number;
  published_version: number | null;
  versions?: { number: number; rules: unknown[]; state: string }[];
}

/**
 * Policy → a policy whose newest version holds the declared rules. A change of the rules (or a version
 * added through the API that differs from them) becomes a new draft version; publishing it stays a
 * second person's act through the API (the controller's role has no policy:publish), and the status says
 * where publication stands. Deleting the resource leaves the policy in Tollgate: deactivating one is a
 * policy:publish decision, not a side effect of a delete.
 */
export function policyReconciler(ctx: ReconcileContext): KindReconciler<KindObject<'Policy'>> {
  const { api } = ctx;

  async function find(obj: KindObject<'Policy'>): Promise<PolicyRecord | undefined> {
    let id = obj.status?.registryId;
    if (id) {
      try {
        return await api.get<PolicyRecord>(`/policies/${id}`);
      } catch (err) {
        if (!(err instanceof TollgateApiError && err.status === 404)) throw err;
      }
    }
    id = (await api.list<PolicyRecord>('/policies')).find((p) => p.key === obj.metadata!.name)?.id;
    return id ? api.get<PolicyRecord>(`/policies/${id}`) : undefined;
  }

  return {
    async apply(obj) {
      const { namespace, name, generation } = obj.metadata as { namespace: string; name: string; generation: number };
      const rules = policyRules(obj);
      const declared = {
        key: name,
        name: obj.spec.displayName,
        description: obj.spec.description ?? '',
        critical: obj.spec.critical ?? false,
      };
      const note = `${obj.spec.changeNote ?? 'Declared in Kubernetes'} (${namespace}/${name}, generation ${generation})`;
      let record = await find(obj);
      const putBack: string[] = [];
      if (!record) {
        try {
          record = await api.post<PolicyRecord>('/policies', { ...declared, rules, change_note: note });
        } catch (err) {
          if (!(err instanceof TollgateApiError && err.status === 409)) throw err;
          record = await find(obj);
          if (!record) throw err;
        }
      } else {
        const fixed = differing(declared, record, ['name', 'description', 'critical']);
        if (fixed.length) {
          return {
            registryId: record.id,
            ready: false,
            settled: true,
            reason: 'RegistryMismatch',
            message: `policy ${name} exists in Tollgate with other ${fixed.join(', ')}, which Tollgate does not change; make the spec match`,
          };
        }
        const latest = record.versions?.find((v) => v.number === record!.latest_version);
        if (!latest || !sameJson(latest.rules, rules)) {
          record = await api.post<PolicyRecord>(
            `/policies/${record.id}/versions`,
            { rules, change_note: note },
            { 'if-match': `"${record.version}"` },
          );
          // A new generation is an update; the same generation means the registry moved away from it.
          if ((obj.status?.observedGeneration ?? 0) === generation) putBack.push('rules');
        }
      }
      const latest = record.latest_version;
      const published = record.published_version;
      const inForce = published === latest;
      const publishState = inForce
        ? `version ${latest} is published and in force`
        : `draft version ${latest} awaits publication by a second person (POST /policies/${record.id}/versions/${latest}/publish)`;
      return {
        registryId: record.id,
        ready: true,
        reason: inForce ? 'Published' : 'AwaitingPublication',
        message: `policy ${name}: ${publishState}`,
        putBack,
        status: { latestVersion: latest, publishedVersion: published, publishState },
      };
    },
  };
}
