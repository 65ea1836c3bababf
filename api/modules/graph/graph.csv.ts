import type { GraphEdgeOut, GraphNodeOut } from './graph.schemas.js';

/**
 * The graph as CSV a spreadsheet opens: UTF-8 with a byte-order mark (without it some spreadsheets read UTF-8 as
 * a legacy code page), a header row, CRLF line ends and RFC 4180 quoting. A cell a spreadsheet would run as a
 * formula (starting with = + - @, or a tab or carriage return) is prefixed with an apostrophe, which makes it
 * text (OWASP, "CSV injection"): labels and keys come from the registry and from discovered systems.
 */

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(header: string[], rows: unknown[][]): string {
  const lines = [header.map(csvCell).join(','), ...rows.map((r) => r.map(csvCell).join(','))];
  return `\uFEFF${lines.join('\r\n')}\r\n`;
}

export const NODE_COLUMNS = ['id', 'kind', 'key', 'label', 'risk_level', 'source_table', 'source_id', 'valid_from', 'valid_to', 'attributes'];

export function nodesCsv(nodes: GraphNodeOut[]): string {
  return toCsv(
    NODE_COLUMNS,
    nodes.map((n) => [n.id, n.kind, n.key, n.label, n.risk_level, n.source_record.table, n.source_record.id, n.valid_from, n.valid_to, n.attributes]),
  );
}

export const EDGE_COLUMNS = [
  'id', 'kind', 'from', 'from_kind', 'from_label', 'to', 'to_kind', 'to_label', 'source_table', 'source_id', 'expires_at', 'valid_from', 'valid_to', 'attributes',
];

export function edgesCsv(edges: GraphEdgeOut[], nodeOf: (id: string) => GraphNodeOut | undefined): string {
  return toCsv(
    EDGE_COLUMNS,
    edges.map((e) => {
      const [from, to] = [nodeOf(e.from), nodeOf(e.to)];
      return [e.id, e.kind, e.from, from?.kind, from?.label, e.to, to?.kind, to?.label, e.source_record.table, e.source_record.id, e.expires_at, e.valid_from, e.valid_to, e.attributes];
    }),
  );
}
