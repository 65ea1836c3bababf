import { inScope } from '../../../db/database.js';
import { governanceReadiness, type FrameworkCoverage } from '../../governance/index.js';
import { toCsv } from '../csv.js';
import { percentBars } from '../pdf/charts.js';
import { ReportPdf } from '../pdf/document.js';
import { table } from '../pdf/table.js';
import { COLOUR, levelColour } from '../pdf/theme.js';
import { exceptionsInForce, openRemediation } from '../reports.repository.js';
import type { GovernanceReadinessParameters } from '../reports.schemas.js';
import { day, humanise, plural, ReportError, type GenerateContext, type ReportFile } from './common.js';

/** An exception in force or waiting for its decision, as the report lists it. */
export interface ExceptionLine {
  control: string;
  agent: string | null;
  title: string;
  owner_email: string;
  status: string;
  expires_at: Date;
}

/** A remediation task not done, as the report lists it. */
export interface TaskLine {
  control: string | null;
  agent: string | null;
  title: string;
  assignee_email: string | null;
  due_at: Date | null;
  priority: string;
  status: string;
}

export interface ReadinessData {
  frameworks: FrameworkCoverage[];
  exceptions: ExceptionLine[];
  tasks: TaskLine[];
}

export const READINESS_COLUMNS = ['framework', 'framework_name', 'framework_version', 'coverage_percent', 'readiness', 'control_ref', 'control_title', 'status', 'why'] as const;

/** One row per control of every framework reported on, failing or not: a spreadsheet filters what it needs. */
export function readinessCsv(d: ReadinessData): string {
  return toCsv(
    READINESS_COLUMNS,
    d.frameworks.flatMap((f) => f.controls.map((c) => [f.key, f.name, f.version, f.coverage_percent, f.readiness, c.ref, c.title, c.status, c.why])),
  );
}

export function renderReadinessPdf(ctx: Pick<GenerateContext, 'organisation' | 'generatedAt'>, p: GovernanceReadinessParameters, d: ReadinessData): Promise<Buffer> {
  const pdf = new ReportPdf({
    title: 'Governance readiness',
    description:
      'How ready the organisation is against each governance framework: the share of controls met or excepted, the ' +
      'controls that fail and why, the exceptions in force and the remediation still open.',
    organisation: ctx.organisation.name,
    generatedAt: ctx.generatedAt,
    details: [
      ['Frameworks', p.framework ?? 'every framework'],
      ['Evidence window', `the ${plural(p.days, 'day')} up to the report's generation`],
    ],
  });

  pdf.heading('Coverage');
  percentBars(pdf, {
    title: 'Coverage per framework',
    items: d.frameworks.map((f) => ({ label: f.name, percent: f.coverage_percent, colour: levelColour(f.readiness), text: `${f.coverage_percent}%  ${humanise(f.readiness)}` })),
    empty: 'No governance framework to report on.',
  });
  table(
    pdf,
    [
      { header: 'Framework', weight: 3.4 },
      { header: 'Controls', weight: 0.9, align: 'right' },
      { header: 'Met', weight: 0.8, align: 'right' },
      { header: 'Excepted', weight: 0.9, align: 'right' },
      { header: 'Not met', weight: 0.9, align: 'right' },
      { header: 'Coverage', weight: 0.9, align: 'right' },
      { header: 'Readiness', weight: 1 },
    ],
    d.frameworks.map((f) => [
      { text: `${f.name}\n${f.version}`, bold: true },
      f.controls_total,
      f.controls_met,
      f.controls_excepted,
      { text: f.controls_not_met, colour: f.controls_not_met > 0 ? levelColour('critical') : COLOUR.ink },
      `${f.coverage_percent}%`,
      { text: humanise(f.readiness), colour: levelColour(f.readiness), bold: true },
    ]),
    { empty: 'No governance framework to report on.' },
  );

  for (const f of d.frameworks) {
    pdf.heading(f.name);
    pdf.paragraph(
      `${f.version}. ${plural(f.controls_met, 'control')} of ${f.controls_total} met, ${f.controls_excepted} excepted, ` +
        `${f.controls_not_met} not met: ${f.coverage_percent}% coverage, ${humanise(f.readiness)}. ` +
        `Evidence from ${day(f.since)} to ${day(f.until)} (${plural(f.window_days, 'day')}).`,
    );
    table(
      pdf,
      [
        { header: 'Control', weight: 1 },
        { header: 'Title', weight: 2.6 },
        { header: 'Status', weight: 1 },
        { header: 'Why', weight: 4.4 },
      ],
      f.failing_controls.map((c) => [{ text: c.ref, bold: true }, c.title, { text: humanise(c.status), colour: levelColour('critical'), bold: true }, c.why]),
      { empty: 'Every control is met or excepted.' },
    );
  }

  pdf.heading('Exceptions');
  table(
    pdf,
    [
      { header: 'Control', weight: 1.6 },
      { header: 'Exception', weight: 3 },
      { header: 'Agent', weight: 1.5 },
      { header: 'Owner', weight: 2 },
      { header: 'Status', weight: 0.9 },
      { header: 'Expires', weight: 1.25 },
    ],
    d.exceptions.map((e) => [
      { text: e.control, bold: true },
      e.title,
      e.agent ?? 'the organisation',
      e.owner_email,
      { text: e.status === 'approved' ? 'in force' : 'awaiting decision', colour: e.status === 'approved' ? COLOUR.ink : levelColour('medium') },
      day(e.expires_at),
    ]),
    { empty: 'No exception is in force or awaiting a decision.' },
  );
  pdf.note('An approved exception for the whole organisation counts a control without evidence as excepted until it expires; one for a single agent does not change the framework\'s coverage.');

  pdf.heading('Open remediation');
  table(
    pdf,
    [
      { header: 'Priority', weight: 0.9 },
      { header: 'Task', weight: 3.1 },
      { header: 'Control', weight: 1.5 },
      { header: 'Agent', weight: 1.4 },
      { header: 'Assignee', weight: 1.8 },
      { header: 'Due', weight: 1.25 },
      { header: 'Status', weight: 1 },
    ],
    d.tasks.map((t) => [
      { text: t.priority, colour: levelColour(t.priority), bold: true },
      t.title,
      t.control ?? '-',
      t.agent ?? '-',
      t.assignee_email ?? 'unassigned',
      { text: day(t.due_at) || '-', colour: t.due_at && t.due_at.getTime() < ctx.generatedAt.getTime() ? levelColour('critical') : COLOUR.ink },
      humanise(t.status),
    ]),
    { empty: 'No remediation task is open.' },
  );
  return pdf.finish();
}

/**
 * Coverage from the governance module (every framework, over `days` ending at the report's time), and its
 * exceptions and open remediation tasks, read from its tables. With `framework`, only that framework, and only the
 * exceptions and tasks on its controls.
 */
export async function gatherReadiness(ctx: GenerateContext, p: GovernanceReadinessParameters): Promise<ReadinessData> {
  const all = await governanceReadiness(ctx.db, ctx.orgId, ctx.generatedAt, p.days);
  const frameworks = p.framework ? all.filter((f) => f.key === p.framework) : all;
  if (p.framework && frameworks.length === 0) {
    throw new ReportError(`There is no framework "${p.framework}"; the frameworks are ${all.map((f) => f.key).join(', ')}.`);
  }
  // Controls by id, named as people read them: "eu-ai-act Art.14".
  const controls = new Map(frameworks.flatMap((f) => f.controls.map((c) => [c.id, `${f.key} ${c.ref}`] as const)));
  const { exceptions, tasks } = await inScope(ctx.db, { orgId: ctx.orgId }, async (tx) => ({
    exceptions: await exceptionsInForce(tx, ctx.orgId, ctx.generatedAt),
    tasks: await openRemediation(tx, ctx.orgId),
  }));
  const relevant = (controlId: string | null) => (p.framework ? controlId !== null && controls.has(controlId) : true);
  return {
    frameworks,
    exceptions: exceptions
      .filter((e) => relevant(e.control_id))
      .map((e) => ({ control: controls.get(e.control_id) ?? e.control_id, agent: e.agent_name, title: e.title, owner_email: e.owner_email, status: e.status, expires_at: e.expires_at })),
    tasks: tasks
      .filter((t) => relevant(t.control_id))
      .map((t) => ({
        control: t.control_id ? (controls.get(t.control_id) ?? t.control_id) : null,
        agent: t.agent_name,
        title: t.title,
        assignee_email: t.assignee_email,
        due_at: t.due_at,
        priority: t.priority,
        status: t.status,
      })),
  };
}

export async function governanceReadinessReport(ctx: GenerateContext, p: GovernanceReadinessParameters): Promise<ReportFile> {
  const d = await gatherReadiness(ctx, p);
  if (p.format === 'csv') return { bytes: Buffer.from(readinessCsv(d), 'utf8'), format: 'csv' };
  return { bytes: await renderReadinessPdf(ctx, p, d), format: 'pdf' };
}
