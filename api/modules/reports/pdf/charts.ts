import type { ReportPdf } from './document.js';
import { COLOUR, FONT, SIZE } from './theme.js';
import { oneLine, pdfText } from './text.js';

/**
 * Charts drawn with pdfkit's vector primitives (rectangles, lines, circles): stacked bars over days, plain bars,
 * a line over days and horizontal percentage bars. Each starts with a title, keeps its whole height on one page,
 * and says so in words when it has nothing to show rather than drawing empty axes.
 */

export interface Series {
  name: string;
  colour: string;
  values: readonly number[];
}

interface Plot {
  x: number;
  y: number;
  w: number;
  h: number;
}

const AXIS_LABEL_WIDTH = 34;
const X_LABEL_HEIGHT = 14;
const LEGEND_HEIGHT = 16;

/** A round upper bound for an axis and its step: 0, 5, 10 ... or 0, 20, 40 ... (integers, at least 1). */
export function niceScale(max: number, ticks = 4): { max: number; step: number } {
  if (!(max > 0)) return { max: ticks, step: 1 };
  const rough = max / ticks;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = Math.max(1, [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power);
  return { max: Math.ceil(max / step) * step, step };
}

const short = (n: number) => (n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(Math.round(n * 100) / 100));

/** The title, and the plot area below it, on one page; `headroom` above the plot for values written over bars. */
function frame(pdf: ReportPdf, title: string, height: number, legend: boolean, headroom = 6): Plot {
  pdf.ensure(height + 16 + headroom + X_LABEL_HEIGHT + (legend ? LEGEND_HEIGHT : 0) + 8);
  pdf.style(FONT.bold, SIZE.h2).text(pdfText(title), pdf.left, pdf.y, { width: pdf.width });
  const top = pdf.y + headroom;
  return { x: pdf.left + AXIS_LABEL_WIDTH, y: top, w: pdf.width - AXIS_LABEL_WIDTH - 4, h: height };
}

/** Horizontal grid lines with their values on the left. */
function yAxis(pdf: ReportPdf, p: Plot, scale: { max: number; step: number }, suffix = ''): void {
  const { doc } = pdf;
  for (let v = 0; v <= scale.max + 1e-9; v += scale.step) {
    const y = p.y + p.h - (v / scale.max) * p.h;
    doc.moveTo(p.x, y).lineTo(p.x + p.w, y).lineWidth(v === 0 ? 0.8 : 0.3).strokeColor(v === 0 ? COLOUR.muted : COLOUR.rule).stroke();
    pdf.style(FONT.regular, SIZE.small, COLOUR.muted).text(`${short(v)}${suffix}`, pdf.left, y - 3.5, { width: AXIS_LABEL_WIDTH - 5, align: 'right', lineBreak: false });
  }
}

/** Labels under the x axis, thinned so that they never overlap; the last (today) is always labelled. */
function xLabels(pdf: ReportPdf, p: Plot, labels: readonly string[], centreOf: (i: number) => number): void {
  const every = Math.max(1, Math.ceil(labels.length / Math.max(1, Math.floor(p.w / 48))));
  labels.forEach((label, i) => {
    if ((labels.length - 1 - i) % every !== 0) return;
    pdf.style(FONT.regular, SIZE.small, COLOUR.muted).text(pdfText(label), centreOf(i) - 24, p.y + p.h + 3, { width: 48, align: 'center', lineBreak: false });
  });
}

function legend(pdf: ReportPdf, y: number, entries: ReadonlyArray<{ name: string; colour: string }>): void {
  let x = pdf.left + AXIS_LABEL_WIDTH;
  for (const e of entries) {
    pdf.doc.rect(x, y + 1.5, 8, 8).fillColor(e.colour).fill();
    const text = pdfText(e.name);
    pdf.style(FONT.regular, SIZE.small + 0.5, COLOUR.ink).text(text, x + 12, y + 2, { lineBreak: false });
    x += 12 + pdf.doc.widthOfString(text) + 16;
  }
}

function nothing(pdf: ReportPdf, p: Plot, message: string): void {
  pdf.doc.rect(p.x, p.y, p.w, p.h).lineWidth(0.5).strokeColor(COLOUR.rule).stroke();
  pdf.style(FONT.italic, SIZE.body, COLOUR.muted).text(pdfText(message), p.x, p.y + p.h / 2 - 5, { width: p.w, align: 'center', lineBreak: false });
}

/** Bars per label, each stacked from the series' values (decisions per day by outcome). */
export function stackedBarChart(
  pdf: ReportPdf,
  c: { title: string; labels: readonly string[]; series: readonly Series[]; height?: number; empty: string },
): void {
  const p = frame(pdf, c.title, c.height ?? 150, true);
  const totals = c.labels.map((_, i) => c.series.reduce((a, s) => a + (s.values[i] ?? 0), 0));
  const max = Math.max(0, ...totals);
  if (max === 0) {
    nothing(pdf, p, c.empty);
  } else {
    const scale = niceScale(max);
    yAxis(pdf, p, scale);
    const slot = p.w / c.labels.length;
    const barW = Math.max(0.8, Math.min(28, slot * 0.72));
    c.labels.forEach((_, i) => {
      let base = p.y + p.h;
      for (const s of c.series) {
        const v = s.values[i] ?? 0;
        if (v <= 0) continue;
        const h = (v / scale.max) * p.h;
        pdf.doc.rect(p.x + i * slot + (slot - barW) / 2, base - h, barW, h).fillColor(s.colour).fill();
        base -= h;
      }
    });
    xLabels(pdf, p, c.labels, (i) => p.x + i * slot + slot / 2);
  }
  const legendY = p.y + p.h + X_LABEL_HEIGHT + 2;
  legend(pdf, legendY, c.series.map((s) => ({ name: `${s.name} (${s.values.reduce((a, v) => a + v, 0)})`, colour: s.colour })));
  pdf.y = legendY + LEGEND_HEIGHT + 8;
}

/** One bar per item with its value above it (agents per risk band). */
export function barChart(
  pdf: ReportPdf,
  c: { title: string; bars: ReadonlyArray<{ label: string; value: number; colour: string }>; height?: number; empty: string },
): void {
  const p = frame(pdf, c.title, c.height ?? 130, false, 16);
  const max = Math.max(0, ...c.bars.map((b) => b.value));
  if (max === 0) {
    nothing(pdf, p, c.empty);
  } else {
    const scale = niceScale(max);
    yAxis(pdf, p, scale);
    const slot = p.w / c.bars.length;
    const barW = Math.min(70, slot * 0.6);
    c.bars.forEach((b, i) => {
      const h = (b.value / scale.max) * p.h;
      const x = p.x + i * slot + (slot - barW) / 2;
      pdf.doc.rect(x, p.y + p.h - h, barW, h).fillColor(b.colour).fill();
      pdf.style(FONT.bold, SIZE.small + 0.5).text(String(b.value), x - 10, p.y + p.h - h - 10, { width: barW + 20, align: 'center', lineBreak: false });
    });
    xLabels(pdf, p, c.bars.map((b) => b.label), (i) => p.x + i * slot + slot / 2);
  }
  pdf.y = p.y + p.h + X_LABEL_HEIGHT + 10;
}

/** A line over the labels; null values leave a gap (days without a score). */
export function lineChart(
  pdf: ReportPdf,
  c: { title: string; labels: readonly string[]; values: ReadonlyArray<number | null>; yMax?: number; colour: string; height?: number; empty: string; seriesName: string },
): void {
  const p = frame(pdf, c.title, c.height ?? 120, true);
  const present = c.values.filter((v): v is number => v !== null);
  if (present.length === 0) {
    nothing(pdf, p, c.empty);
  } else {
    const scale = c.yMax ? { max: c.yMax, step: c.yMax / 4 } : niceScale(Math.max(...present));
    yAxis(pdf, p, scale);
    const slot = p.w / c.labels.length;
    const at = (i: number, v: number) => [p.x + i * slot + slot / 2, p.y + p.h - (Math.min(v, scale.max) / scale.max) * p.h] as const;
    let drawing = false;
    c.values.forEach((v, i) => {
      if (v === null) {
        drawing = false;
        return;
      }
      const [x, y] = at(i, v);
      if (drawing) pdf.doc.lineTo(x, y);
      else pdf.doc.moveTo(x, y);
      drawing = true;
    });
    pdf.doc.lineWidth(1.6).strokeColor(c.colour).stroke();
    if (c.labels.length <= 62) {
      c.values.forEach((v, i) => {
        if (v === null) return;
        const [x, y] = at(i, v);
        pdf.doc.circle(x, y, 2).fillColor(c.colour).fill();
      });
    }
    xLabels(pdf, p, c.labels, (i) => p.x + i * slot + slot / 2);
  }
  const legendY = p.y + p.h + X_LABEL_HEIGHT + 2;
  legend(pdf, legendY, [{ name: c.seriesName, colour: c.colour }]);
  pdf.y = legendY + LEGEND_HEIGHT + 8;
}

/** One horizontal bar per item on a 0-100 % scale, its label on the left and its text on the right (coverage). */
export function percentBars(
  pdf: ReportPdf,
  c: { title: string; items: ReadonlyArray<{ label: string; percent: number; colour: string; text: string }>; empty: string },
): void {
  const rowH = 18;
  const labelW = pdf.width * 0.36;
  const textW = 120;
  const h = Math.max(rowH, c.items.length * rowH);
  pdf.ensure(Math.min(h, pdf.pageBody - 40) + 30);
  pdf.style(FONT.bold, SIZE.h2).text(pdfText(c.title), pdf.left, pdf.y, { width: pdf.width });
  pdf.space(6);
  if (c.items.length === 0) {
    pdf.style(FONT.italic, SIZE.body, COLOUR.muted).text(pdfText(c.empty), pdf.left, pdf.y, { width: pdf.width });
    pdf.space(14);
    return;
  }
  const barX = pdf.left + labelW + 6;
  const barW = pdf.width - labelW - textW - 12;
  for (const item of c.items) {
    pdf.ensure(rowH);
    const y = pdf.y;
    pdf.style(FONT.regular, SIZE.table + 0.5);
    pdf.doc.text(oneLine(pdf.doc, pdfText(item.label), labelW), pdf.left, y + 4, { lineBreak: false });
    pdf.doc.rect(barX, y + 3, barW, rowH - 7).fillColor(COLOUR.faint).fill();
    const w = (Math.max(0, Math.min(100, item.percent)) / 100) * barW;
    if (w > 0) pdf.doc.rect(barX, y + 3, w, rowH - 7).fillColor(item.colour).fill();
    pdf.style(FONT.bold, SIZE.table + 0.5, item.colour);
    pdf.doc.text(oneLine(pdf.doc, pdfText(item.text), textW), barX + barW + 6, y + 4, { lineBreak: false });
    pdf.y = y + rowH;
  }
  pdf.space(8);
}
