import { inScope } from '../../../db/database.js';
import { dashboard, type DashboardOut } from '../../dashboard/index.js';
import { governanceReadiness, type FrameworkCoverage } from '../../governance/index.js';
import { barChart, lineChart, stackedBarChart } from '../pdf/charts.js';
import { ReportPdf } from '../pdf/document.js';
import { table } from '../pdf/table.js';
import { COLOUR, levelColour } from '../pdf/theme.js';
import { registerRows, type RegisterRow } from '../reports.repository.js';
import type { ExecutiveSummaryParameters } from '../reports.schemas.js';
import { humanise, percent, plural, topFactors, windowStart, windowText, type GenerateContext, type ReportFile } from './common.js';

export interface ExecutiveSummaryData {
  overview: DashboardOut;
  topAgents: RegisterRow[];
  readiness: FrameworkCoverage[];
}

const TOP_AGENTS = 5;

/**
 * What the summary reads: the dashboard's numbers over the window (its one statement, as of the report's time),
 * the highest-risk agents, and each framework's readiness from the governance module (over its own default window).
 */
export async function gatherExecutiveSummary(ctx: GenerateContext, p: ExecutiveSummaryParameters): Promise<ExecutiveSummaryData> {
  const asOf = { now: () => ctx.generatedAt };
  const overview = await dashboard(ctx.db, asOf, ctx.orgId, p.days);
  const sinceDay = windowStart(ctx.generatedAt, p.days).toISOString().slice(0, 10);
  const topAgents = await inScope(ctx.db, { orgId: ctx.orgId }, (tx) => registerRows(tx, ctx.orgId, { minBand: 'low', sinceDay, limit: TOP_AGENTS }));
  // Over the governance module's own window, so that the line matches GET /governance/frameworks.
  const readiness = await governanceReadiness(ctx.db, ctx.orgId, ctx.generatedAt);
  return { overview, topAgents, readiness };
}

export function renderExecutiveSummary(ctx: Pick<GenerateContext, 'organisation' | 'generatedAt'>, p: ExecutiveSummaryParameters, d: ExecutiveSummaryData): Promise<Buffer> {
  const o = d.overview;
  const pdf = new ReportPdf({
    title: 'Executive summary',
    description:
      'Where the organisation stands on its AI agents: how many there are and how risky, what the gateway decided over ' +
      'the window, what waits for people, the open findings and how ready each governance framework is.',
    organisation: ctx.organisation.name,
    generatedAt: ctx.generatedAt,
    details: [['Window', windowText(ctx.generatedAt, p.days)]],
  });

  const decisions = o.decisions.total;
  const decided = decisions.allow + decisions.deny + decisions.require_approval;
  const highRisk = o.agents.by_risk_band.high + o.agents.by_risk_band.critical;
  const urgentFindings = o.open_findings.by_severity.critical + o.open_findings.by_severity.high;
  const unapproved = o.mcp_servers.total - o.mcp_servers.by_trust_state.approved;
  const latestRisk = o.risk_trend.at(-1);

  pdf.heading('At a glance');
  pdf.facts([
    { label: 'Agents', value: o.agents.total, note: `${o.agents.by_environment.production} in production, ${o.agents.by_status.active} active` },
    { label: 'High or critical risk', value: highRisk, note: `${o.agents.by_risk_band.unscored} not scored yet`, colour: highRisk > 0 ? levelColour('high') : undefined },
    { label: 'Average risk score', value: latestRisk ? latestRisk.average_score.toFixed(1) : 'none', note: latestRisk ? `on ${latestRisk.day}, highest ${latestRisk.max_score}` : 'no scores in the window' },
    { label: 'Open findings', value: o.open_findings.total, note: `${urgentFindings} high or critical`, colour: urgentFindings > 0 ? levelColour('critical') : undefined },
    { label: 'Decisions', value: decided, note: `over ${plural(p.days, 'day')}` },
    { label: 'Denied', value: decisions.deny, note: `${percent(decisions.deny, decided)} of decisions`, colour: decisions.deny > 0 ? COLOUR.deny : undefined },
    { label: 'Pending approvals', value: o.pending_approvals.count, note: o.pending_approvals.oldest_requested_at ? `oldest since ${o.pending_approvals.oldest_requested_at.slice(0, 16).replace('T', ' ')}` : 'none waiting', colour: o.pending_approvals.count > 0 ? COLOUR.approval : undefined },
    { label: 'MCP servers', value: o.mcp_servers.total, note: `${unapproved} not approved` },
  ]);

  pdf.heading('Decisions over time');
  stackedBarChart(pdf, {
    title: `Gateway decisions per day, last ${plural(p.days, 'day')}`,
    labels: o.decisions.per_day.map((x) => x.day.slice(5)),
    series: [
      { name: 'Allowed', colour: COLOUR.allow, values: o.decisions.per_day.map((x) => x.allow) },
      { name: 'Approval required', colour: COLOUR.approval, values: o.decisions.per_day.map((x) => x.require_approval) },
      { name: 'Denied', colour: COLOUR.deny, values: o.decisions.per_day.map((x) => x.deny) },
    ],
    empty: 'No actions were submitted in this window.',
  });
  pdf.note('Actions submitted through the gateway and the console, on the UTC day they were submitted, by their latest decision.');
  pdf.subheading('Top deny reasons');
  table(
    pdf,
    [
      { header: 'Reason code', weight: 3 },
      { header: 'Denials', weight: 1, align: 'right' },
      { header: 'Share of denials', weight: 1, align: 'right' },
    ],
    o.top_deny_reasons.map((r) => [r.reason_code, r.count, percent(r.count, decisions.deny)]),
    { empty: 'No denials in this window.' },
  );

  pdf.heading('Risk');
  const bands = ['low', 'medium', 'high', 'critical', 'unscored'] as const;
  barChart(pdf, {
    title: 'Agents by risk band',
    bars: bands.map((b) => ({ label: b, value: o.agents.by_risk_band[b], colour: levelColour(b) })),
    empty: 'There are no agents yet.',
  });
  const trend = new Map(o.risk_trend.map((x) => [x.day, x.average_score]));
  const days = Array.from({ length: p.days }, (_, i) => new Date(windowStart(ctx.generatedAt, p.days).getTime() + i * 86_400_000).toISOString().slice(0, 10));
  lineChart(pdf, {
    title: 'Average risk score per day',
    labels: days.map((x) => x.slice(5)),
    values: days.map((x) => trend.get(x) ?? null),
    yMax: 100,
    colour: COLOUR.accent,
    seriesName: 'Average score of the agents scored that day (0-100)',
    empty: 'No risk scores were recorded in this window.',
  });
  pdf.subheading(`Highest-risk agents`);
  table(
    pdf,
    [
      { header: 'Agent', weight: 3 },
      { header: 'Environment', weight: 1.4 },
      { header: 'Score', weight: 0.8, align: 'right' },
      { header: 'Band', weight: 1 },
      { header: 'Largest factors', weight: 5 },
    ],
    d.topAgents.map((a) => [
      { text: a.name, bold: true },
      a.environment,
      a.score,
      { text: a.band, colour: levelColour(a.band), bold: true },
      topFactors(a.factors)
        .map((f) => `${humanise(f.key)} +${f.contribution}`)
        .join(', '),
    ]),
    { empty: 'No agent has a risk score yet.' },
  );

  pdf.heading('Open findings');
  const severities = ['critical', 'high', 'medium', 'low'] as const;
  table(
    pdf,
    [
      { header: 'Severity', weight: 2 },
      { header: 'Open or in progress', weight: 1, align: 'right' },
    ],
    [...severities.map((s) => [{ text: s, colour: levelColour(s), bold: true }, o.open_findings.by_severity[s]]), [{ text: 'Total', bold: true }, { text: o.open_findings.total, bold: true }]],
  );

  pdf.heading('Governance readiness');
  table(
    pdf,
    [
      { header: 'Framework', weight: 3 },
      { header: 'Controls met', weight: 1.2, align: 'right' },
      { header: 'Excepted', weight: 1, align: 'right' },
      { header: 'Not met', weight: 1, align: 'right' },
      { header: 'Coverage', weight: 1, align: 'right' },
      { header: 'Readiness', weight: 1.2 },
    ],
    d.readiness.map((f) => [
      { text: `${f.name}\n${f.version}`, bold: true },
      `${f.controls_met} of ${f.controls_total}`,
      f.controls_excepted,
      f.controls_not_met,
      `${f.coverage_percent}%`,
      { text: humanise(f.readiness), colour: levelColour(f.readiness), bold: true },
    ]),
    { empty: 'No governance framework is in use.' },
  );
  const windowDays = d.readiness[0]?.window_days;
  pdf.note(
    `Coverage: the framework's controls met or excepted, as a share of all of them${windowDays ? `, on the evidence of the last ${plural(windowDays, 'day')}` : ''}. ` +
      'Ready: no control is unmet; partial: at least half are covered. The governance readiness report lists the failing controls and why.',
  );
  return pdf.finish();
}

export async function executiveSummary(ctx: GenerateContext, p: ExecutiveSummaryParameters): Promise<ReportFile> {
  const data = await gatherExecutiveSummary(ctx, p);
  return { bytes: await renderExecutiveSummary(ctx, p, data), format: 'pdf' };
}
