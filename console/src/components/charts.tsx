import { useId, useLayoutEffect, useRef, useState, type ReactNode, type RefObject } from 'react';

/**
 * Small charts drawn as SVG, with no chart library: a column chart (stacked series over categories, such
 * as decisions per day), a bar chart (labelled values, such as deny reasons) and a line chart (series over
 * categories, such as risk per day or events per hour). Each is a <figure> named by its caption; the
 * picture is one image whose name says what it shows in a sentence, and its text alternative in full is
 * the data table under "Data table", which a person opens with the keyboard like any disclosure. Series
 * differ by more than colour: the legend names them, lines have their own dash and marker, and the
 * table holds every value in words.
 */

/** Fill colours, each at least 3:1 against white (WCAG 1.4.11 for graphics). */
export const CHART_COLOURS = {
  good: '#1b7a3a',
  bad: '#b42318',
  warn: '#a15c00',
  info: '#0b57a4',
  violet: '#6941c6',
  neutral: '#5b6470',
} as const;
export type ChartColour = keyof typeof CHART_COLOURS;

export interface Series {
  label: string;
  values: number[];
  colour: ChartColour;
}

/** Width before the first measure (and where ResizeObserver is missing). */
const FALLBACK_WIDTH = 640;
/** Room one category label needs under the axis, in pixels. */
const LABEL_ROOM = 72;
const PAD = { top: 12, right: 12, bottom: 28, left: 44 };
const DASHES = [undefined, '6 4', '2 3', '10 3 2 3'];
const MARKERS = ['circle', 'square', 'diamond', 'triangle'] as const;

/** A round top for the scale at or above `max`: 1, 2 or 5 times a power of ten (at least 1). */
export function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * p >= max) return m * p;
  return 10 * p;
}

const fmt = (n: number) => (Number.isInteger(n) ? n.toLocaleString() : n.toLocaleString(undefined, { maximumFractionDigits: 2 }));

/** Which category labels fit under the axis (at most `fit`): evenly spaced, always the first and the last. */
function labelled(count: number, fit: number): Set<number> {
  const step = Math.max(1, Math.ceil(count / fit));
  const out = new Set<number>([0, count - 1]);
  // A label too close to the last one would overlap it.
  for (let i = 0; i < count; i += step) if (count - 1 - i >= step) out.add(i);
  return out;
}

/**
 * The width the chart has on the page, in pixels: the picture is drawn at that size rather than scaled,
 * so its text stays the size of the page's text whether the chart spans a card or the whole page.
 */
function useWidth(): [RefObject<HTMLDivElement | null>, number] {
  const ref = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(FALLBACK_WIDTH);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el || typeof ResizeObserver === 'undefined') return;
    const measure = (w: number) => w > 0 && setWidth(Math.max(240, Math.floor(w)));
    measure(el.clientWidth);
    const observer = new ResizeObserver((entries) => measure(entries[0]?.contentRect.width ?? 0));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

function ChartFrame({
  title,
  summary,
  description,
  legend,
  table,
  children,
  height,
  width,
  box,
}: {
  title: string;
  summary: string;
  description?: ReactNode;
  legend?: Series[];
  table: ReactNode;
  children: ReactNode;
  height: number;
  width: number;
  box: RefObject<HTMLDivElement | null>;
}) {
  const captionId = useId();
  return (
    <figure className="chart" aria-labelledby={captionId}>
      <figcaption id={captionId} className="chart-title">
        {title}
      </figcaption>
      {description ? <p className="small muted chart-description">{description}</p> : null}
      <div ref={box} className="chart-box">
        <svg role="img" aria-label={summary} viewBox={`0 0 ${width} ${height}`} width={width} height={height} className="chart-svg">
          {children}
        </svg>
      </div>
      {legend && legend.length > 1 ? (
        <ul className="chart-legend" aria-hidden="true">
          {legend.map((s, i) => (
            <li key={s.label}>
              <svg width="28" height="12" viewBox="0 0 28 12">
                <line x1="1" y1="6" x2="27" y2="6" stroke={CHART_COLOURS[s.colour]} strokeWidth="3" strokeDasharray={DASHES[i % DASHES.length]} />
                <Marker shape={MARKERS[i % MARKERS.length]!} x={14} y={6} colour={CHART_COLOURS[s.colour]} />
              </svg>
              {s.label}
            </li>
          ))}
        </ul>
      ) : null}
      <details className="chart-data">
        <summary>Data table: {title}</summary>
        {table}
      </details>
    </figure>
  );
}

function Marker({ shape, x, y, colour }: { shape: (typeof MARKERS)[number]; x: number; y: number; colour: string }) {
  const r = 3.5;
  if (shape === 'circle') return <circle cx={x} cy={y} r={r} fill={colour} />;
  if (shape === 'square') return <rect x={x - r} y={y - r} width={2 * r} height={2 * r} fill={colour} />;
  if (shape === 'diamond') return <polygon points={`${x},${y - r - 1} ${x + r + 1},${y} ${x},${y + r + 1} ${x - r - 1},${y}`} fill={colour} />;
  return <polygon points={`${x},${y - r - 1} ${x + r + 1},${y + r} ${x - r - 1},${y + r}`} fill={colour} />;
}

/** The table of a chart over categories: one row per category, one column per series. */
function SeriesTable({
  title,
  categoryHeader,
  categories,
  series,
  total,
  format,
}: {
  title: string;
  categoryHeader: string;
  categories: string[];
  series: Series[];
  total: boolean;
  format: (c: string) => string;
}) {
  return (
    <div className="table-wrap">
      <table>
        <caption className="sr-only">{title}</caption>
        <thead>
          <tr>
            <th scope="col">{categoryHeader}</th>
            {series.map((s) => (
              <th key={s.label} scope="col" className="num">
                {s.label}
              </th>
            ))}
            {total && series.length > 1 ? (
              <th scope="col" className="num">
                Total
              </th>
            ) : null}
          </tr>
        </thead>
        <tbody>
          {categories.map((c, i) => (
            <tr key={c}>
              <th scope="row">{format(c)}</th>
              {series.map((s) => (
                <td key={s.label} className="num">
                  {fmt(s.values[i] ?? 0)}
                </td>
              ))}
              {total && series.length > 1 ? <td className="num">{fmt(series.reduce((a, s) => a + (s.values[i] ?? 0), 0))}</td> : null}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The y scale's grid and labels: 0, half and the top. */
function YAxis({ top, plotH, height, width }: { top: number; plotH: number; height: number; width: number }) {
  const ticks = [0, top / 2, top];
  return (
    <g className="chart-axis">
      {ticks.map((t) => {
        const y = PAD.top + plotH - (t / top) * plotH;
        return (
          <g key={t}>
            <line x1={PAD.left} x2={width - PAD.right} y1={y} y2={y} stroke="#d5dae1" strokeWidth="1" />
            <text x={PAD.left - 6} y={y + 4} textAnchor="end" fontSize="11" fill="#555d68">
              {fmt(t)}
            </text>
          </g>
        );
      })}
      <line x1={PAD.left} x2={PAD.left} y1={PAD.top} y2={height - PAD.bottom} stroke="#8a939e" strokeWidth="1" />
    </g>
  );
}

function XLabels({ categories, x, height, format, room }: { categories: string[]; x: (i: number) => number; height: number; format: (c: string) => string; room: number }) {
  const shown = labelled(categories.length, Math.max(2, Math.floor(room / LABEL_ROOM)));
  return (
    <g className="chart-axis">
      {categories.map((c, i) =>
        shown.has(i) ? (
          // A label at either end of the axis is anchored inward, so it is not cut at the picture's edge.
          <text key={c} x={x(i)} y={height - PAD.bottom + 16} textAnchor={x(i) - PAD.left < LABEL_ROOM / 2 ? 'start' : PAD.left + room - x(i) < LABEL_ROOM / 2 ? 'end' : 'middle'} fontSize="11" fill="#555d68">
            {format(c)}
          </text>
        ) : null,
      )}
    </g>
  );
}

/** What a chart of series over categories (columns or lines) is given. */
interface SeriesChartProps {
  title: string;
  summary: string;
  description?: ReactNode;
  categories: string[];
  series: Series[];
  categoryHeader?: string;
  /** How a category is written under the axis (short). */
  formatCategory?: (c: string) => string;
  /** How a category is written in the data table (in full). */
  tableCategory?: (c: string) => string;
  height?: number;
}

/**
 * Columns over categories, the series stacked in each column (for example allowed, denied and held
 * decisions per day). `summary` is the image's name: what a person should take from it, in a sentence.
 */
export function ColumnChart({
  title,
  summary,
  description,
  categories,
  series,
  categoryHeader = 'Day',
  formatCategory = (c) => c,
  tableCategory = (c) => c,
  height = 220,
}: SeriesChartProps) {
  const [box, W] = useWidth();
  const totals = categories.map((_, i) => series.reduce((a, s) => a + (s.values[i] ?? 0), 0));
  const top = niceMax(Math.max(0, ...totals));
  const plotW = W - PAD.left - PAD.right;
  const plotH = height - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, categories.length);
  const barW = Math.max(2, Math.min(36, slot * 0.7));
  const x = (i: number) => PAD.left + slot * i + slot / 2;
  return (
    <ChartFrame
      title={title}
      summary={summary}
      description={description}
      legend={series}
      height={height}
      width={W}
      box={box}
      table={<SeriesTable title={title} categoryHeader={categoryHeader} categories={categories} series={series} total format={tableCategory} />}
    >
      <YAxis top={top} plotH={plotH} height={height} width={W} />
      {categories.map((c, i) => {
        let base = PAD.top + plotH;
        return (
          <g key={c}>
            {series.map((s) => {
              const v = s.values[i] ?? 0;
              if (v <= 0) return null;
              const h = (v / top) * plotH;
              base -= h;
              return (
                // A thin white edge keeps stacked segments apart where two colours meet.
                <rect key={s.label} x={x(i) - barW / 2} y={base} width={barW} height={h} fill={CHART_COLOURS[s.colour]} stroke="#fff" strokeWidth="0.5">
                  <title>{`${formatCategory(c)}: ${fmt(v)} ${s.label.toLowerCase()}`}</title>
                </rect>
              );
            })}
          </g>
        );
      })}
      <XLabels categories={categories} x={x} height={height} format={formatCategory} room={plotW} />
    </ChartFrame>
  );
}

/** Horizontal bars, one per labelled value, the value written at the end of each (for example deny reasons). */
export function BarChart({
  title,
  summary,
  description,
  items,
  labelHeader,
  valueHeader,
  colour = 'info',
}: {
  title: string;
  summary: string;
  description?: ReactNode;
  items: Array<{ label: string; value: number }>;
  labelHeader: string;
  valueHeader: string;
  colour?: ChartColour;
}) {
  const [box, W] = useWidth();
  const row = 26;
  // Long reason codes get room, within reason on a narrow card.
  const labelW = Math.min(260, Math.round(W * 0.42));
  // Characters of a label that fit its room at 12 px, reckoned for capitals (reason codes are upper case);
  // the data table has every label in full.
  const fits = Math.max(8, Math.floor(labelW / 8.6));
  const height = Math.max(1, items.length) * row + 8;
  const top = Math.max(1, ...items.map((i) => i.value));
  const plotW = W - labelW - 60;
  return (
    <ChartFrame
      title={title}
      summary={summary}
      description={description}
      height={height}
      width={W}
      box={box}
      table={
        <div className="table-wrap">
          <table>
            <caption className="sr-only">{title}</caption>
            <thead>
              <tr>
                <th scope="col">{labelHeader}</th>
                <th scope="col" className="num">
                  {valueHeader}
                </th>
              </tr>
            </thead>
            <tbody>
              {items.map((i) => (
                <tr key={i.label}>
                  <th scope="row">{i.label}</th>
                  <td className="num">{fmt(i.value)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      }
    >
      {items.map((item, n) => {
        const y = 4 + n * row;
        const w = (item.value / top) * plotW;
        return (
          <g key={item.label}>
            <text x={labelW - 8} y={y + row / 2 + 4} textAnchor="end" fontSize="12" fill="#1b1f24">
              {item.label.length > fits ? `${item.label.slice(0, fits - 1)}…` : item.label}
            </text>
            <rect x={labelW} y={y + 4} width={Math.max(item.value > 0 ? 2 : 0, w)} height={row - 8} fill={CHART_COLOURS[colour]} rx="2" />
            <text x={labelW + w + 6} y={y + row / 2 + 4} fontSize="12" fill="#1b1f24">
              {fmt(item.value)}
            </text>
          </g>
        );
      })}
    </ChartFrame>
  );
}

/** Lines over categories, each series with its own colour, dash and marker (for example risk per day). */
export function LineChart({
  title,
  summary,
  description,
  categories,
  series,
  categoryHeader = 'Day',
  formatCategory = (c) => c,
  tableCategory = (c) => c,
  height = 200,
  max,
}: SeriesChartProps & {
  /** The top of the scale when it is fixed (a score out of 100); otherwise rounded up from the data. */
  max?: number;
}) {
  const [box, W] = useWidth();
  const top = max ?? niceMax(Math.max(0, ...series.flatMap((s) => s.values)));
  const plotW = W - PAD.left - PAD.right;
  const plotH = height - PAD.top - PAD.bottom;
  const x = (i: number) => (categories.length < 2 ? PAD.left + plotW / 2 : PAD.left + (plotW * i) / (categories.length - 1));
  const y = (v: number) => PAD.top + plotH - (Math.min(v, top) / top) * plotH;
  // Markers only where they can be told apart; a dense series is a plain line.
  const markers = categories.length <= 40;
  return (
    <ChartFrame
      title={title}
      summary={summary}
      description={description}
      legend={series}
      height={height}
      width={W}
      box={box}
      table={<SeriesTable title={title} categoryHeader={categoryHeader} categories={categories} series={series} total={false} format={tableCategory} />}
    >
      <YAxis top={top} plotH={plotH} height={height} width={W} />
      {series.map((s, n) => {
        const colour = CHART_COLOURS[s.colour];
        const points = categories.map((_, i) => `${x(i)},${y(s.values[i] ?? 0)}`).join(' ');
        return (
          <g key={s.label}>
            <polyline points={points} fill="none" stroke={colour} strokeWidth="2" strokeDasharray={DASHES[n % DASHES.length]} strokeLinejoin="round" />
            {markers || categories.length === 1
              ? categories.map((c, i) => (
                  <g key={c}>
                    <Marker shape={MARKERS[n % MARKERS.length]!} x={x(i)} y={y(s.values[i] ?? 0)} colour={colour} />
                    <title>{`${formatCategory(c)}: ${s.label.toLowerCase()} ${fmt(s.values[i] ?? 0)}`}</title>
                  </g>
                ))
              : null}
          </g>
        );
      })}
      <XLabels categories={categories} x={x} height={height} format={formatCategory} room={plotW} />
    </ChartFrame>
  );
}

/** A word-sized line of values for a figure tile; decorative, since the figure beside it says the value. */
export function Sparkline({ values, colour = 'info' }: { values: number[]; colour?: ChartColour }) {
  const w = 96;
  const h = 24;
  const top = Math.max(1, ...values);
  const points = values.map((v, i) => `${values.length < 2 ? w / 2 : (w * i) / (values.length - 1)},${h - 2 - (v / top) * (h - 4)}`).join(' ');
  return (
    <svg className="sparkline" width={w} height={h} viewBox={`0 0 ${w} ${h}`} aria-hidden="true" focusable="false">
      <polyline points={points} fill="none" stroke={CHART_COLOURS[colour]} strokeWidth="1.5" />
    </svg>
  );
}
