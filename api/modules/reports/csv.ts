/**
 * CSV as RFC 4180 describes it and as spreadsheets open it: UTF-8 with a byte-order mark (without it some
 * spreadsheets read UTF-8 as a legacy code page), a header row, CRLF after every record, and a field quoted
 * (its quotes doubled) when it holds a comma, a quote, a CR or an LF.
 *
 * Report cells come from the registry and from discovered systems, so a cell a spreadsheet would run as a
 * formula, one starting with `=`, `+`, `-`, `@`, a tab or a carriage return, gets a leading apostrophe, which
 * makes it text (OWASP, "CSV injection"). The guard looks at the text only, so a negative number (a fall in
 * score) is written `'-4` too: a spreadsheet shows it as the text -4, which a register can live with, rather
 * than leaving a door open for cells that merely look like numbers.
 */

const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]/;

/** The byte-order mark that starts every file. */
export const BOM = '\uFEFF';

/** A cell: null and undefined are empty, arrays are joined with "; ", objects are JSON, the rest as text. */
export function csvField(value: unknown): string {
  let text: string;
  if (value === null || value === undefined) text = '';
  else if (Array.isArray(value)) text = value.map((v) => (v === null || v === undefined ? '' : String(v))).join('; ');
  else if (value instanceof Date) text = value.toISOString();
  else if (typeof value === 'object') text = JSON.stringify(value);
  else text = String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A whole file: the header row, then one record per row, every record ended by CRLF. */
export function toCsv(header: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const records = [header, ...rows].map((r) => `${r.map(csvField).join(',')}\r\n`);
  return `${BOM}${records.join('')}`;
}

/**
 * Reads CSV written by `toCsv` (and any RFC 4180 text) back into rows: for tests and for whoever checks a
 * download. The byte-order mark is dropped; quoted fields may hold commas, quotes and line breaks.
 */
export function parseCsv(text: string): string[][] {
  const s = text.startsWith(BOM) ? text.slice(1) : text;
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let i = 0;
  let quoted = false;
  while (i < s.length) {
    const c = s[i]!;
    if (quoted) {
      if (c === '"' && s[i + 1] === '"') {
        field += '"';
        i += 2;
      } else if (c === '"') {
        quoted = false;
        i += 1;
      } else {
        field += c;
        i += 1;
      }
    } else if (c === '"') {
      quoted = true;
      i += 1;
    } else if (c === ',') {
      row.push(field);
      field = '';
      i += 1;
    } else if (c === '\r' && s[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i += 2;
    } else {
      field += c;
      i += 1;
    }
  }
  if (field !== '' || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows;
}
