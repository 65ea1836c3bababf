import { z } from 'zod';
import { timestamp } from '../../platform/schemas.js';
import { CATALOGUE, DEFAULT_WINDOW_DAYS } from '../governance/index.js';
import { ENVIRONMENT, RISK_BAND } from '../shared/index.js';

/** The spec's report kinds (behaviour.md, "Shared enumerations"). */
export const REPORT_KIND = ['executive_summary', 'agent_inventory', 'risk_register', 'governance_readiness', 'evidence_bundle'] as const;
export type ReportKind = (typeof REPORT_KIND)[number];

/** A report's life: queued by POST /reports, running in the worker, then ready (with its file) or failed. */
export const REPORT_STATUS = ['queued', 'running', 'ready', 'failed'] as const;
export type ReportStatus = (typeof REPORT_STATUS)[number];

/** The files reports come as: PDF for people, CSV for spreadsheets, a gzipped tar archive for the evidence bundle. */
export const REPORT_FORMAT = ['pdf', 'csv', 'tar.gz'] as const;
export type ReportFormat = (typeof REPORT_FORMAT)[number];

/** The largest file a report may be; a larger one fails with a message saying so (docs/reports.md, Limits). */
export const MAX_REPORT_BYTES = 50 * 1024 * 1024;

/** The widest window of an evidence bundle. */
export const MAX_BUNDLE_DAYS = 366;
/** The window of an evidence bundle asked for without `since`: the last 30 days. */
export const DEFAULT_BUNDLE_DAYS = 30;

const days = (what: string, byDefault = 30) =>
  z.number().int().min(1).max(365).default(byDefault).describe(`${what}: this many days up to the report's generation, 1-365 (default ${byDefault})`);

/** The frameworks of the governance catalogue, by key: what governance_readiness may be narrowed to. */
const FRAMEWORK_KEYS = CATALOGUE.frameworks.map((f) => f.key) as [string, ...string[]];
const format = <F extends readonly [ReportFormat, ...ReportFormat[]]>(formats: F) =>
  z
    .enum(formats)
    .default(formats[0] as F[number])
    .describe(formats.length === 1 ? `the file: ${formats[0]}, the only format of this kind` : `the file: ${formats.join(' or ')} (default ${formats[0]})`);

/*
 * Each kind's parameters. Strict: a key the kind does not take answers 422, so that a misspelt filter never
 * silently produces a report of everything. Defaults are filled in when the report is created and stored with
 * it, so that every attempt of its job builds the same report.
 */

export const executiveSummaryParameters = z
  .strictObject({ format: format(['pdf'] as const), days: days('the window of the decision chart, deny reasons and risk trend') })
  .describe('executive_summary parameters');

export const agentInventoryParameters = z
  .strictObject({
    format: format(['pdf', 'csv'] as const),
    environment: z.enum(ENVIRONMENT).optional().describe('only agents of this environment (default: every environment)'),
    include_revoked: z.boolean().default(true).describe('list revoked agents too (default true: the inventory is complete)'),
  })
  .describe('agent_inventory parameters');

export const riskRegisterParameters = z
  .strictObject({
    format: format(['pdf', 'csv'] as const),
    days: days('the window the change of each score is measured over'),
    min_band: z.enum(RISK_BAND).default('low').describe('only agents in this band or above (default low: every scored agent)'),
  })
  .describe('risk_register parameters');

export const governanceReadinessParameters = z
  .strictObject({
    format: format(['pdf', 'csv'] as const),
    framework: z.enum(FRAMEWORK_KEYS).optional().describe('only this framework, by its key (GET /governance/frameworks); default: every framework'),
    // GET /governance/frameworks' own default, so that the report and the operation agree unless asked otherwise.
    days: days('the evidence window a control is judged on (evidence older than this does not count)', DEFAULT_WINDOW_DAYS),
  })
  .describe('governance_readiness parameters');

export const evidenceBundleParameters = z
  .strictObject({
    format: format(['tar.gz'] as const),
    since: timestamp.optional().describe(`start of the window, inclusive (default: ${DEFAULT_BUNDLE_DAYS} days before until)`),
    until: timestamp.optional().describe('end of the window, exclusive (default: when the report is created); not in the future'),
  })
  .superRefine((p, ctx) => {
    if (!p.since || !p.until) return;
    const span = Date.parse(p.until) - Date.parse(p.since);
    if (span <= 0) ctx.addIssue({ code: 'custom', path: ['until'], message: 'until must be later than since' });
    else if (span > MAX_BUNDLE_DAYS * 86_400_000) ctx.addIssue({ code: 'custom', path: ['until'], message: `the window may span at most ${MAX_BUNDLE_DAYS} days` });
  })
  .describe('evidence_bundle parameters');

export type ExecutiveSummaryParameters = z.output<typeof executiveSummaryParameters>;
export type AgentInventoryParameters = z.output<typeof agentInventoryParameters>;
export type RiskRegisterParameters = z.output<typeof riskRegisterParameters>;
export type GovernanceReadinessParameters = z.output<typeof governanceReadinessParameters>;
export type EvidenceBundleParameters = z.output<typeof evidenceBundleParameters>;

/** Each kind's parameter schema, as the catalogue (kinds.ts) and the job read them. */
export const PARAMETERS = {
  executive_summary: executiveSummaryParameters,
  agent_inventory: agentInventoryParameters,
  risk_register: riskRegisterParameters,
  governance_readiness: governanceReadinessParameters,
  evidence_bundle: evidenceBundleParameters,
} as const satisfies Record<ReportKind, z.ZodType>;

// prefault: an absent `parameters` is parsed as {}, so the kind's defaults fill it in.
const parametersOf = (kind: ReportKind) => `the parameters of ${kind} (GET /reports/kinds)`;

/** POST /reports: a kind and its parameters, checked against that kind's schema. */
export const reportIn = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('executive_summary'), parameters: executiveSummaryParameters.prefault({}).describe(parametersOf('executive_summary')) }),
    z.object({ kind: z.literal('agent_inventory'), parameters: agentInventoryParameters.prefault({}).describe(parametersOf('agent_inventory')) }),
    z.object({ kind: z.literal('risk_register'), parameters: riskRegisterParameters.prefault({}).describe(parametersOf('risk_register')) }),
    z.object({ kind: z.literal('governance_readiness'), parameters: governanceReadinessParameters.prefault({}).describe(parametersOf('governance_readiness')) }),
    z.object({ kind: z.literal('evidence_bundle'), parameters: evidenceBundleParameters.prefault({}).describe(parametersOf('evidence_bundle')) }),
  ])
  .describe('what to report on: `kind` (required) and `parameters`, whose keys depend on the kind');
export type ReportIn = z.output<typeof reportIn>;

export const reportParams = z.object({ report_id: z.uuid() });

export const reportOut = z.object({
  id: z.uuid(),
  kind: z.enum(REPORT_KIND),
  parameters: z.record(z.string(), z.unknown()).describe('the parameters as the report is built with them, defaults filled in'),
  format: z.enum(REPORT_FORMAT),
  status: z.enum(REPORT_STATUS),
  content_type: z.string().nullable().describe('the file\'s media type, once ready'),
  file_name: z.string().nullable().describe('the file\'s name, once ready: <kind>-<organisation slug>-<yyyymmdd-hhmm>.<ext>'),
  size: z.number().int().nullable().describe('the file\'s size in bytes, once ready'),
  error: z.string().nullable().describe('why it failed, for people; null unless failed'),
  created_by: z.uuid().nullable().describe('the person or service account who asked for it'),
  created_at: timestamp,
  started_at: timestamp.nullable().describe('when the worker first took it up'),
  completed_at: timestamp.nullable().describe('when it became ready or failed'),
});
export type ReportOut = z.infer<typeof reportOut>;

export const reportKindOut = z.object({
  kind: z.enum(REPORT_KIND),
  title: z.string(),
  description: z.string(),
  contents: z.array(z.string()).describe('what the report holds, section by section'),
  formats: z.array(z.enum(REPORT_FORMAT)).describe('the files it comes as; the first is the default'),
  parameters: z.record(z.string(), z.unknown()).describe('JSON Schema of its parameters (an object; every key optional, with its default)'),
});
export type ReportKindOut = z.infer<typeof reportKindOut>;

export const reportKindsOut = z.object({ items: z.array(reportKindOut) });
