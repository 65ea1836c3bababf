import type { ReportPdf } from './document.js';
import { COLOUR, FONT, SIZE } from './theme.js';
import { clip, pdfLines, pdfText } from './text.js';

export interface Column {
  header: string;
  /** Share of the table's width, against the other columns' weights. */
  weight: number;
  align?: 'left' | 'right' | 'center';
}

/** A cell: its text, or its text with a colour (a band, a severity) and weight. */
export type Cell = string | number | null | undefined | { text: string | number; colour?: string; bold?: boolean };

export interface TableOptions {
  /** Shown in one row when there are no rows. */
  empty?: string;
  fontSize?: number;
  /** A cell longer than this is cut with an ellipsis (a row stays well under a page). */
  maxCellChars?: number;
}

const PAD = 3.5;

const textOf = (c: Cell) => pdfLines(c !== null && typeof c === 'object' ? c.text : c ?? '');

/**
 * A table that breaks across pages: rows are measured before they are drawn, a row that does not fit goes to the
 * next page, and every page the table reaches starts with its header row again. Rows alternate their shade; a
 * cell may carry a colour. A row is never taller than half a page (text beyond is cut with an ellipsis).
 */
export function table(pdf: ReportPdf, columns: readonly Column[], rows: readonly (readonly Cell[])[], opts: TableOptions = {}): void {
  const { doc } = pdf;
  const size = opts.fontSize ?? SIZE.table;
  const maxChars = opts.maxCellChars ?? 600;
  const total = columns.reduce((a, c) => a + c.weight, 0);
  const widths = columns.map((c) => (pdf.width * c.weight) / total);
  const xs = widths.map((_, i) => pdf.left + widths.slice(0, i).reduce((a, w) => a + w, 0));
  const maxRow = pdf.pageBody / 2;

  const measure = (text: string, width: number, bold = false) => {
    doc.font(bold ? FONT.bold : FONT.regular).fontSize(size);
    return doc.heightOfString(text || ' ', { width: width - 2 * PAD });
  };
  const headers = columns.map((c) => pdfText(c.header));
  const headerHeight = Math.max(...headers.map((h, i) => measure(h, widths[i]!, true))) + 2 * PAD;

  const drawHeader = () => {
    const y = pdf.y;
    doc.rect(pdf.left, y, pdf.width, headerHeight).fillColor(COLOUR.header).fill();
    headers.forEach((h, i) => {
      pdf.style(FONT.bold, size).text(h, xs[i]! + PAD, y + PAD, { width: widths[i]! - 2 * PAD, align: columns[i]!.align ?? 'left' });
    });
    pdf.y = y + headerHeight;
  };

  const prepared = rows.map((r) => {
    const cells = columns.map((_, i) => clip(textOf(r[i]), maxChars));
    const height = Math.min(maxRow, Math.max(...cells.map((t, i) => measure(t, widths[i]!, isBold(r[i])))) + 2 * PAD);
    return { raw: r, cells, height };
  });

  pdf.ensure(headerHeight + (prepared[0]?.height ?? 18));
  drawHeader();
  if (prepared.length === 0) {
    pdf.style(FONT.italic, size, COLOUR.muted).text(pdfText(opts.empty ?? 'None.'), pdf.left + PAD, pdf.y + PAD, { width: pdf.width - 2 * PAD });
    pdf.y = pdf.y + 2 * PAD + 2;
  }
  prepared.forEach((row, n) => {
    if (pdf.y + row.height > pdf.bottom) {
      pdf.newPage();
      drawHeader();
    }
    const y = pdf.y;
    if (n % 2 === 1) doc.rect(pdf.left, y, pdf.width, row.height).fillColor(COLOUR.faint).fill();
    row.cells.forEach((text, i) => {
      const cell = row.raw[i];
      const colour = cell !== null && typeof cell === 'object' ? cell.colour : undefined;
      pdf.style(isBold(cell) ? FONT.bold : FONT.regular, size, colour ?? COLOUR.ink).text(text, xs[i]! + PAD, y + PAD, {
        width: widths[i]! - 2 * PAD,
        height: row.height - 2 * PAD,
        ellipsis: true,
        align: columns[i]!.align ?? 'left',
      });
    });
    doc.moveTo(pdf.left, y + row.height).lineTo(pdf.right, y + row.height).lineWidth(0.3).strokeColor(COLOUR.rule).stroke();
    pdf.y = y + row.height;
  });
  pdf.space(10);
}

function isBold(c: Cell): boolean {
  return c !== null && typeof c === 'object' && c.bold === true;
}
