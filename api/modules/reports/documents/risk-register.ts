import { inScope } from '../../../db/database.js';
import { toCsv } from '../csv.js';
import { barChart } from '../pdf/charts.js';
import { ReportPdf } from '../pdf/document.js';
import { table } from '../pdf/table.js';
import { levelColour } from '../pdf/theme.js';
import { openFindings, registerRows, type FindingRow, type RegisterRow } from '../reports.repository.js';
import type { RiskRegisterParameters } from '../reports.schemas.js';
import { change, day, humanise, plural, topFactors, windowStart, windowText, type GenerateContext, type ReportFile } from './common.js';

/** The most open findings the PDF lists (the rest are counted); the CSV counts them per agent. */
export const MAX_FINDINGS_LISTED = 500;

export const REGISTER_COLUMNS = [
  'rank',
  'agent_id',
  'agent',
  'environment',
  'status',
  'score',
  'band',
  'score_change',
  'top_factors',
  'open_findings',
  'scored_at',
] as const;

export interface RiskRegisterData {
  agents: RegisterRow[];
  findings: { rows: FindingRow[]; total: number };
}

const factorText = (a: RegisterRow) => topFactors(a.factors).map((f) => `${f.key} +${f.contribution}: ${f.why}`);

export function registerCsv(d: RiskRegisterData): string {
  return toCsv(
    REGISTER_COLUMNS,
    d.agents.map((a, i) => [i + 1, a.id, a.name, a.environment, a.status, a.score, a.band, change(a.score, a.score_then), factorText(a), a.open_findings, a.computed_at]),
  );
}

export function renderRegisterPdf(ctx: Pick<GenerateContext, 'organisation' | 'generatedAt'>, p: RiskRegisterParameters, d: RiskRegisterData): Promise<Buffer> {
  const pdf = new ReportPdf({
    title: 'Risk register',
    description:
      'The agents by Agent Risk Score, highest first, with the factors that add most to each score and how the score ' +
      'moved over the window, followed by the open findings that feed the scores.',
    organisation: ctx.organisation.name,
    generatedAt: ctx.generatedAt,
    layout: 'landscape',
    details: [
      ['Window', windowText(ctx.generatedAt, p.days)],
      ['Agents listed', p.min_band === 'low' ? 'every scored agent' : `${p.min_band} risk and above`],
    ],
  });
  const { agents, findings } = d;
  const inBand = (b: string) => agents.filter((a) => a.band === b).length;
  const rising = agents.filter((a) => a.score_then !== null && a.score > a.score_then).length;
  const average = agents.length > 0 ? (agents.reduce((n, a) => n + a.score, 0) / agents.length).toFixed(1) : 'none';

  pdf.heading('Summary');
  pdf.facts([
    { label: 'Agents in the register', value: agents.length },
    { label: 'Critical', value: inBand('critical'), colour: levelColour('critical') },
    { label: 'High', value: inBand('high'), colour: levelColour('high') },
    { label: 'Average score', value: average, note: `${rising} rose over the window` },
  ]);
  barChart(pdf, {
    title: 'Agents by risk band',
    bars: (['low', 'medium', 'high', 'critical'] as const).map((b) => ({ label: b, value: inBand(b), colour: levelColour(b) })),
    height: 110,
    empty: 'No agent in the register.',
  });

  pdf.heading('Register');
  pdf.note(
    `Change: the score now against the first daily score on or after ${day(windowStart(ctx.generatedAt, p.days))}; "-" when the agent has no ` +
      'score that far back. Factors: the three that add most points, with the facts behind them.',
  );

  table(
    pdf,
    [
      { header: '#', weight: 0.45, align: 'right' },
      { header: 'Agent', weight: 2.4 },
      { header: 'Environment / status', weight: 1.5 },
      { header: 'Score', weight: 0.7, align: 'right' },
      { header: 'Band', weight: 0.9 },
      { header: `Change (${p.days} d)`, weight: 0.9, align: 'right' },
      { header: 'Largest factors', weight: 6.2 },
      { header: 'Open findings', weight: 0.9, align: 'right' },
    ],
    agents.map((a, i) => [
      i + 1,
      { text: a.name, bold: true },
      `${a.environment}\n${a.status}`,
      { text: a.score, bold: true },
      { text: a.band, colour: levelColour(a.band), bold: true },
      change(a.score, a.score_then) || '-',
      topFactors(a.factors)
        .map((f) => `${humanise(f.key)} +${f.contribution}: ${f.why}`)
        .join('\n') || 'nothing adds to the score',
      a.open_findings,
    ]),
    { empty: 'No agent in the register: none is scored in the bands asked for.' },
  );
  pdf.heading('Open findings');
  const listed = findings.rows.length;
  pdf.paragraph(
    `${plural(findings.total, 'finding')} open or in progress` +
      (findings.total > listed ? `; the ${listed} most severe are listed here (GET /findings?status=open lists them all).` : '.'),
  );
  table(
    pdf,
    [
      { header: 'Severity', weight: 0.9 },
      { header: 'Finding', weight: 4.5 },
      { header: 'Category', weight: 1.6 },
      { header: 'About', weight: 2.4 },
      { header: 'Status', weight: 1 },
      { header: 'Opened', weight: 1 },
    ],
    findings.rows.map((f) => [
      { text: f.severity, colour: levelColour(f.severity), bold: true },
      f.title,
      humanise(f.category),
      [f.agent_name && `agent ${f.agent_name}`, f.server_name && `server ${f.server_name}`, f.tool_key && `tool ${f.tool_key}`].filter(Boolean).join('\n') || '-',
      humanise(f.status),
      day(f.created_at),
    ]),
    { empty: 'No open findings.' },
  );
  return pdf.finish();
}

export async function riskRegister(ctx: GenerateContext, p: RiskRegisterParameters): Promise<ReportFile> {
  const sinceDay = windowStart(ctx.generatedAt, p.days).toISOString().slice(0, 10);
  const d = await inScope(ctx.db, { orgId: ctx.orgId }, async (tx) => ({
    agents: await registerRows(tx, ctx.orgId, { minBand: p.min_band, sinceDay }),
    findings: p.format === 'pdf' ? await openFindings(tx, ctx.orgId, MAX_FINDINGS_LISTED) : { rows: [], total: 0 },
  }));
  if (p.format === 'csv') return { bytes: Buffer.from(registerCsv(d), 'utf8'), format: 'csv' };
  return { bytes: await renderRegisterPdf(ctx, p, d), format: 'pdf' };
}
