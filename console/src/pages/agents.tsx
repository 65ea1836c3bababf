import { useQuery, type UseQueryResult } from '@tanstack/react-query';
import { useId, useState, type FormEvent, type ReactNode } from 'react';
import { Link, Route, Routes, useParams, useSearchParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { inWords } from '../api/errors';
import { currentSearchParams, useAgent, usePaged } from '../api/hooks';
import { ContainmentActions, type Agent } from '../components/containment';
import { Badge, DataTable, Facts, Field, LoadMore, PageHeader, QueryView, Section, StateBadge, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './agents.css';

type ListQuery = NonNullable<Paths['/agents']['get']['parameters']['query']>;
type Environment = NonNullable<ListQuery['environment']>;
type Status = NonNullable<ListQuery['status']>;
type RiskBand = NonNullable<ListQuery['risk_band']>;
type Source = NonNullable<ListQuery['source']>;

const ENVIRONMENTS: Environment[] = ['production', 'staging', 'development'];
const STATUSES: Status[] = ['active', 'suspended', 'revoked'];
const RISK_BANDS: RiskBand[] = ['low', 'medium', 'high', 'critical'];
const SOURCES: Source[] = ['manual', 'discovery', 'kubernetes'];

const BAND_TONE: Record<RiskBand, Tone> = { low: 'good', medium: 'warn', high: 'bad', critical: 'bad' };

/** How many recent decisions the agent's page shows before "Load more". */
const RECENT = 10;

export default function AgentsPage() {
  return (
    <Routes>
      <Route index element={<AgentList />} />
      <Route path=":agentId" element={<AgentDetail />} />
    </Routes>
  );
}

function RiskBandBadge({ band }: { band: RiskBand | null | undefined }) {
  if (!band) return <span className="muted">not scored</span>;
  return <Badge tone={BAND_TONE[band]}>{band}</Badge>;
}

function OnOff({ on }: { on: boolean }) {
  return <Badge tone={on ? 'good' : 'bad'}>{on ? 'on' : 'off'}</Badge>;
}

/** A filter's value from the URL, or undefined when absent or not one of the API's values. */
function pick<T extends string>(params: URLSearchParams, name: string, allowed: readonly T[]): T | undefined {
  const v = params.get(name);
  return v !== null && (allowed as readonly string[]).includes(v) ? (v as T) : undefined;
}

function AgentList() {
  const [params, setParams] = useSearchParams();
  const filters: ListQuery = {
    environment: pick(params, 'environment', ENVIRONMENTS),
    status: pick(params, 'status', STATUSES),
    risk_band: pick(params, 'risk_band', RISK_BANDS),
    source: pick(params, 'source', SOURCES),
    q: params.get('q')?.trim() || undefined,
  };
  const active = Object.entries(filters).filter(([, v]) => v !== undefined) as Array<[string, string]>;
  const list = usePaged(['agents', filters], (cursor) =>
    must(api.GET('/agents', { params: { query: { ...filters, limit: 50, ...(cursor ? { cursor } : {}) } } })),
  );
  const setFilter = (name: string, value: string) => {
    const next = currentSearchParams();
    if (value) next.set(name, value);
    else next.delete(name);
    setParams(next);
  };
  return (
    <>
      <PageHeader title="Agents" description="The organisation’s registered and discovered agents. Open one to see its bindings, risk and containment." />
      {/* Keyed by the search, so the box follows the address when it changes from outside (back, a link). */}
      <Filters key={filters.q ?? ''} filters={filters} onChange={setFilter} onClear={() => setParams({})} anySet={active.length > 0} />
      <QueryView
        query={{ ...list, data: list.rows }}
        isEmpty={(rows) => rows.length === 0}
        empty={active.length > 0 ? 'No agent matches these filters.' : 'No agent is registered yet.'}
      >
        {(rows) => (
          <>
            <DataTable
              caption={active.length > 0 ? `Agents matching ${active.map(([k, v]) => `${k.replace('_', ' ')} ${v}`).join(', ')}` : 'Agents'}
              rows={rows}
              rowKey={(a) => a.id}
              columns={[
                { header: 'Name', cell: (a) => <Link to={`/agents/${a.id}`}>{a.name}</Link> },
                { header: 'Environment', cell: (a) => a.environment },
                { header: 'Status', cell: (a) => <StateBadge value={a.status} /> },
                { header: 'Risk band', cell: (a) => <RiskBandBadge band={a.risk_band} /> },
                { header: 'Source', cell: (a) => a.source },
                { header: 'Gateway access', cell: (a) => <OnOff on={a.gateway_access} /> },
                {
                  header: 'Owners',
                  cell: (a) => (a.owners.length === 0 ? <span className="muted">none</span> : a.owners.map((o) => o.name).join(', ')),
                },
                { header: 'Last seen', cell: (a) => <Time value={a.last_seen_at} /> },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

function Filters({
  filters,
  onChange,
  onClear,
  anySet,
}: {
  filters: ListQuery;
  onChange: (name: string, value: string) => void;
  onClear: () => void;
  anySet: boolean;
}) {
  // The search applies on submit, so the URL (and the list) does not change with every keystroke.
  const [q, setQ] = useState(filters.q ?? '');
  const searchId = useId();
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onChange('q', q.trim());
  };
  const select = (label: string, name: keyof ListQuery, values: readonly string[]) => (
    <Field label={label}>
      {(id) => (
        <select id={id} value={(filters[name] as string | undefined) ?? ''} onChange={(e) => onChange(name, e.target.value)}>
          <option value="">Any</option>
          {values.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
  return (
    <form className="toolbar agent-filters" role="search" aria-label="Filter agents" onSubmit={submit}>
      <div className="field">
        <label htmlFor={searchId}>Search</label>
        <div className="search-row">
          <input id={searchId} type="search" value={q} onChange={(e) => setQ(e.target.value)} placeholder="Name, slug or description" maxLength={200} />
          <button type="submit">Search</button>
        </div>
      </div>
      {select('Environment', 'environment', ENVIRONMENTS)}
      {select('Status', 'status', STATUSES)}
      {select('Risk band', 'risk_band', RISK_BANDS)}
      {select('Source', 'source', SOURCES)}
      {anySet ? (
        <button
          type="button"
          onClick={() => {
            setQ('');
            onClear();
          }}
        >
          Clear filters
        </button>
      ) : null}
    </form>
  );
}

/** A 404 for the agent, or an ID that is not one (the API answers 422 on the path): the agent is not here. */
function isMissing(error: unknown): boolean {
  return error instanceof ApiFailure && (error.status === 404 || (error.status === 422 && error.code === 'validation_failed'));
}

function AgentDetail() {
  const { agentId } = useParams();
  const agent = useAgent(agentId);
  const [done, setDone] = useState<string | null>(null);
  if (agent.isError && isMissing(agent.error)) {
    return (
      <>
        <PageHeader title="Agent not found" description={<Link to="/agents">Agents</Link>} />
        <p>There is no agent with this ID in this organisation. The address may be wrong, or the agent belongs to another organisation.</p>
      </>
    );
  }
  return (
    <QueryView query={agent}>
      {(a) => (
        <>
          <PageHeader
            title={a.name}
            description={
              <>
                <Link to="/agents">Agents</Link> · <span className="agent-status">Status <StateBadge value={a.status} /></span> · {a.environment} · gateway access{' '}
                <OnOff on={a.gateway_access} />
              </>
            }
            actions={<ContainmentActions agent={a} onDone={setDone} />}
          />
          {done ? (
            <p className="success" role="status">
              {done}
            </p>
          ) : null}
          {a.status === 'revoked' ? <p className="notice">This agent is revoked permanently: nothing can change it any more.</p> : null}
          <AgentFacts agent={a} />
          <RiskExplanation agentId={a.id} />
          <ContainmentHistory agentId={a.id} />
          <Identities agentId={a.id} />
          <Delegations agentId={a.id} />
          <Bindings agentId={a.id} />
          <RecentDecisions agentId={a.id} />
          <Versions agentId={a.id} />
        </>
      )}
    </QueryView>
  );
}

function AgentFacts({ agent: a }: { agent: Agent }) {
  return (
    <>
      <Section title="About">
        {a.description ? <p>{a.description}</p> : null}
        <Facts
          items={[
            ['Slug', <code>{a.slug}</code>],
            ['Agent URI', <code>{a.agent_uri}</code>],
            ['Purpose', a.purpose || null],
            ['Framework', a.framework],
            ['Environment', a.environment],
            ['Business unit', a.business_unit],
            ['Criticality', a.criticality],
            ['Data classification', a.data_classification],
            ['Internet exposure', a.internet_exposure],
            ['Code execution', a.code_execution],
            ['Persistent memory', a.persistent_memory],
            ['Human approval coverage', a.human_approval_coverage],
            ['Gateway enforced', a.gateway_enforced ? 'yes' : 'no'],
            ['Source', a.source],
            ['Reference in its source', a.external_ref ? <code>{a.external_ref}</code> : null],
            ['Last seen by discovery', a.last_seen_at ? <Time value={a.last_seen_at} /> : null],
            ['Tags', a.tags.length > 0 ? a.tags.map((t) => <Badge key={t}>{t}</Badge>) : null],
            ['Last attested', a.last_attested_at ? <Time value={a.last_attested_at} /> : 'never'],
            ['Registered', <Time value={a.created_at} />],
            ['Changed', <Time value={a.updated_at} />],
            ['Record version', String(a.version)],
          ]}
        />
      </Section>
      <Section title="Owners">
        {a.owners.length === 0 ? (
          <p className="muted">No owner is named. Every agent should have an accountable owner.</p>
        ) : (
          <DataTable
            caption="Owners"
            rows={a.owners}
            rowKey={(o) => o.id}
            columns={[
              { header: 'Name', cell: (o) => o.name },
              { header: 'Email', cell: (o) => <a href={`mailto:${o.email}`}>{o.email}</a> },
              { header: 'Role', cell: (o) => o.owner_type },
              { header: 'Since', cell: (o) => <Time value={o.created_at} /> },
            ]}
          />
        )}
      </Section>
    </>
  );
}

/**
 * A section of the agent's page fed by its own read: the person's roles may not grant it, or the plan may
 * not include it; the section then says so in words instead of breaking the page.
 */
function GuardedSection<T>({
  title,
  permission,
  query,
  empty,
  isEmpty,
  onMissing,
  children,
}: {
  title: string;
  permission: string;
  query: Pick<UseQueryResult<T>, 'isPending' | 'isError' | 'error' | 'data'> | null;
  empty: string;
  isEmpty: (data: T) => boolean;
  onMissing?: ReactNode;
  children: (data: T) => ReactNode;
}) {
  if (query === null) {
    return (
      <Section title={title}>
        <p className="muted">
          Your roles do not grant <code>{permission}</code>, which this part needs.
        </p>
      </Section>
    );
  }
  if (query.isError && query.error instanceof ApiFailure && query.error.status === 403) {
    return (
      <Section title={title}>
        <p className="muted">
          {inWords(query.error.code) ?? query.error.message} This part needs <code>{permission}</code>.
        </p>
      </Section>
    );
  }
  if (query.isError && onMissing && query.error instanceof ApiFailure && query.error.status === 404) {
    return <Section title={title}>{onMissing}</Section>;
  }
  return (
    <Section title={title}>
      <QueryView query={query} isEmpty={isEmpty} empty={empty}>
        {children}
      </QueryView>
    </Section>
  );
}

/** A read that runs only when the person holds `permission`; null (the section says why) when not. */
function useGuarded<T>(permission: string, key: readonly unknown[], fn: () => Promise<T>) {
  const { can } = useSession();
  const allowed = can(permission);
  const q = useQuery({ queryKey: key, queryFn: fn, enabled: allowed });
  return allowed ? q : null;
}

function RiskExplanation({ agentId }: { agentId: string }) {
  const risk = useGuarded('risk:read', ['agent-risk', agentId], () =>
    must(api.GET('/risks/agents/{agent_id}', { params: { path: { agent_id: agentId } } })),
  );
  return (
    <GuardedSection
      title="Risk"
      permission="risk:read"
      query={risk}
      empty=""
      isEmpty={() => false}
      onMissing={<p className="muted">No score yet: the agent has not been scored.</p>}
    >
      {(r) => (
        <>
          <Facts
            items={[
              ['Score', <strong>{r.score} of 100</strong>],
              ['Band', <RiskBandBadge band={r.band} />],
              ['Computed', <Time value={r.computed_at} />],
              ['Sum before bounding', String(r.raw_total)],
            ]}
          />
          {r.stale ? <p className="small muted">An input changed since this score was computed; a new score is on its way.</p> : null}
          <DataTable
            caption="Each factor’s contribution to the score"
            rows={r.factors}
            rowKey={(f) => f.key}
            columns={[
              { header: 'Factor', cell: (f) => <>{f.description} <code className="small">{f.key}</code></> },
              {
                header: 'Contribution',
                className: 'num',
                cell: (f) => (f.enabled ? (f.contribution > 0 ? `+${f.contribution}` : String(f.contribution)) : <span className="muted">off</span>),
              },
              { header: 'At most', className: 'num', cell: (f) => String(f.weight) },
              { header: 'Why', cell: (f) => f.why },
            ]}
          />
        </>
      )}
    </GuardedSection>
  );
}

const CONTAINMENT_WORDS: Record<string, string> = {
  suspend: 'suspended',
  restore: 'restored',
  revoke: 'revoked',
  revoke_sessions: 'sessions revoked',
  gateway_access: 'gateway access changed',
};

function containmentDetail(details: Record<string, unknown>): string {
  const parts: string[] = [];
  const status = details.status as { from?: string; to?: string } | undefined;
  if (status && status.from !== status.to) parts.push(`status ${status.from} → ${status.to}`);
  const gateway = details.gateway_access as { from?: boolean; to?: boolean } | undefined;
  if (gateway) parts.push(`gateway access ${gateway.from ? 'on' : 'off'} → ${gateway.to ? 'on' : 'off'}`);
  const cancelled = details.approvals_cancelled as unknown[] | undefined;
  if (cancelled && cancelled.length > 0) parts.push(`${cancelled.length} pending approval${cancelled.length === 1 ? '' : 's'} cancelled`);
  const identities = details.identities_revoked;
  if (typeof identities === 'number' && identities > 0) parts.push(`${identities} identit${identities === 1 ? 'y' : 'ies'} revoked`);
  else if (Array.isArray(identities) && identities.length > 0) parts.push(`${identities.length} identit${identities.length === 1 ? 'y' : 'ies'} revoked`);
  return parts.join('; ');
}

function ContainmentHistory({ agentId }: { agentId: string }) {
  const { me } = useSession();
  const history = useGuarded('agent:read', ['agent-containment', agentId], () =>
    must(api.GET('/agents/{agent_id}/containment', { params: { path: { agent_id: agentId } } })),
  );
  return (
    <GuardedSection
      title="Containment history"
      permission="agent:read"
      query={history}
      empty="The agent has never been contained."
      isEmpty={(h) => h.items.length === 0}
    >
      {(h) => (
        <DataTable
          caption="Containment history, newest first"
          // The API answers oldest first; the latest step is what a person looks for.
          rows={[...h.items].reverse()}
          rowKey={(e) => e.id}
          columns={[
            { header: 'When', cell: (e) => <Time value={e.at} /> },
            { header: 'What', cell: (e) => <strong>{CONTAINMENT_WORDS[e.action] ?? e.action}</strong> },
            { header: 'Reason', cell: (e) => e.reason },
            { header: 'By', cell: (e) => (e.actor_id === null ? 'Tollgate' : e.actor_id === me.user.id ? 'you' : <code title={e.actor_id}>{e.actor_id.slice(0, 8)}</code>) },
            { header: 'Effect', cell: (e) => containmentDetail(e.details) || <span className="muted">—</span> },
            { header: 'Correlation ID', cell: (e) => <code className="small">{e.correlation_id}</code> },
          ]}
        />
      )}
    </GuardedSection>
  );
}

function Identities({ agentId }: { agentId: string }) {
  const identities = useGuarded('identity:read', ['agent-identities', agentId], () =>
    must(api.GET('/identities', { params: { query: { agent_id: agentId } } })),
  );
  return (
    <GuardedSection title="Identities" permission="identity:read" query={identities} empty="No workload identity: the agent cannot ask for tokens." isEmpty={(d) => d.items.length === 0}>
      {(d) => (
        <DataTable
          caption="Workload identities"
          rows={d.items}
          rowKey={(i) => i.id}
          columns={[
            { header: 'Client ID', cell: (i) => <code>{i.client_id}</code> },
            { header: 'Status', cell: (i) => <StateBadge value={i.status} /> },
            { header: 'Issued', cell: (i) => <Time value={i.created_at} /> },
            { header: 'Last used', cell: (i) => <Time value={i.last_used_at} /> },
            { header: 'Revoked', cell: (i) => <Time value={i.revoked_at} /> },
          ]}
        />
      )}
    </GuardedSection>
  );
}

function Delegations({ agentId }: { agentId: string }) {
  const delegations = useGuarded('identity:read', ['agent-delegations', agentId], () =>
    must(api.GET('/agents/{agent_id}/delegations', { params: { path: { agent_id: agentId } } })),
  );
  return (
    <GuardedSection title="Delegations" permission="identity:read" query={delegations} empty="Nobody has delegated to this agent." isEmpty={(d) => d.items.length === 0}>
      {(d) => (
        <DataTable
          caption="Delegations"
          rows={d.items}
          rowKey={(x) => x.id}
          columns={[
            { header: 'On behalf of', cell: (x) => <>{x.display_name} <span className="small muted">({x.principal_type})</span></> },
            { header: 'Reference', cell: (x) => <code>{x.principal_ref}</code> },
            { header: 'Scopes', cell: (x) => x.scopes.map((s) => <Badge key={s}>{s}</Badge>) },
            { header: 'Expires', cell: (x) => <Expiry at={x.expires_at} /> },
          ]}
        />
      )}
    </GuardedSection>
  );
}

function Expiry({ at }: { at: string | null }) {
  if (!at) return <span className="muted">never</span>;
  const past = new Date(at).getTime() <= Date.now();
  return (
    <>
      <Time value={at} />
      {past ? <> <Badge>expired</Badge></> : null}
    </>
  );
}

type Binding = Paths['/agents/{agent_id}/permissions']['get']['responses'][200]['content']['application/json']['items'][number];

function Bindings({ agentId }: { agentId: string }) {
  const bindings = useGuarded('identity:read', ['agent-bindings', agentId], () =>
    must(api.GET('/agents/{agent_id}/permissions', { params: { path: { agent_id: agentId } } })),
  );
  const names = useTargetNames(bindings?.data?.items ?? []);
  return (
    <GuardedSection title="Permission bindings" permission="identity:read" query={bindings} empty="No binding: the gateway allows this agent nothing." isEmpty={(d) => d.items.length === 0}>
      {(d) => (
        <DataTable
          caption="Permission bindings"
          rows={d.items}
          rowKey={(b) => b.id}
          columns={[
            {
              header: 'Target',
              cell: (b) => (
                <>
                  {names.get(b.target_id) ?? <code title={b.target_id}>{b.target_id.slice(0, 8)}</code>}{' '}
                  <span className="small muted">({b.target_kind.replace('_', ' ')})</span>
                </>
              ),
            },
            { header: 'Actions', cell: (b) => b.actions.join(', ') },
            { header: 'Constraints', cell: (b) => (Object.keys(b.constraints).length === 0 ? <span className="muted">none</span> : <code>{JSON.stringify(b.constraints)}</code>) },
            { header: 'Delegated', cell: (b) => (b.delegated ? 'yes' : 'no') },
            { header: 'Expires', cell: (b) => <Expiry at={b.expires_at} /> },
            {
              header: 'Definition',
              cell: (b) => (b.definition_changed ? <Badge tone="warn">changed: calls refused until re-approved</Badge> : <span className="muted">as granted</span>),
            },
          ]}
        />
      )}
    </GuardedSection>
  );
}

/** The names of the tools a binding names, when the person may read the inventory; the ID stands in otherwise. */
function useTargetNames(bindings: Binding[]): Map<string, ReactNode> {
  const { can } = useSession();
  const wantTools = can('inventory:read') && bindings.some((b) => b.target_kind === 'tool');
  const tools = useQuery({
    queryKey: ['tools', 'all-for-names'],
    queryFn: () => must(api.GET('/tools')),
    enabled: wantTools,
    staleTime: 60_000,
  });
  const names = new Map<string, ReactNode>();
  for (const t of tools.data?.items ?? []) names.set(t.id, <code>{t.tool_key}</code>);
  return names;
}

function RecentDecisions({ agentId }: { agentId: string }) {
  const { can } = useSession();
  const allowed = can('action:read');
  // usePaged has no `enabled`: without action:read it answers an empty page without asking the API.
  const list = usePaged(['agent-actions', agentId, allowed], (cursor) =>
    allowed
      ? must(api.GET('/actions', { params: { query: { agent_id: agentId, limit: RECENT, ...(cursor ? { cursor } : {}) } } }))
      : Promise.resolve({ items: [], next_cursor: null }),
  );
  return (
    <GuardedSection
      title="Recent decisions"
      permission="action:read"
      query={allowed ? { ...list, data: list.rows } : null}
      empty="The gateway has decided nothing for this agent yet."
      isEmpty={(rows) => rows.length === 0}
    >
      {(rows) => (
        <>
          <DataTable
            caption="Recent decisions, newest first"
            rows={rows}
            rowKey={(x) => x.id}
            columns={[
              { header: 'When', cell: (x) => <Link to={`/actions/${x.id}`}><Time value={x.created_at} /></Link> },
              { header: 'Tool', cell: (x) => <code>{x.tool}</code> },
              { header: 'Target', cell: (x) => x.target },
              { header: 'Decision', cell: (x) => <StateBadge value={x.decision} /> },
              { header: 'State', cell: (x) => <StateBadge value={x.state} /> },
              { header: 'Reason codes', cell: (x) => x.reason_codes.map((c) => <Badge key={c}>{c}</Badge>) },
            ]}
          />
          <LoadMore list={list} label="Load more decisions" />
        </>
      )}
    </GuardedSection>
  );
}

/**
 * The agent's versions. The agent's answer does not carry them and the API has no list of versions, so
 * they come from the audit log (`agent.version_added` entries on this agent), which needs `audit:read`.
 */
function Versions({ agentId }: { agentId: string }) {
  const { me } = useSession();
  const versions = useGuarded('audit:read', ['agent-versions', agentId], () =>
    must(api.GET('/audit', { params: { query: { target_id: agentId, action: 'agent.version_added', limit: 50 } } })),
  );
  return (
    <GuardedSection title="Versions" permission="audit:read" query={versions} empty="No version has been recorded for this agent." isEmpty={(d) => d.items.length === 0}>
      {(d) => (
        <DataTable
          caption="Recorded versions, newest first"
          rows={d.items}
          rowKey={(e) => e.id}
          columns={[
            { header: 'Version', cell: (e) => <code>{String(e.details.version_label ?? '—')}</code> },
            { header: 'Recorded', cell: (e) => <Time value={e.at} /> },
            { header: 'By', cell: (e) => (e.actor.id === me.user.id ? 'you' : e.actor.id ? <code title={e.actor.id}>{e.actor.id.slice(0, 8)}</code> : e.actor.type) },
            { header: 'Correlation ID', cell: (e) => <code className="small">{e.correlation_id}</code> },
          ]}
        />
      )}
    </GuardedSection>
  );
}
