import PDFDocument from 'pdfkit';
import { utcMinute } from '../documents/common.js';
import { COLOUR, FONT, SIZE } from './theme.js';
import { oneLine, pdfLines, pdfText } from './text.js';

/** What every report says about itself: on its title page, in its running header and footer, in its metadata. */
export interface PdfMeta {
  title: string;
  description: string;
  organisation: string;
  generatedAt: Date;
  /** What the report was asked for, label and value, listed on the title page (the window, a filter). */
  details: ReadonlyArray<readonly [string, string]>;
  /** Wide tables read better across the page. */
  layout?: 'portrait' | 'landscape';
}

/** A key number on a tile: the number, what it counts, and a line under it. */
export interface Fact {
  label: string;
  value: string | number;
  note?: string;
  colour?: string;
}

const MARGINS = { top: 58, bottom: 52, left: 46, right: 46 };
/** Where the running header and the footer sit, inside the top and bottom margins. */
const HEADER_Y = 26;
const FOOTER_GAP = 20;

/**
 * A report as a PDF laid out by hand on pdfkit's vector primitives: a title page with the contents, headings,
 * paragraphs, key-number tiles (tables and charts are in their own files and draw through this), and on every
 * page the organisation's name, the generation time and "Page n of m". Pages are buffered so that the page
 * count and the contents' page numbers are written once the last page exists.
 *
 * Positions are managed here, not by pdfkit's flowing text: everything that is drawn first asks `ensure` for
 * its height, and moves on to a new page when the current one has no room, so nothing is ever cut at a
 * page's foot.
 */
export class ReportPdf {
  readonly doc: PDFKit.PDFDocument;
  private readonly file: Promise<Buffer>;
  private readonly contents: Array<{ title: string; page: number }> = [];
  private contentsY = 0;

  constructor(readonly meta: PdfMeta) {
    this.doc = new PDFDocument({
      size: 'A4',
      layout: meta.layout ?? 'portrait',
      margins: MARGINS,
      bufferPages: true,
      autoFirstPage: false,
      info: {
        Title: pdfText(`${meta.title}: ${meta.organisation}`),
        Author: 'Tollgate',
        Subject: pdfText(meta.description),
        Creator: 'Tollgate',
        CreationDate: meta.generatedAt,
      },
    });
    const chunks: Buffer[] = [];
    this.file = new Promise((resolve, reject) => {
      this.doc.on('data', (c: Buffer) => chunks.push(c));
      this.doc.on('end', () => resolve(Buffer.concat(chunks)));
      this.doc.on('error', reject);
    });
    this.titlePage();
    this.newPage();
  }

  get left(): number {
    return MARGINS.left;
  }
  get width(): number {
    return this.doc.page.width - MARGINS.left - MARGINS.right;
  }
  get right(): number {
    return this.left + this.width;
  }
  get top(): number {
    return MARGINS.top;
  }
  get bottom(): number {
    return this.doc.page.height - MARGINS.bottom;
  }
  get y(): number {
    return this.doc.y;
  }
  set y(value: number) {
    this.doc.y = value;
  }
  /** The height a page offers below its running header. */
  get pageBody(): number {
    return this.bottom - this.top;
  }

  newPage(): void {
    this.doc.addPage();
    this.doc.x = this.left;
    this.doc.y = this.top;
  }

  /** Moves on to a new page unless `height` fits on this one below the current position. */
  ensure(height: number): void {
    if (this.y + height > this.bottom) this.newPage();
  }

  space(points: number): void {
    this.y = Math.min(this.y + points, this.bottom);
  }

  /** One line of text at (x, y), cut with an ellipsis to `width`: for tiles, headers and footers, which never wrap. */
  line(text: string, x: number, y: number, width: number, font: string, size: number, colour: string = COLOUR.ink): void {
    this.style(font, size, colour);
    this.doc.text(oneLine(this.doc, text, width), x, y, { lineBreak: false });
  }

  /** Sets font, size and colour in one call. */
  style(font: string, size: number, colour: string = COLOUR.ink): PDFKit.PDFDocument {
    return this.doc.font(font).fontSize(size).fillColor(colour);
  }

  /** A section: listed in the contents with its page; starts a new page when less than a few lines are left. */
  heading(title: string): void {
    this.ensure(90);
    if (this.y > this.top) this.space(6);
    this.contents.push({ title, page: this.doc.bufferedPageRange().count });
    this.style(FONT.bold, SIZE.h1, COLOUR.accent).text(pdfText(title), this.left, this.y, { width: this.width });
    const ruleY = this.y + 2;
    this.doc.moveTo(this.left, ruleY).lineTo(this.right, ruleY).lineWidth(0.8).strokeColor(COLOUR.accent).stroke();
    this.y = ruleY + 8;
  }

  subheading(title: string): void {
    this.ensure(60);
    this.style(FONT.bold, SIZE.h2).text(pdfText(title), this.left, this.y, { width: this.width });
    this.space(4);
  }

  paragraph(text: string, opts: { colour?: string; size?: number; italic?: boolean } = {}): void {
    const size = opts.size ?? SIZE.body;
    const t = pdfLines(text);
    this.style(opts.italic ? FONT.italic : FONT.regular, size, opts.colour);
    const h = this.doc.heightOfString(t, { width: this.width });
    // A paragraph longer than a page flows on (pdfkit continues it on a new page by itself).
    this.ensure(Math.min(h, this.pageBody));
    this.doc.text(t, this.left, this.y, { width: this.width });
    this.space(6);
  }

  /** Small grey text: what a table or chart means, where its numbers come from. */
  note(text: string): void {
    this.paragraph(text, { colour: COLOUR.muted, size: SIZE.small, italic: true });
  }

  /** Key numbers as tiles, `perRow` to a row. */
  facts(items: readonly Fact[], perRow = 4): void {
    const gap = 8;
    const w = (this.width - gap * (perRow - 1)) / perRow;
    const h = 50;
    for (let i = 0; i < items.length; i += perRow) {
      this.ensure(h + gap);
      const y = this.y;
      items.slice(i, i + perRow).forEach((f, j) => {
        const x = this.left + j * (w + gap);
        this.doc.roundedRect(x, y, w, h, 3).fillColor(COLOUR.faint).fill();
        this.doc.rect(x, y, 3, h).fillColor(f.colour ?? COLOUR.accent).fill();
        this.line(pdfText(f.value), x + 10, y + 6, w - 14, FONT.bold, 17, f.colour ?? COLOUR.ink);
        this.line(pdfText(f.label), x + 10, y + 27, w - 14, FONT.regular, SIZE.small, COLOUR.ink);
        if (f.note) this.line(pdfText(f.note), x + 10, y + 37, w - 14, FONT.regular, SIZE.small - 0.5, COLOUR.muted);
      });
      this.y = y + h + gap;
    }
    this.space(4);
  }

  /**
   * The first page: the title on a coloured band, the organisation, what the report holds, what it was asked
   * for; the contents are written on it at the end, when every section's page is known.
   */
  private titlePage(): void {
    this.doc.addPage();
    const { doc } = this;
    const full = doc.page.width;
    doc.rect(0, 0, full, 190).fillColor(COLOUR.accent).fill();
    this.style(FONT.bold, 10, '#dbe7f5').text('TOLLGATE  ·  AI AGENT GOVERNANCE', this.left, 58, { width: this.width, characterSpacing: 1.2 });
    this.style(FONT.bold, SIZE.title, '#ffffff').text(pdfText(this.meta.title), this.left, 82, { width: this.width });
    this.style(FONT.regular, SIZE.subtitle + 2, '#ffffff').text(pdfText(this.meta.organisation), this.left, doc.y + 6, { width: this.width });

    this.y = 220;
    this.paragraph(this.meta.description, { size: 10.5 });
    this.space(6);
    const rows: Array<readonly [string, string]> = [['Organisation', this.meta.organisation], ['Generated', utcMinute(this.meta.generatedAt)], ...this.meta.details];
    for (const [label, value] of rows) {
      const y = this.y;
      this.style(FONT.bold, SIZE.body, COLOUR.muted).text(pdfText(label), this.left, y, { width: 120 });
      this.style(FONT.regular, SIZE.body).text(pdfText(value), this.left + 125, y, { width: this.width - 125 });
      this.y = Math.max(this.doc.y, y + 12) + 3;
    }
    this.space(18);
    this.contentsY = this.y;
  }

  /** The contents on the title page: every section with its page number. */
  private writeContents(): void {
    this.doc.switchToPage(0);
    let y = this.contentsY;
    this.style(FONT.bold, SIZE.h2, COLOUR.accent).text('Contents', this.left, y, { width: this.width });
    y = this.doc.y + 4;
    for (const c of this.contents) {
      if (y > this.bottom - 14) break;
      const page = String(c.page);
      this.style(FONT.regular, SIZE.body);
      const pageWidth = this.doc.widthOfString(page);
      this.line(pdfText(c.title), this.left, y, this.width - pageWidth - 30, FONT.regular, SIZE.body);
      this.doc.text(page, this.right - pageWidth, y, { lineBreak: false });
      y += 15;
    }
  }

  /** The running header (every page but the first) and the footer (every page). */
  private stampPages(): void {
    const { count } = this.doc.bufferedPageRange();
    for (let i = 0; i < count; i++) {
      this.doc.switchToPage(i);
      // Writing inside the margins must not make pdfkit open a page of its own.
      const margins = { ...this.doc.page.margins };
      this.doc.page.margins = { top: 0, bottom: 0, left: margins.left, right: margins.right };
      const footerY = this.doc.page.height - MARGINS.bottom + FOOTER_GAP;
      if (i > 0) {
        this.line(pdfText(this.meta.title), this.left, HEADER_Y, this.width / 2 - 10, FONT.bold, SIZE.footer, COLOUR.muted);
        this.style(FONT.regular, SIZE.footer, COLOUR.muted);
        const org = oneLine(this.doc, pdfText(this.meta.organisation), this.width / 2 - 10);
        this.doc.text(org, this.right - this.doc.widthOfString(org), HEADER_Y, { lineBreak: false });
        this.doc.moveTo(this.left, HEADER_Y + 12).lineTo(this.right, HEADER_Y + 12).lineWidth(0.5).strokeColor(COLOUR.rule).stroke();
      }
      this.doc.moveTo(this.left, footerY - 6).lineTo(this.right, footerY - 6).lineWidth(0.5).strokeColor(COLOUR.rule).stroke();
      const left = `${this.meta.organisation}  ·  generated ${utcMinute(this.meta.generatedAt)}`;
      this.line(pdfText(left), this.left, footerY, this.width * 0.75, FONT.regular, SIZE.footer, COLOUR.muted);
      this.style(FONT.bold, SIZE.footer, COLOUR.muted);
      const page = `Page ${i + 1} of ${count}`;
      this.doc.text(page, this.right - this.doc.widthOfString(page), footerY, { lineBreak: false });
      this.doc.page.margins = margins;
    }
  }

  /** Writes the contents and every page's header and footer, and answers the file. */
  async finish(): Promise<Buffer> {
    this.writeContents();
    this.stampPages();
    this.doc.end();
    return this.file;
  }
}
