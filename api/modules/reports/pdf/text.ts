/**
 * Text as the PDF's built-in Helvetica can show it. The standard fonts carry the WinAnsi character set
 * (Latin-1 and a few typographic marks) and nothing else; pdfkit writes any other character as a wrong glyph.
 * So text from the registry is folded first: accents that decompose keep their letter (ő → o), a few letters
 * that do not are spelled out (ł → l), and what is left becomes "?". Control characters become spaces.
 */

/** WinAnsi's characters outside Latin-1 (code points 0x80-0x9F of the encoding). */
const WIN_ANSI_EXTRA = new Set('€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ');

const SPELLED: Record<string, string> = {
  ł: 'l', Ł: 'L', đ: 'd', Đ: 'D', ı: 'i', ħ: 'h', Ħ: 'H', ŀ: 'l', Ŀ: 'L', ŧ: 't', Ŧ: 'T',
  '\u2010': '-', '\u2011': '-', '\u2012': '-', '\u2212': '-', '\u2032': "'", '\u2033': '"', '\u00a0': ' ',
  '\u2009': ' ', '\u202f': ' ', '\u2192': '->', '\u2190': '<-', '\u2264': '<=', '\u2265': '>=', '\u2026': '...',
};

const shown = (c: string) => {
  const cp = c.codePointAt(0)!;
  return (cp >= 0x20 && cp <= 0x7e) || (cp >= 0xa0 && cp <= 0xff) || WIN_ANSI_EXTRA.has(c);
};

/** One line of text (line breaks become spaces). */
export function pdfText(value: unknown): string {
  return pdfLines(value).replace(/\n/g, ' ');
}

/** Text that may keep its line breaks (paragraphs, notes). */
export function pdfLines(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = String(value);
  let out = '';
  for (const c of text) {
    if (c === '\n') out += '\n';
    else if (c === '\r') continue;
    else if (shown(c) && c !== '\u00a0') out += c;
    else if (SPELLED[c] !== undefined) out += SPELLED[c];
    else if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(c)) out += ' ';
    else {
      const folded = c.normalize('NFKD').replace(/\p{M}/gu, '');
      out += [...folded].every(shown) && folded.length > 0 ? folded : '?';
    }
  }
  return out;
}

/** At most `max` characters, with an ellipsis when cut. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1)).trimEnd()}…`;
}

/** The text cut (with an ellipsis) to what fits `width` points on one line in the document's current font and size. */
export function oneLine(doc: PDFKit.PDFDocument, text: string, width: number): string {
  if (doc.widthOfString(text) <= width) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (doc.widthOfString(`${text.slice(0, mid).trimEnd()}…`) <= width) lo = mid;
    else hi = mid - 1;
  }
  return `${text.slice(0, lo).trimEnd()}…`;
}
