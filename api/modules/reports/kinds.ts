import { z } from 'zod';
import type { GenerateContext, ReportFile } from './documents/common.js';
import { evidenceBundle, resolveBundleWindow } from './documents/evidence-bundle.js';
import { PARAMETERS, REPORT_KIND, type ReportFormat, type ReportKind, type ReportKindOut } from './reports.schemas.js';

/** What a kind's generator is called with: the context, and the parameters as the report stored them. */
type Generator<K extends ReportKind> = (ctx: GenerateContext, p: z.output<(typeof PARAMETERS)[K]>) => Promise<ReportFile>;

export interface KindSpec<K extends ReportKind = ReportKind> {
  kind: K;
  title: string;
  description: string;
  /** What the report holds, section by section (GET /reports/kinds, docs/reports.md). */
  contents: readonly string[];
  /** The files it comes as; the first is the default. */
  formats: readonly ReportFormat[];
  parameters: (typeof PARAMETERS)[K];
  /**
   * Fills in, when the report is created, what depends on the moment of asking (the evidence window's end),
   * so that the stored parameters say exactly what the report covers. Throws 422 for what the schema cannot check.
   */
  resolve?(p: z.output<(typeof PARAMETERS)[K]>, now: Date): z.output<(typeof PARAMETERS)[K]>;
  generate: Generator<K>;
}

/**
 * A generator loaded when a report of its kind is first generated: the PDF documents bring pdfkit and its
 * font machinery (several MB resident), which an API that never generates a report should not hold.
 */
const loaded =
  <K extends ReportKind>(load: () => Promise<Generator<K>>): Generator<K> =>
  async (ctx, p) =>
    (await load())(ctx, p);

/**
 * The catalogue of report kinds: one entry per kind of the spec, with its parameters (reports.schemas.ts) and its
 * generator (documents/). GET /reports/kinds serves it; POST /reports validates against it; the job runs it.
 */
export const KINDS: { [K in ReportKind]: KindSpec<K> } = {
  executive_summary: {
    kind: 'executive_summary',
    title: 'Executive summary',
    description: 'Where the organisation stands on its AI agents, on a few pages for leadership.',
    contents: [
      'At a glance: agents, high-risk agents, average risk score, open findings, decisions, denials, pending approvals, MCP servers',
      'Decisions over time: allowed, approval required and denied per day (chart), top deny reasons',
      'Risk: agents by risk band (chart), average risk score per day (chart), the five highest-risk agents',
      'Open findings by severity',
      'Governance readiness: one line per framework (coverage and readiness)',
    ],
    formats: ['pdf'],
    parameters: PARAMETERS.executive_summary,
    generate: loaded(() => import('./documents/executive-summary.js').then((m) => m.executiveSummary)),
  },
  agent_inventory: {
    kind: 'agent_inventory',
    title: 'Agent inventory',
    description: 'Every agent with its environment, status, owners, risk band, gateway enforcement and granted tools.',
    contents: [
      'Summary: agents by status and environment, agents without an owner or gateway enforcement, agents by risk band (chart)',
      'Agents: one row each, by name (environment, status, owners, risk band and score, gateway enforced, tools granted)',
    ],
    formats: ['pdf', 'csv'],
    parameters: PARAMETERS.agent_inventory,
    generate: loaded(() => import('./documents/agent-inventory.js').then((m) => m.agentInventory)),
  },
  risk_register: {
    kind: 'risk_register',
    title: 'Risk register',
    description: 'The agents by Agent Risk Score with the factors behind each score, and the open findings.',
    contents: [
      'Summary: agents in the register, critical and high, average score; agents by risk band (chart)',
      'Register: agents by score, highest first, with band, change over the window, the three largest factors and open findings',
      'Open findings: most severe first (PDF only; at most 500 listed)',
    ],
    formats: ['pdf', 'csv'],
    parameters: PARAMETERS.risk_register,
    generate: loaded(() => import('./documents/risk-register.js').then((m) => m.riskRegister)),
  },
  governance_readiness: {
    kind: 'governance_readiness',
    title: 'Governance readiness',
    description: 'How ready the organisation is against each governance framework, and what stands in the way.',
    contents: [
      'Coverage: each framework\'s coverage (chart) and its controls met, excepted and not met',
      'Per framework: the failing controls, each with why it fails',
      'Exceptions: the approved exceptions in force, with their expiry',
      'Open remediation: the remediation tasks not done, by priority and due date',
    ],
    formats: ['pdf', 'csv'],
    parameters: PARAMETERS.governance_readiness,
    generate: loaded(() => import('./documents/governance-readiness.js').then((m) => m.governanceReadinessReport)),
  },
  evidence_bundle: {
    kind: 'evidence_bundle',
    title: 'Evidence bundle',
    description: 'The signed evidence records of a window as an archive that can be verified offline.',
    contents: ['The evidence records whose time falls in [since, until), with their signatures and what verifies them, as a gzipped tar archive'],
    formats: ['tar.gz'],
    parameters: PARAMETERS.evidence_bundle,
    resolve: resolveBundleWindow,
    generate: evidenceBundle,
  },
};

/** The catalogue as GET /reports/kinds answers it, parameters as JSON Schema (what a request may send). */
export function kindCatalogue(): ReportKindOut[] {
  return REPORT_KIND.map((kind) => {
    const k = KINDS[kind] as KindSpec;
    const { $schema: _, ...schema } = z.toJSONSchema(k.parameters, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    return { kind, title: k.title, description: k.description, contents: [...k.contents], formats: [...k.formats], parameters: schema };
  });
}
