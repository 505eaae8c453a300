/**
 * One line chart (uPlot on a canvas): several series, each with its own x values (joined onto one x
 * axis), hover values in the legend, drag to zoom (double-click resets). `data-points` on the
 * container counts the finite points drawn, for tests and for "no data" notes.
 */
import uPlot from 'uplot';
import { h } from './dom.js';
import { formatTicks, formatValue } from './ticks.js';

export interface LineSeries {
  label: string;
  color: string;
  x: number[];
  y: Array<number | null>;
  dashed?: boolean;
}

export interface Chart {
  el: HTMLElement;
  update(series: LineSeries[]): void;
  destroy(): void;
}

/** Align series with different x values on one ascending x array (null where a series has no point). */
export function alignSeries(series: LineSeries[]): uPlot.AlignedData {
  const tables = series.map((s) => {
    const order = s.x.map((_, i) => i).sort((a, b) => s.x[a] - s.x[b]);
    const xs: number[] = [];
    const ys: Array<number | null> = [];
    for (const i of order) {
      if (xs.length && xs[xs.length - 1] === s.x[i])
        ys[ys.length - 1] = s.y[i]; // one value per x: the last
      else {
        xs.push(s.x[i]);
        ys.push(s.y[i]);
      }
    }
    return [xs, ys] as uPlot.AlignedData;
  });
  if (!tables.length) return [[]];
  return tables.length === 1 ? tables[0] : uPlot.join(tables);
}

function countPoints(series: LineSeries[]): number {
  return series.reduce((n, s) => n + s.y.filter((v) => v !== null && Number.isFinite(v)).length, 0);
}

/** The y range: uPlot's padded range, but a constant series gets ±half its size (0 → [−0.5, 0.5]), not 0..100. */
function yRange(_u: uPlot, min: number | null, max: number | null): uPlot.Range.MinMax {
  if (min === null || max === null) return [0, 1];
  if (min === max) {
    const d = Math.abs(min) * 0.5 || 0.5;
    return [min - d, max + d];
  }
  return uPlot.rangeNum(min, max, 0.1, true);
}

/** Room for the longest y tick label (uPlot calls this with the labels it is about to draw). */
function yAxisSize(_u: uPlot, values: string[] | null): number {
  const longest = Math.max(0, ...(values ?? []).map((v) => String(v).length));
  return Math.max(44, Math.ceil(longest * 7.2) + 20);
}

/** Chart width: three per row on a wide window, at least 340 px. */
export function defaultChartWidth(): number {
  const w = typeof window === 'undefined' ? 1200 : window.innerWidth;
  return Math.max(340, Math.floor((w - 60) / 3) - 26);
}

function options(title: string, xLabel: string, series: LineSeries[], width: number): uPlot.Options {
  const many = series.some((s) => s.x.length > 60);
  return {
    title,
    width,
    height: 210,
    scales: { x: { time: false }, y: { range: yRange } },
    cursor: { drag: { x: true, y: false } },
    legend: { live: true },
    axes: [
      { label: xLabel, labelSize: 18, size: 36, values: (_u, splits) => formatTicks(splits) },
      { size: yAxisSize, values: (_u, splits) => formatTicks(splits) },
    ],
    series: [
      { label: xLabel, value: (_u, v) => formatValue(v) },
      ...series.map((s) => ({
        label: s.label,
        stroke: s.color,
        width: 1.6,
        dash: s.dashed ? [6, 4] : undefined,
        spanGaps: true,
        points: { show: !many, size: 5, fill: s.color },
        value: (_u: uPlot, v: number | null) => formatValue(v),
      })),
    ],
  };
}

export function lineChart(title: string, xLabel: string, series: LineSeries[], width = defaultChartWidth()): Chart {
  const el = h('div', { class: 'chart', dataset: { title } });
  const note = h('div', { class: 'chart-empty muted' }, `${title}: no data`);
  let plot: uPlot | undefined;
  let labels = '';
  const update = (next: LineSeries[]) => {
    const points = countPoints(next);
    el.dataset.points = String(points);
    el.dataset.series = String(next.filter((s) => s.y.some((v) => v !== null)).length);
    const nextLabels = next.map((s) => s.label + s.color).join('|');
    if (!points) {
      plot?.destroy();
      plot = undefined;
      if (!note.isConnected) el.replaceChildren(note);
      return;
    }
    if (plot && nextLabels === labels) return plot.setData(alignSeries(next));
    plot?.destroy();
    el.replaceChildren();
    labels = nextLabels;
    plot = new uPlot(options(title, xLabel, next, width), alignSeries(next), el);
  };
  update(series);
  return { el, update, destroy: () => plot?.destroy() };
}
