import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, ApiFailure, must, type Paths } from '../api/client';
import { BarChart, ColumnChart, LineChart, Sparkline } from '../components/charts';
import { ErrorPanel, Field, Loading, PageHeader, QueryView, Section, Time } from '../components/ui';
import { useSession } from '../session';
import './dashboard.css';

type Dashboard = Paths['/dashboard']['get']['responses'][200]['content']['application/json'];
type Stats = Paths['/telemetry/stats']['get']['responses'][200]['content']['application/json'];

/** The windows a person can pick, in days (the API takes 1-365). */
const WINDOWS = [7, 30, 90] as const;
const DEFAULT_DAYS = 30;
/** The hourly section covers the last day. */
const HOURS = 24;
/** The figures are counts of now: asked again every minute while the page is open. */
const REFRESH_MS = 60_000;

const n = (v: number) => v.toLocaleString();
const plural = (v: number, one: string, many = `${one}s`) => `${n(v)} ${v === 1 ? one : many}`;
/** `2026-11-26` as `26 Nov`, for axis labels (the data table keeps the full day). */
const shortDay = (day: string) => new Date(`${day}T00:00:00Z`).toLocaleDateString(undefined, { day: 'numeric', month: 'short', timeZone: 'UTC' });
const shortHour = (hour: string) => new Date(hour).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

export default function DashboardPage() {
  const { can } = useSession();
  if (!can('agent:read')) {
    return (
      <>
        <PageHeader title="Dashboard" />
        <ErrorPanel
          title="You cannot see the dashboard"
          error={new ApiFailure(403, 'forbidden', 'The dashboard counts the organisation’s agents, decisions and approvals; ask an administrator for a role that reads agents.', null, { required_permission: 'agent:read' })}
        />
      </>
    );
  }
  return <Overview />;
}

function Overview() {
  const { can } = useSession();
  const [params, setParams] = useSearchParams();
  const asked = Number(params.get('days'));
  const days = (WINDOWS as readonly number[]).includes(asked) ? asked : DEFAULT_DAYS;
  const dashboard = useQuery({
    queryKey: ['dashboard', days],
    queryFn: () => must(api.GET('/dashboard', { params: { query: { days } } })),
    refetchInterval: REFRESH_MS,
  });
  return (
    <>
      <PageHeader
        title="Dashboard"
        description={
          dashboard.data ? (
            <>
              Agents, approvals and findings as of <Time value={dashboard.data.generated_at} />; decisions since {dashboard.data.since} (UTC).
            </>
          ) : (
            'Agents, approvals and findings as of now; decisions and risk over the chosen window.'
          )
        }
        actions={
          <Field label="Window">
            {(id) => (
              <select id={id} value={days} onChange={(e) => setParams(Number(e.target.value) === DEFAULT_DAYS ? {} : { days: e.target.value })}>
                {WINDOWS.map((w) => (
                  <option key={w} value={w}>
                    Last {w} days
                  </option>
                ))}
              </select>
            )}
          </Field>
        }
      />
      <QueryView query={dashboard}>
        {(d) =>
          d.agents.total === 0 ? (
            <GetStarted d={d} />
          ) : (
            <>
              <Headline d={d} />
              <Decisions d={d} />
              <div className="grid-2 charts-row">
                <DenyReasons d={d} />
                <Agents d={d} />
              </div>
              <div className="grid-2 charts-row">
                <Inventory d={d} />
                <RiskTrend d={d} />
              </div>
              {can('telemetry:read') ? <LastDay /> : null}
            </>
          )
        }
      </QueryView>
    </>
  );
}

/** A new organisation: nothing to count yet, so the page says what to do first. */
function GetStarted({ d }: { d: Dashboard }) {
  const { can } = useSession();
  return (
    <Section title="No agents yet">
      <p>This organisation has no registered agent, so there is nothing to count yet. The dashboard fills in as agents are registered and their tool calls are decided. To begin:</p>
      <ol className="get-started">
        <li>
          {can('agent:write') ? <Link to="/agents">Register an agent</Link> : <Link to="/agents">Agents</Link>}: give it an owner and an identity, then bind the tools it may call.
        </li>
        <li>
          Or declare agents as Kubernetes resources (<code>kind: Agent</code>, <code>kubectl apply</code>); the controller registers them here (see <code>docs/kubernetes.md</code>).
        </li>
        {can('integration:read') ? (
          <li>
            Or <Link to="/integrations">discover agents from an integration</Link>: a model vendor, a directory, a code host or an MCP server.
          </li>
        ) : null}
        <li>
          Point the agent’s gateway client or sidecar at Tollgate; its decisions appear here (see <code>docs/client.md</code> and <code>docs/sidecar.md</code>).
        </li>
      </ol>
      {d.mcp_servers.total > 0 || d.open_findings.total > 0 ? (
        <p className="muted">
          The inventory already holds {plural(d.mcp_servers.total, 'MCP server')}, and {plural(d.open_findings.total, 'open finding')} {d.open_findings.total === 1 ? 'waits' : 'wait'} for triage.
        </p>
      ) : null}
    </Section>
  );
}

function Figure({ label, value, children, spark }: { label: string; value: ReactNode; children?: ReactNode; spark?: ReactNode }) {
  return (
    <div className="figure">
      <dt>{label}</dt>
      <dd className="figure-value">
        {value}
        {spark}
      </dd>
      {children ? <dd className="figure-detail">{children}</dd> : null}
    </div>
  );
}

function Headline({ d }: { d: Dashboard }) {
  const { can } = useSession();
  const t = d.decisions.total;
  const decided = t.allow + t.deny + t.require_approval;
  const perDay = (k: 'allow' | 'deny' | 'require_approval') => d.decisions.per_day.map((x) => x[k]);
  const share = (v: number) => (decided === 0 ? '' : ` (${Math.round((v / decided) * 100)}%)`);
  return (
    <Section title="In figures">
      <dl className="figures">
        <Figure label="Agents" value={n(d.agents.total)}>
          {n(d.agents.by_status.active)} active · {n(d.agents.by_status.suspended)} suspended · {n(d.agents.by_status.revoked)} revoked
        </Figure>
        <Figure label="Allowed" value={n(t.allow)} spark={<Sparkline values={perDay('allow')} colour="good" />}>
          decisions{share(t.allow)}, last {d.days} days
        </Figure>
        <Figure label="Denied" value={n(t.deny)} spark={<Sparkline values={perDay('deny')} colour="bad" />}>
          decisions{share(t.deny)}, last {d.days} days
        </Figure>
        <Figure label="Held for approval" value={n(t.require_approval)} spark={<Sparkline values={perDay('require_approval')} colour="warn" />}>
          decisions{share(t.require_approval)}, last {d.days} days
        </Figure>
        <Figure label="Pending approvals" value={n(d.pending_approvals.count)}>
          {d.pending_approvals.oldest_requested_at ? (
            <>
              oldest requested <Time value={d.pending_approvals.oldest_requested_at} />
            </>
          ) : (
            'none waiting'
          )}
          {can('approval:read') && d.pending_approvals.count > 0 ? (
            <>
              {' · '}
              <Link to="/approvals">Decide them</Link>
            </>
          ) : null}
        </Figure>
        <Figure label="Open findings" value={n(d.open_findings.total)}>
          {n(d.open_findings.by_severity.critical)} critical · {n(d.open_findings.by_severity.high)} high
          {can('finding:read') && d.open_findings.total > 0 ? (
            <>
              {' · '}
              <Link to="/findings">Triage</Link>
            </>
          ) : null}
        </Figure>
      </dl>
    </Section>
  );
}

function Decisions({ d }: { d: Dashboard }) {
  const t = d.decisions.total;
  const total = t.allow + t.deny + t.require_approval;
  const busiest = d.decisions.per_day.reduce(
    (best, x) => {
      const sum = x.allow + x.deny + x.require_approval;
      return sum > best.sum ? { day: x.day, sum } : best;
    },
    { day: '', sum: 0 },
  );
  return (
    <Section title="Decisions">
      {total === 0 ? (
        <p className="empty">No tool call was decided in the last {d.days} days.</p>
      ) : (
        <ColumnChart
          title={`Decisions per day, last ${d.days} days`}
          summary={`${n(total)} decisions in ${d.days} days: ${n(t.allow)} allowed, ${n(t.deny)} denied, ${n(t.require_approval)} held for approval; the busiest day was ${busiest.day} with ${n(busiest.sum)}.`}
          categories={d.decisions.per_day.map((x) => x.day)}
          series={[
            { label: 'Allowed', values: d.decisions.per_day.map((x) => x.allow), colour: 'good' },
            { label: 'Denied', values: d.decisions.per_day.map((x) => x.deny), colour: 'bad' },
            { label: 'Held for approval', values: d.decisions.per_day.map((x) => x.require_approval), colour: 'warn' },
          ]}
          formatCategory={shortDay}
        />
      )}
    </Section>
  );
}

function DenyReasons({ d }: { d: Dashboard }) {
  const reasons = d.top_deny_reasons;
  return (
    <Section title="Why calls were denied">
      {reasons.length === 0 ? (
        <p className="empty">No tool call was denied in the last {d.days} days.</p>
      ) : (
        <BarChart
          title={`Top deny reasons, last ${d.days} days`}
          description="A denial with several reasons counts once for each."
          summary={`${reasons.length === 1 ? 'One reason' : `${reasons.length} reasons`}; the most frequent is ${reasons[0]!.reason_code} with ${plural(reasons[0]!.count, 'denial')}.`}
          items={reasons.map((r) => ({ label: r.reason_code, value: r.count }))}
          labelHeader="Reason code"
          valueHeader="Denials"
          colour="bad"
        />
      )}
    </Section>
  );
}

const BAND_LABELS: Array<[keyof Dashboard['agents']['by_risk_band'], string]> = [
  ['critical', 'Critical'],
  ['high', 'High'],
  ['medium', 'Medium'],
  ['low', 'Low'],
  ['unscored', 'Not scored yet'],
];

function Agents({ d }: { d: Dashboard }) {
  const a = d.agents;
  const scored = a.total - a.by_risk_band.unscored;
  return (
    <Section title="Agents" actions={<Link to="/agents">All agents</Link>}>
      <BarChart
        title="Agents by risk band"
        summary={`${plural(a.total, 'agent')}: ${BAND_LABELS.map(([k, label]) => `${n(a.by_risk_band[k])} ${label.toLowerCase()}`).join(', ')}.`}
        description={scored === 0 ? 'No agent has a risk score yet.' : undefined}
        items={BAND_LABELS.map(([k, label]) => ({ label, value: a.by_risk_band[k] }))}
        labelHeader="Risk band"
        valueHeader="Agents"
        colour="violet"
      />
      <h3>By environment</h3>
      <dl className="facts">
        {(['production', 'staging', 'development'] as const).map((e) => (
          <div key={e}>
            <dt>{e[0]!.toUpperCase() + e.slice(1)}</dt>
            <dd>{n(a.by_environment[e])}</dd>
          </div>
        ))}
      </dl>
    </Section>
  );
}

const TRUST_LABELS: Array<[keyof Dashboard['mcp_servers']['by_trust_state'], string]> = [
  ['approved', 'Approved'],
  ['unknown', 'Unknown'],
  ['unsigned', 'Unsigned'],
  ['quarantined', 'Quarantined'],
];

function Inventory({ d }: { d: Dashboard }) {
  const { can } = useSession();
  const m = d.mcp_servers;
  const f = d.open_findings.by_severity;
  return (
    <Section title="MCP servers and findings">
      {m.total === 0 ? (
        <p className="empty">No MCP server is in the inventory.</p>
      ) : (
        <BarChart
          title="MCP servers by trust state"
          summary={`${plural(m.total, 'MCP server')}: ${TRUST_LABELS.map(([k, label]) => `${n(m.by_trust_state[k])} ${label.toLowerCase()}`).join(', ')}.`}
          items={TRUST_LABELS.map(([k, label]) => ({ label, value: m.by_trust_state[k] }))}
          labelHeader="Trust state"
          valueHeader="MCP servers"
          colour="info"
        />
      )}
      <h3>Open findings by severity</h3>
      <dl className="facts">
        {(['critical', 'high', 'medium', 'low'] as const).map((s) => (
          <div key={s}>
            <dt>{s[0]!.toUpperCase() + s.slice(1)}</dt>
            <dd>{n(f[s])}</dd>
          </div>
        ))}
      </dl>
      {can('inventory:read') && m.total > 0 ? (
        <p>
          <Link to="/inventory">Inventory</Link>
        </p>
      ) : null}
    </Section>
  );
}

function RiskTrend({ d }: { d: Dashboard }) {
  const r = d.risk_trend;
  return (
    <Section title="Risk over time">
      {r.length === 0 ? (
        <p className="empty">No risk score was recorded in the last {d.days} days.</p>
      ) : (
        <LineChart
          title={`Agent risk score per day, last ${d.days} days`}
          description="Scores run from 0 to 100; days without scores are left out."
          summary={`Risk on ${r[r.length - 1]!.day}: average ${r[r.length - 1]!.average_score}, highest ${r[r.length - 1]!.max_score}, over ${plural(r[r.length - 1]!.agents, 'agent')}.`}
          categories={r.map((x) => x.day)}
          series={[
            { label: 'Average score', values: r.map((x) => x.average_score), colour: 'info' },
            { label: 'Highest score', values: r.map((x) => x.max_score), colour: 'bad' },
          ]}
          formatCategory={shortDay}
          max={100}
        />
      )}
    </Section>
  );
}

/** The last day hour by hour, from telemetry: only for people who may read telemetry (the caller checks). */
function LastDay() {
  const stats = useQuery({
    queryKey: ['telemetry-stats', HOURS],
    queryFn: () => must(api.GET('/telemetry/stats', { params: { query: { hours: HOURS } } })),
    refetchInterval: REFRESH_MS,
    retry: (count, err) => !(err instanceof ApiFailure && err.status < 500) && count < 2,
  });
  // A refusal (a role changed since sign-in) leaves the section out, as if the person had no telemetry access.
  if (stats.isError && stats.error instanceof ApiFailure && stats.error.status === 403) return null;
  return (
    <Section title={`The last ${HOURS} hours`}>
      {stats.isPending ? <Loading /> : stats.isError ? <ErrorPanel error={stats.error} title="Could not load the hourly figures" /> : <Hourly s={stats.data} />}
    </Section>
  );
}

function Hourly({ s }: { s: Stats }) {
  const t = s.totals;
  const decided = t.decisions.allow + t.decisions.deny + t.decisions.require_approval;
  const ms = (v: number | null) => (v === null ? '—' : `${v.toLocaleString(undefined, { maximumFractionDigits: 1 })} ms`);
  return (
    <>
      <dl className="facts">
        <div>
          <dt>Gateway decisions</dt>
          <dd>{n(decided)}</dd>
        </div>
        <div>
          <dt>Telemetry events</dt>
          <dd>{n(t.events)}</dd>
        </div>
        <div>
          <dt>Decision latency, median</dt>
          <dd>{ms(t.decision_latency_ms.p50)}</dd>
        </div>
        <div>
          <dt>Decision latency, 95th percentile</dt>
          <dd>{ms(t.decision_latency_ms.p95)}</dd>
        </div>
      </dl>
      {decided === 0 ? (
        <p className="empty">No gateway decision in the last {s.hours} hours.</p>
      ) : (
        <LineChart
          title={`Gateway decisions per hour, last ${s.hours} hours`}
          summary={`${n(decided)} gateway decisions in ${s.hours} hours: ${n(t.decisions.allow)} allowed, ${n(t.decisions.deny)} denied, ${n(t.decisions.require_approval)} held for approval.`}
          categoryHeader="Hour starting"
          categories={s.series.map((x) => x.hour)}
          tableCategory={(h) => new Date(h).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}
          series={[
            { label: 'Allowed', values: s.series.map((x) => x.decisions.allow), colour: 'good' },
            { label: 'Denied', values: s.series.map((x) => x.decisions.deny), colour: 'bad' },
            { label: 'Held for approval', values: s.series.map((x) => x.decisions.require_approval), colour: 'warn' },
          ]}
          formatCategory={shortHour}
        />
      )}
    </>
  );
}
