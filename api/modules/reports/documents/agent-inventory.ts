import { inScope } from '../../../db/database.js';
import { toCsv } from '../csv.js';
import { barChart } from '../pdf/charts.js';
import { ReportPdf } from '../pdf/document.js';
import { table } from '../pdf/table.js';
import { COLOUR, levelColour } from '../pdf/theme.js';
import { inventoryRows, type InventoryRow } from '../reports.repository.js';
import type { AgentInventoryParameters } from '../reports.schemas.js';
import { day, plural, type GenerateContext, type ReportFile } from './common.js';

/** The CSV's columns, one row per agent. */
export const INVENTORY_COLUMNS = [
  'agent_id',
  'name',
  'slug',
  'environment',
  'status',
  'criticality',
  'data_classification',
  'owners',
  'risk_band',
  'risk_score',
  'gateway_enforced',
  'gateway_access',
  'tools_granted_count',
  'tools_granted',
  'source',
  'last_seen_at',
  'created_at',
] as const;

const owner = (o: InventoryRow['owners'][number]) => `${o.name} <${o.email}> (${o.owner_type})`;

export function inventoryCsv(rows: readonly InventoryRow[]): string {
  return toCsv(
    INVENTORY_COLUMNS,
    rows.map((a) => [
      a.id,
      a.name,
      a.slug,
      a.environment,
      a.status,
      a.criticality,
      a.data_classification,
      a.owners.map(owner),
      a.risk_band ?? 'unscored',
      a.score,
      a.gateway_enforced,
      a.gateway_access,
      a.tools.length,
      a.tools,
      a.source,
      a.last_seen_at,
      a.created_at,
    ]),
  );
}

export function renderInventoryPdf(ctx: Pick<GenerateContext, 'organisation' | 'generatedAt'>, p: AgentInventoryParameters, rows: readonly InventoryRow[]): Promise<Buffer> {
  const pdf = new ReportPdf({
    title: 'Agent inventory',
    description:
      'Every AI agent the organisation has registered or discovered: where it runs, its state, who owns it, its risk ' +
      'band, whether its tool calls go through the gateway, and the tools it is granted.',
    organisation: ctx.organisation.name,
    generatedAt: ctx.generatedAt,
    layout: 'landscape',
    details: [
      ['Environment', p.environment ?? 'every environment'],
      ['Revoked agents', p.include_revoked ? 'listed' : 'left out'],
    ],
  });
  const count = (f: (a: InventoryRow) => boolean) => rows.filter(f).length;

  pdf.heading('Summary');
  pdf.facts(
    [
      { label: 'Agents', value: rows.length, note: `${count((a) => a.status === 'active')} active, ${count((a) => a.status === 'suspended')} suspended, ${count((a) => a.status === 'revoked')} revoked` },
      { label: 'In production', value: count((a) => a.environment === 'production'), note: `${count((a) => a.environment === 'staging')} staging, ${count((a) => a.environment === 'development')} development` },
      { label: 'Without an owner', value: count((a) => a.owners.length === 0), colour: count((a) => a.owners.length === 0) > 0 ? levelColour('high') : undefined },
      { label: 'Gateway not enforced', value: count((a) => !a.gateway_enforced), note: 'tool calls may bypass the gateway', colour: count((a) => !a.gateway_enforced) > 0 ? levelColour('medium') : undefined },
      { label: 'High or critical risk', value: count((a) => a.risk_band === 'high' || a.risk_band === 'critical') },
      { label: 'Not scored yet', value: count((a) => !a.risk_band) },
      { label: 'Tools granted', value: rows.reduce((n, a) => n + a.tools.length, 0), note: 'grants, summed over the agents' },
      { label: 'Discovered', value: count((a) => a.source === 'discovery'), note: 'found by a connector rather than registered' },
    ],
    4,
  );
  const bands = ['low', 'medium', 'high', 'critical', 'unscored'] as const;
  barChart(pdf, {
    title: 'Agents by risk band',
    bars: bands.map((b) => ({ label: b, value: count((a) => (a.risk_band ?? 'unscored') === b), colour: levelColour(b) })),
    height: 110,
    empty: 'No agents match.',
  });

  pdf.heading('Agents');
  pdf.note(
    `Tools granted: tools the agent holds a live permission binding for, directly or through the binding of its MCP server. ` +
      `Risk: the band and score of its latest risk score. Listed ${day(ctx.generatedAt)}, by name.`,
  );
  table(
    pdf,
    [
      { header: 'Agent', weight: 2.6 },
      { header: 'Environment', weight: 1.2 },
      { header: 'Status', weight: 1 },
      { header: 'Owners', weight: 3 },
      { header: 'Risk', weight: 1.1 },
      { header: 'Gateway enforced', weight: 1 },
      { header: 'Tools granted', weight: 4.2 },
    ],
    rows.map((a) => [
      { text: `${a.name}\n${a.slug}`, bold: false },
      a.environment,
      { text: a.status, colour: a.status === 'active' ? COLOUR.ink : levelColour('high') },
      a.owners.length > 0 ? a.owners.map((o) => `${o.name} (${o.owner_type})`).join('\n') : { text: 'none', colour: levelColour('high') },
      a.risk_band ? { text: `${a.risk_band}${a.score !== null ? ` (${a.score})` : ''}`, colour: levelColour(a.risk_band), bold: true } : { text: 'unscored', colour: COLOUR.muted },
      a.gateway_enforced ? 'yes' : { text: 'no', colour: levelColour('medium'), bold: true },
      a.tools.length > 0 ? `${plural(a.tools.length, 'tool')}: ${a.tools.join(', ')}` : { text: 'none', colour: COLOUR.muted },
    ]),
    { empty: 'No agents match.' },
  );
  return pdf.finish();
}

export async function agentInventory(ctx: GenerateContext, p: AgentInventoryParameters): Promise<ReportFile> {
  const rows = await inScope(ctx.db, { orgId: ctx.orgId }, (tx) =>
    inventoryRows(tx, ctx.orgId, ctx.generatedAt, { environment: p.environment, includeRevoked: p.include_revoked }),
  );
  if (p.format === 'csv') return { bytes: Buffer.from(inventoryCsv(rows), 'utf8'), format: 'csv' };
  return { bytes: await renderInventoryPdf(ctx, p, rows), format: 'pdf' };
}
