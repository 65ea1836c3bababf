import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Link, NavLink, Route, Routes, useParams } from 'react-router';
import { api, must, type Paths } from '../api/client';
import { useAgent, usePaged } from '../api/hooks';
import { ConfirmDialog } from '../components/confirm';
import { Badge, DataTable, ErrorPanel, Facts, LoadMore, PageHeader, QueryView, Section, StateBadge, Time, type Tone } from '../components/ui';
import { useSession } from '../session';
import './risk.css';

type WhatIfBody = NonNullable<Paths['/risks/agents/{agent_id}/what-if']['post']['requestBody']>['content']['application/json'];
type WhatIf = Paths['/risks/agents/{agent_id}/what-if']['post']['responses'][200]['content']['application/json'];
type History = Paths['/risks/agents/{agent_id}/history']['get']['responses'][200]['content']['application/json'];
type Agent = Paths['/agents/{agent_id}']['get']['responses'][200]['content']['application/json'];
type Factor = Paths['/risks/ruleset']['get']['responses'][200]['content']['application/json']['factors'][number];
type Band = 'low' | 'medium' | 'high' | 'critical';

const BANDS: Band[] = ['low', 'medium', 'high', 'critical'];
const BAND_TONE: Record<string, Tone> = { low: 'good', medium: 'info', high: 'warn', critical: 'bad' };

function BandBadge({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">not scored yet</span>;
  return <Badge tone={BAND_TONE[value] ?? 'neutral'}>{value}</Badge>;
}

function signed(n: number): string {
  return n > 0 ? `+${n}` : n < 0 ? `−${-n}` : '0';
}

export default function RiskPage() {
  return (
    <Routes>
      <Route index element={<AgentList />} />
      <Route path="ruleset" element={<Ruleset />} />
      <Route path="agents/:agentId" element={<AgentRisk />} />
    </Routes>
  );
}

function Tabs() {
  return (
    <nav className="tabs" aria-label="Risk">
      <NavLink to="/risk" end>
        Agents
      </NavLink>
      <NavLink to="/risk/ruleset">Ruleset</NavLink>
    </nav>
  );
}

function AgentList() {
  const [band, setBand] = useState<Band | ''>('');
  const list = usePaged(['agents', 'risk', band], (cursor) =>
    must(api.GET('/agents', { params: { query: { limit: 50, ...(band ? { risk_band: band } : {}), ...(cursor ? { cursor } : {}) } } })),
  );
  return (
    <>
      <PageHeader title="Risk" description="Each agent’s Agent Risk Score, why it scores what it does, and what would change it." />
      <Tabs />
      <div className="toolbar">
        <div className="field">
          <label htmlFor="risk-band">Risk band</label>
          <select id="risk-band" value={band} onChange={(e) => setBand(e.target.value as Band | '')}>
            <option value="">Every band</option>
            {BANDS.map((b) => (
              <option key={b} value={b}>
                {b}
              </option>
            ))}
          </select>
        </div>
      </div>
      <QueryView query={{ ...list, data: list.rows }} isEmpty={(rows) => rows.length === 0} empty={band ? `No agent in the ${band} band.` : 'No agent is registered yet.'}>
        {(rows) => (
          <>
            <DataTable
              caption="Agents and their risk bands"
              rows={rows}
              rowKey={(a) => a.id}
              columns={[
                { header: 'Agent', cell: (a) => <Link to={`/risk/agents/${a.id}`}>{a.name}</Link> },
                { header: 'Risk band', cell: (a) => <BandBadge value={a.risk_band} /> },
                { header: 'Environment', cell: (a) => a.environment },
                { header: 'Status', cell: (a) => <StateBadge value={a.status} /> },
                { header: 'Internet exposure', cell: (a) => a.internet_exposure },
                { header: 'Data', cell: (a) => a.data_classification },
              ]}
            />
            <LoadMore list={list} />
          </>
        )}
      </QueryView>
    </>
  );
}

function AgentRisk() {
  const { agentId } = useParams();
  const { can } = useSession();
  const queryClient = useQueryClient();
  const agent = useAgent(agentId);
  const score = useQuery({
    queryKey: ['risk', agentId],
    queryFn: () => must(api.GET('/risks/agents/{agent_id}', { params: { path: { agent_id: agentId! } } })),
  });
  const recalculate = useMutation({
    mutationFn: () => must(api.POST('/risks/agents/{agent_id}/recalculate', { params: { path: { agent_id: agentId! } } })),
    onSuccess: (data) => {
      queryClient.setQueryData(['risk', agentId], data);
      void queryClient.invalidateQueries({ queryKey: ['risk-history', agentId] });
      void queryClient.invalidateQueries({ queryKey: ['agent', agentId] });
    },
  });
  const name = agent.data?.name ?? 'Agent';
  return (
    <>
      <PageHeader
        title={`Risk: ${name}`}
        description={
          <>
            <Link to="/risk">Risk</Link> · <Link to={`/graph?agent=${agentId}`}>Its graph</Link>
          </>
        }
        actions={
          can('risk:configure') ? (
            <button type="button" onClick={() => recalculate.mutate()} disabled={recalculate.isPending}>
              {recalculate.isPending ? 'Recalculating…' : 'Recalculate'}
            </button>
          ) : null
        }
      />
      {recalculate.isError ? <ErrorPanel error={recalculate.error} title="The score was not recalculated" /> : null}
      {recalculate.isSuccess ? (
        <p className="success" role="status">
          Recalculated: {recalculate.data.score} ({recalculate.data.band}).
        </p>
      ) : null}
      <QueryView query={score}>
        {(s) => (
          <Section title="Score">
            <div className="risk-score">
              <p className="risk-big">
                <span className="risk-number">{s.score}</span>
                <span className="muted"> of 100</span> <BandBadge value={s.band} />
              </p>
              <Facts
                items={[
                  ['Sum before bounding to 0-100', String(s.raw_total)],
                  ['Computed', <Time value={s.computed_at} />],
                  ['Up to date', s.stale ? 'No: a recalculation is queued' : 'Yes'],
                ]}
              />
            </div>
            <DataTable
              caption="Each factor’s contribution"
              rows={s.factors}
              rowKey={(f) => f.key}
              columns={[
                { header: 'Factor', cell: (f) => <><strong>{f.description}</strong><br /><code className="small">{f.key}</code></> },
                { header: 'Weight', cell: (f) => String(f.weight), className: 'num' },
                { header: 'Contribution', cell: (f) => (f.enabled ? signed(f.contribution) : <span>0 <span className="muted">(disabled; would be {signed(f.computed)})</span></span>), className: 'num' },
                { header: 'Why', cell: (f) => f.why },
              ]}
            />
          </Section>
        )}
      </QueryView>
      <HistorySection agentId={agentId!} />
      {agent.data ? <WhatIfSection agent={agent.data} /> : agent.isError ? <ErrorPanel error={agent.error} title="Could not load the agent" /> : null}
    </>
  );
}

function HistorySection({ agentId }: { agentId: string }) {
  const [days, setDays] = useState(90);
  const history = useQuery({
    queryKey: ['risk-history', agentId, days],
    queryFn: () => must(api.GET('/risks/agents/{agent_id}/history', { params: { path: { agent_id: agentId }, query: { days } } })),
  });
  return (
    <Section
      title="History"
      actions={
        <div className="field risk-inline">
          <label htmlFor="risk-days">Days</label>
          <select id="risk-days" value={days} onChange={(e) => setDays(Number(e.target.value))}>
            <option value={30}>30</option>
            <option value={90}>90</option>
            <option value={365}>365</option>
          </select>
        </div>
      }
    >
      <QueryView query={history} isEmpty={(h) => h.items.length === 0} empty={`No score was stored in the last ${days} days.`}>
        {(h) => (
          <>
            <HistoryChart history={h} />
            <details>
              <summary>The same as a table</summary>
              <DataTable
                caption="Score per day"
                rows={h.items}
                rowKey={(i) => i.day}
                columns={[
                  { header: 'Day', cell: (i) => i.day },
                  { header: 'Score', cell: (i) => String(i.score), className: 'num' },
                  { header: 'Band', cell: (i) => <BandBadge value={i.band} /> },
                  { header: 'Last recalculated', cell: (i) => <Time value={i.computed_at} /> },
                ]}
              />
            </details>
          </>
        )}
      </QueryView>
    </Section>
  );
}

/** A bar per day with a score, on a 0-100 scale with the band boundaries drawn; the table beside it has the numbers. */
function HistoryChart({ history }: { history: History }) {
  const titleId = useId();
  const descId = useId();
  const W = 720;
  const H = 200;
  const left = 36;
  const bottom = 24;
  const plotW = W - left - 8;
  const plotH = H - bottom - 8;
  const items = history.items;
  const slot = plotW / Math.max(items.length, 1);
  const barW = Math.max(2, Math.min(24, slot * 0.7));
  const y = (score: number) => 8 + plotH - (Math.max(0, Math.min(100, score)) / 100) * plotH;
  const first = items[0]!;
  const last = items[items.length - 1]!;
  const lo = Math.min(...items.map((i) => i.score));
  const hi = Math.max(...items.map((i) => i.score));
  return (
    <svg className="risk-chart" viewBox={`0 0 ${W} ${H}`} role="img" aria-labelledby={`${titleId} ${descId}`}>
      <title id={titleId}>Risk score per day</title>
      <desc id={descId}>
        {items.length} {items.length === 1 ? 'day' : 'days'} from {first.day} to {last.day}: lowest {lo}, highest {hi}, latest {last.score} ({last.band}).
      </desc>
      {[0, 25, 50, 75, 100].map((v) => (
        <g key={v}>
          <line x1={left} x2={W - 8} y1={y(v)} y2={y(v)} className="risk-grid" />
          <text x={left - 4} y={y(v) + 4} textAnchor="end" className="risk-axis">
            {v}
          </text>
        </g>
      ))}
      {items.map((i, n) => (
        <rect key={i.day} x={left + n * slot + (slot - barW) / 2} y={y(i.score)} width={barW} height={8 + plotH - y(i.score)} className={`risk-bar risk-bar-${i.band}`}>
          <title>
            {i.day}: {i.score} ({i.band})
          </title>
        </rect>
      ))}
      <text x={left} y={H - 6} className="risk-axis">
        {first.day}
      </text>
      {items.length > 1 ? (
        <text x={W - 8} y={H - 6} textAnchor="end" className="risk-axis">
          {last.day}
        </text>
      ) : null}
    </svg>
  );
}

type Choice = '' | string;

/** A select for one what-if field: "no change" (absent: changes nothing), or a value to assume. */
function Assume({ label, current, options, value, onChange }: { label: string; current: string; options: Array<[string, string]>; value: Choice; onChange: (v: Choice) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)}>
        <option value="">No change (now: {current})</option>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

const LEVELS3 = (a: string, b: string, c: string): Array<[string, string]> => [
  [a, a],
  [b, b],
  [c, c],
];
const YES_NO: Array<[string, string]> = [
  ['true', 'yes'],
  ['false', 'no'],
];
const CLASSIFICATIONS = ['public', 'internal', 'confidential', 'personal', 'regulated', 'restricted'];

function WhatIfSection({ agent }: { agent: Agent }) {
  const [fields, setFields] = useState<Record<string, Choice>>({});
  const [flags, setFlags] = useState<Record<string, boolean>>({});
  const whatIf = useMutation({
    mutationFn: (body: WhatIfBody) => must(api.POST('/risks/agents/{agent_id}/what-if', { params: { path: { agent_id: agent.id } }, body })),
  });
  const set = (k: string) => (v: Choice) => setFields((f) => ({ ...f, [k]: v }));
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const body: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(fields)) {
      if (v === '') continue;
      body[k] = v === 'true' ? true : v === 'false' ? false : v;
    }
    for (const [k, v] of Object.entries(flags)) if (v) body[k] = true;
    whatIf.mutate(body as WhatIfBody);
  };
  const flag = (k: string, text: string) => (
    <label className="risk-check" key={k}>
      <input type="checkbox" checked={flags[k] ?? false} onChange={(e) => setFlags((f) => ({ ...f, [k]: e.target.checked }))} /> {text}
    </label>
  );
  return (
    <Section title="What if">
      <p className="small muted">Assume changes to the agent and see the score they would give. Nothing is saved.</p>
      <form onSubmit={submit} aria-label="Proposed changes">
        <div className="risk-whatif-grid">
          <Assume label="Environment" current={agent.environment} options={[['true', 'production'], ['false', 'not production']]} value={fields.production ?? ''} onChange={set('production')} />
          <Assume label="Internet exposure" current={agent.internet_exposure} options={LEVELS3('none', 'controlled', 'public')} value={fields.internet_exposure ?? ''} onChange={set('internet_exposure')} />
          <Assume label="Data classification (most sensitive reached)" current={agent.data_classification} options={CLASSIFICATIONS.map((c) => [c, c])} value={fields.max_data_classification ?? ''} onChange={set('max_data_classification')} />
          <Assume label="Code execution" current={agent.code_execution} options={LEVELS3('none', 'sandboxed', 'privileged')} value={fields.code_execution ?? ''} onChange={set('code_execution')} />
          <Assume label="Persistent memory" current={agent.persistent_memory} options={LEVELS3('none', 'bounded', 'unbounded')} value={fields.persistent_memory ?? ''} onChange={set('persistent_memory')} />
          <Assume label="Human approval coverage" current={agent.human_approval_coverage} options={LEVELS3('strong', 'partial', 'none')} value={fields.approval_coverage ?? ''} onChange={set('approval_coverage')} />
          <Assume label="Calls enforced through the gateway" current={agent.gateway_enforced ? 'yes' : 'no'} options={YES_NO} value={fields.gateway_enforced ?? ''} onChange={set('gateway_enforced')} />
          <Assume label="Owner attestation current" current={agent.last_attested_at ? `attested ${new Date(agent.last_attested_at).toLocaleDateString()}` : 'never attested'} options={YES_NO} value={fields.attestation_current ?? ''} onChange={set('attestation_current')} />
          <Assume label="Delegation breadth" current="as registered" options={LEVELS3('none', 'narrow', 'broad')} value={fields.delegation_breadth ?? ''} onChange={set('delegation_breadth')} />
          <Assume label="Write tools" current="as granted" options={YES_NO} value={fields.has_write_tools ?? ''} onChange={set('has_write_tools')} />
          <Assume label="Destructive or financial tools" current="as granted" options={YES_NO} value={fields.has_high_impact_tools ?? ''} onChange={set('has_high_impact_tools')} />
          <Assume label="Admin tools" current="as granted" options={YES_NO} value={fields.has_privileged_tools ?? ''} onChange={set('has_privileged_tools')} />
        </div>
        <fieldset className="risk-flags">
          <legend>Remediations</legend>
          {flag('resolve_findings', 'Its open findings are resolved')}
          {flag('clear_detections', 'No denied calls or poisoned tools')}
          {flag('approve_mcp_servers', 'Every MCP server it uses is approved')}
          {flag('use_scoped_identity', 'Its own workload identity, bindings tied to it, no shared credential')}
        </fieldset>
        <div className="actions">
          <button type="submit" className="primary" disabled={whatIf.isPending}>
            {whatIf.isPending ? 'Working…' : 'Show the score'}
          </button>
          <button
            type="button"
            onClick={() => {
              setFields({});
              setFlags({});
              whatIf.reset();
            }}
          >
            Reset
          </button>
        </div>
      </form>
      {whatIf.isError ? <ErrorPanel error={whatIf.error} title="The what-if was not worked out" /> : null}
      {whatIf.data ? <WhatIfResult result={whatIf.data} /> : null}
    </Section>
  );
}

function WhatIfResult({ result }: { result: WhatIf }) {
  const changed = result.factors.filter((f) => f.difference !== 0);
  return (
    <div className="risk-whatif-result" role="region" aria-label="What-if result">
      <div className="risk-compare">
        <div>
          <p className="small muted">Now</p>
          <p className="risk-big" data-testid="whatif-current">
            <span className="risk-number">{result.current.score}</span> <BandBadge value={result.current.band} />
          </p>
        </div>
        <div>
          <p className="small muted">With the changes</p>
          <p className="risk-big" data-testid="whatif-proposed">
            <span className="risk-number">{result.proposed.score}</span> <BandBadge value={result.proposed.band} />
          </p>
        </div>
        <div>
          <p className="small muted">Difference</p>
          <p className="risk-big" data-testid="whatif-difference">
            <span className="risk-number">{signed(result.difference)}</span>
          </p>
        </div>
      </div>
      <p className="small">
        {result.applied.length === 0 ? 'None of the changes moves anything.' : <>Changes that moved something: {result.applied.map((a) => <code key={a}>{a} </code>)}</>}{' '}
        {changed.length} {changed.length === 1 ? 'factor changes' : 'factors change'}. Nothing was saved.
      </p>
      <DataTable
        caption="Each factor now and with the changes"
        rows={[...changed, ...result.factors.filter((f) => f.difference === 0)]}
        rowKey={(f) => f.key}
        columns={[
          { header: 'Factor', cell: (f) => <><strong>{f.description}</strong>{f.enabled ? null : <span className="muted"> (disabled)</span>}</> },
          { header: 'Now', cell: (f) => String(f.current), className: 'num' },
          { header: 'With the changes', cell: (f) => String(f.proposed), className: 'num' },
          { header: 'Difference', cell: (f) => (f.difference === 0 ? <span className="muted">0</span> : <strong>{signed(f.difference)}</strong>), className: 'num' },
          { header: 'Why (with the changes)', cell: (f) => f.why },
        ]}
      />
    </div>
  );
}

function Ruleset() {
  const { can } = useSession();
  const queryClient = useQueryClient();
  const ruleset = useQuery({ queryKey: ['risk-ruleset'], queryFn: () => must(api.GET('/risks/ruleset')) });
  const [target, setTarget] = useState<Factor | null>(null);
  const change = useMutation({
    mutationFn: (v: { key: string; enabled: boolean; reason: string }) =>
      must(api.PATCH('/risks/ruleset/{factor_key}', { params: { path: { factor_key: v.key } }, body: { enabled: v.enabled, reason: v.reason } })),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ['risk-ruleset'] });
      void queryClient.invalidateQueries({ queryKey: ['risk'] });
      setTarget(null);
    },
  });
  return (
    <>
      <PageHeader title="Risk" description="The factors every score is the sum of. Switching one on or off recalculates every agent of the organisation." />
      <Tabs />
      {change.isSuccess && !target ? (
        <p className="success" role="status">
          {change.data.description} is {change.data.enabled ? 'enabled' : 'disabled'}; scores are being recalculated.
        </p>
      ) : null}
      <QueryView query={ruleset}>
        {(r) => (
          <>
            <Section title="Bands">
              <ul className="plain risk-bands">
                {r.bands.map((b) => (
                  <li key={b.band}>
                    <BandBadge value={b.band} /> {b.from}–{b.to}
                  </li>
                ))}
              </ul>
            </Section>
            <DataTable
              caption="Risk factors"
              rows={r.factors}
              rowKey={(f) => f.key}
              columns={[
                { header: 'Factor', cell: (f) => <><strong>{f.description}</strong><br /><code className="small">{f.key}</code></> },
                { header: 'Weight', cell: (f) => String(f.weight), className: 'num' },
                { header: 'State', cell: (f) => <Badge tone={f.enabled ? 'good' : 'neutral'}>{f.enabled ? 'enabled' : 'disabled'}</Badge> },
                {
                  header: 'Last change',
                  cell: (f) =>
                    f.override ? (
                      <span className="small">
                        {f.override.enabled ? 'Enabled' : 'Disabled'} <Time value={f.override.changed_at} />: {f.override.reason}
                      </span>
                    ) : (
                      <span className="muted small">Tollgate’s default</span>
                    ),
                },
                ...(can('risk:configure')
                  ? [
                      {
                        header: 'Change',
                        cell: (f: Factor) => (
                          <button type="button" onClick={() => setTarget(f)} aria-label={`${f.enabled ? 'Disable' : 'Enable'} ${f.description}`}>
                            {f.enabled ? 'Disable' : 'Enable'}
                          </button>
                        ),
                      },
                    ]
                  : []),
              ]}
            />
          </>
        )}
      </QueryView>
      <ConfirmDialog
        open={target !== null}
        title={target ? `${target.enabled ? 'Disable' : 'Enable'} the factor ${target.key}` : ''}
        confirmLabel={target?.enabled ? 'Disable' : 'Enable'}
        danger={target?.enabled ?? false}
        reason={{ label: 'Reason (5 characters or more)', required: true }}
        busy={change.isPending}
        error={change.error}
        onConfirm={(reason) => target && change.mutate({ key: target.key, enabled: !target.enabled, reason })}
        onClose={() => {
          setTarget(null);
          change.reset();
        }}
      >
        <p>{target?.description}. Every agent’s score is recalculated in the background; the change is audited and recorded as evidence.</p>
      </ConfirmDialog>
    </>
  );
}
