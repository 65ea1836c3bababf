import type { Logger } from 'pino';
import type { Informer } from './informers.js';
import { KINDS, type CONTAINMENT, type KindObject } from './kinds.js';
import { objectKey } from './kube.js';
import type { ObjectWriter } from './objects.js';
import { TollgateApiError, type TollgateApi } from './tollgate-api.js';

type AgentObject = KindObject<'Agent'>;
type Containment = (typeof CONTAINMENT)[number];

interface AgentRecord {
  id: string;
  slug: string;
  status: 'active' | 'suspended' | 'revoked';
  gateway_access: boolean;
  risk_band: string | null;
}
/** A gateway.decision telemetry event: one decision of the gateway (docs/telemetry.md). */
interface DecisionEvent {
  id: string;
  agent_id: string | null;
  occurred_at: string;
  attributes: { decision?: string; reason_codes?: string[] };
}
interface Page<T> {
  items: T[];
  next_cursor?: string | null;
}

/** At most this many pages of 200 decisions a poll: 10,000 decisions a poll, beyond which counts are a floor. */
const MAX_DECISION_PAGES = 50;
const DECISIONS = '/telemetry?event_type=gateway.decision';
/** Agents whose last decision is looked up one by one in a poll (those the newest actions did not show). */
const BACKFILL_PER_POLL = 20;
/** After GET /telemetry was refused (the role lacks telemetry:read), ask again this much later. */
const REFUSED_RETRY_MS = 10 * 60_000;

const EVENT_OF: Record<Containment, { reason: string; message: (slug: string) => string }> = {
  suspended: {
    reason: 'AgentSuspended',
    message: (slug) => `agent ${slug} is suspended in Tollgate: every call it makes is refused (AGENT_SUSPENDED) until a security administrator lifts the suspension`,
  },
  revoked: {
    reason: 'AgentRevoked',
    message: (slug) => `agent ${slug} is revoked in Tollgate: its tokens stopped and every call it makes is refused, for good`,
  },
  gateway_access_off: {
    reason: 'GatewayAccessDisabled',
    message: (slug) => `agent ${slug} has its gateway access turned off in Tollgate: every call it makes is refused until it is turned back on`,
  },
};

export interface AgentStatusOptions {
  api: TollgateApi;
  agents: Informer<AgentObject>;
  /** Whether the controller manages a namespace (answered from the scope's cache). */
  manages(namespace: string): boolean;
  writer: ObjectWriter;
  log: Logger;
  /** One Event per agent per this long, at most, for its denied calls. */
  deniedIntervalMs: number;
  now?: () => number;
}

/**
 * What Tollgate knows of each Agent beyond its spec, read through the API on a period (one poll: one
 * paged GET /agents for the organisation, and the gateway's decisions since the last poll, newest first,
 * from GET /telemetry?event_type=gateway.decision&since=...), never per object: status.riskBand, status.lastDecisionAt and status.containment, and
 * Events when an agent is contained (AgentSuspended, AgentRevoked, GatewayAccessDisabled) or released
 * (ContainmentLifted), and CallsDenied, one per agent per interval at most, folding every denied call of
 * the interval into one Event with their count and reason codes. Status writes are merge patches of
 * these fields alone, so they never race the reconciles' own status writes.
 */
export class AgentStatusPoller {
  /** The newest decision seen: its time, and the ids seen at that very time (several share a millisecond). */
  private watermark?: { at: number; ids: Set<string> };
  private readonly denied = new Map<string, { calls: { at: number; code: string }[]; lastEmitted?: number }>();
  private readonly backfilled = new Set<string>();
  private decisionsRefusedAt?: number;
  private readonly now: () => number;

  constructor(private readonly opts: AgentStatusOptions) {
    this.now = opts.now ?? Date.now;
  }

  /** One poll. Throws when the agents cannot be read (the caller logs it and polls again later). */
  async poll(): Promise<void> {
    const { api, log } = this.opts;
    const records = new Map((await api.list<AgentRecord>('/agents')).map((r) => [r.id, r]));
    const first = !this.watermark;
    const decisions = await this.newDecisions();
    const lastDecision = new Map<string, number>();
    for (const d of decisions ?? []) {
      if (!d.agent_id) continue;
      const at = Date.parse(d.occurred_at);
      if (at > (lastDecision.get(d.agent_id) ?? 0)) lastDecision.set(d.agent_id, at);
      // Denials decided before this leader's first poll were another leader's to report.
      if (!first && d.attributes.decision === 'deny') {
        const bucket = this.denied.get(d.agent_id) ?? { calls: [] };
        bucket.calls.push({ at, code: d.attributes.reason_codes?.[0] ?? 'DENIED' });
        this.denied.set(d.agent_id, bucket);
      }
    }

    const objects = this.opts.agents
      .list()
      .filter((o) => o.status?.registryId && !o.metadata?.deletionTimestamp && this.opts.manages(o.metadata!.namespace!));
    if (decisions) await this.backfill(objects, lastDecision);
    for (const obj of objects) {
      const record = records.get(obj.status!.registryId!);
      if (!record) continue;
      try {
        await this.update(obj, record, lastDecision.get(record.id));
      } catch (err) {
        log.warn({ agent: objectKey(obj), err: describe(err) }, 'agent status write failed; next poll');
      }
    }
    await this.reportDenied(objects, records);
  }

  /** status.riskBand, lastDecisionAt and containment, and the Events of a containment that changed. */
  private async update(obj: AgentObject, record: AgentRecord, decidedAt: number | undefined): Promise<void> {
    const status = obj.status ?? {};
    const containment: Containment | undefined =
      record.status === 'revoked' ? 'revoked' : record.status === 'suspended' ? 'suspended' : record.gateway_access === false ? 'gateway_access_off' : undefined;
    const known = status.lastDecisionAt ? Date.parse(status.lastDecisionAt) : 0;
    const lastDecisionAt = decidedAt && decidedAt > known ? isoSeconds(decidedAt) : undefined;
    const fields: Record<string, unknown> = {};
    if ((record.risk_band ?? undefined) !== status.riskBand) fields.riskBand = record.risk_band;
    if (lastDecisionAt && lastDecisionAt !== status.lastDecisionAt) fields.lastDecisionAt = lastDecisionAt;
    if (containment !== status.containment) fields.containment = containment ?? null;
    if (!Object.keys(fields).length) return;
    // The status first: should the Event fail, the next poll does not report the change twice.
    await this.opts.writer.patchStatus(KINDS.Agent, obj, fields);
    if (!('containment' in fields)) return;
    const key = objectKey(obj);
    const event = containment
      ? this.opts.writer.event(obj, 'Warning', EVENT_OF[containment].reason, EVENT_OF[containment].message(record.slug))
      : this.opts.writer.event(obj, 'Normal', 'ContainmentLifted', `agent ${record.slug} is active again in Tollgate: its calls are decided as usual (was ${status.containment})`);
    this.opts.log.info({ agent: key, containment: containment ?? null }, containment ? 'agent contained in Tollgate' : 'agent containment lifted');
    await event.catch((e: unknown) => this.opts.log.warn({ agent: key, err: describe(e) }, 'event write failed'));
  }

  /**
   * CallsDenied: for each agent with denied calls not reported yet, one Event when its last one is at
   * least an interval old (the first at once), folding them all: "12 calls denied in the last 5m:
   * TOOL_NOT_BOUND ×9, AGENT_SUSPENDED ×3", with count 12 and the first and last denial's times.
   */
  private async reportDenied(objects: AgentObject[], records: Map<string, AgentRecord>): Promise<void> {
    const now = this.now();
    for (const [agentId, bucket] of this.denied) {
      const obj = objects.find((o) => o.status?.registryId === agentId);
      if (!obj || !records.has(agentId)) {
        this.denied.delete(agentId); // not an Agent of this controller's namespaces
        continue;
      }
      if (!bucket.calls.length) continue;
      if (bucket.lastEmitted !== undefined && now - bucket.lastEmitted < this.opts.deniedIntervalMs) continue;
      const first = Math.min(...bucket.calls.map((c) => c.at));
      const last = Math.max(...bucket.calls.map((c) => c.at));
      const since = Math.min(first, bucket.lastEmitted ?? first);
      const codes = new Map<string, number>();
      for (const c of bucket.calls) codes.set(c.code, (codes.get(c.code) ?? 0) + 1);
      const breakdown = [...codes].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([code, n]) => `${code} ×${n}`);
      const n = bucket.calls.length;
      const message = `${n} call${n === 1 ? '' : 's'} denied in the last ${duration(now - since)}: ${breakdown.join(', ')}`;
      bucket.lastEmitted = now;
      bucket.calls = [];
      try {
        await this.opts.writer.event(obj, 'Warning', 'CallsDenied', message, { count: n, first: new Date(first), last: new Date(last) });
      } catch (err) {
        this.opts.log.warn({ agent: objectKey(obj), err: describe(err) }, 'event write failed');
      }
    }
  }

  /**
   * The decisions since the last poll, newest first (the first poll: the newest page only, for the
   * agents' last decisions). Undefined while GET /telemetry is refused.
   */
  private async newDecisions(): Promise<DecisionEvent[] | undefined> {
    if (this.decisionsRefusedAt !== undefined && this.now() - this.decisionsRefusedAt < REFUSED_RETRY_MS) return undefined;
    const out: DecisionEvent[] = [];
    const mark = this.watermark;
    const since = mark ? `&since=${encodeURIComponent(new Date(mark.at).toISOString())}` : '';
    let cursor: string | null | undefined;
    let pages = 0;
    try {
      do {
        const page = await this.opts.api.get<Page<DecisionEvent>>(`${DECISIONS}&limit=200${since}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        pages++;
        for (const d of page.items) {
          const at = Date.parse(d.occurred_at);
          // `since` is inclusive: the decisions at the watermark's very time were counted last poll.
          if (mark && (at < mark.at || (at === mark.at && mark.ids.has(d.id)))) continue;
          out.push(d);
        }
        cursor = page.next_cursor;
      } while (cursor && mark && pages < MAX_DECISION_PAGES);
    } catch (err) {
      if (!(err instanceof TollgateApiError && err.status === 403)) throw err;
      if (this.decisionsRefusedAt === undefined) {
        this.opts.log.warn(
          { code: err.code },
          "GET /telemetry refused: the controller's service account lacks telemetry:read (docs/kubernetes.md, Events and status). status.lastDecisionAt and CallsDenied events are off; asking again in 10 minutes",
        );
      }
      this.decisionsRefusedAt = this.now();
      return undefined;
    }
    if (this.decisionsRefusedAt !== undefined) this.opts.log.info('GET /telemetry answered again: lastDecisionAt and CallsDenied events are on');
    this.decisionsRefusedAt = undefined;
    if (pages >= MAX_DECISION_PAGES && cursor) this.opts.log.warn({ pages }, 'more decisions since the last poll than one poll reads: denied-call counts are a floor');
    if (out.length) {
      const newest = Math.max(...out.map((d) => Date.parse(d.occurred_at)));
      this.watermark = { at: newest, ids: new Set(out.filter((d) => Date.parse(d.occurred_at) === newest).map((d) => d.id)) };
    } else if (!mark) {
      this.watermark = { at: 0, ids: new Set() };
    }
    return out;
  }

  /** The last decision of agents whose status has none and whom the newest actions did not show, a few a poll. */
  private async backfill(objects: AgentObject[], lastDecision: Map<string, number>): Promise<void> {
    const missing = objects
      .map((o) => o.status!.registryId!)
      .filter((id) => !lastDecision.has(id) && !this.backfilled.has(id) && !objects.find((o) => o.status?.registryId === id)?.status?.lastDecisionAt)
      .slice(0, BACKFILL_PER_POLL);
    for (const id of missing) {
      const page = await this.opts.api.get<Page<DecisionEvent>>(`${DECISIONS}&agent_id=${id}&limit=1`);
      this.backfilled.add(id);
      const at = page.items[0] ? Date.parse(page.items[0].occurred_at) : undefined;
      if (at) lastDecision.set(id, at);
    }
  }
}

/** RFC 3339 with seconds (the CRD's date-time), as Kubernetes writes times. */
function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** 45s, 5m, 1h30m: how kubectl prints durations. */
function duration(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  return `${Math.floor(m / 60)}h${m % 60 ? `${m % 60}m` : ''}`;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
