/**
 * The grid of charts for one run, or for several runs overlaid (compare): an x-axis switch (step,
 * tokens decoded, wall time), EMA smoothing, and a menu to chart any other numeric metric. Used by
 * the dashboard and by report.html. The grid is rebuilt when the rows bring a new reward component.
 */
import type { MetricsRow } from '../types.js';
import {
  CHARTS,
  COLORS,
  compareCharts,
  isRewardComponent,
  runCharts,
  SFT_PREFIX,
  X_AXES,
  type ChartDef,
  type MetricDef,
  type XAxis,
} from './chart-defs.js';
import { lineChart, type Chart, type LineSeries } from './chart.js';
import { clear, h, select } from './dom.js';
import { smooth } from './smooth.js';

export interface RunRows {
  name: string;
  rows: MetricsRow[];
}

/** One metric of one run against the chosen x: rows lacking either value are skipped. */
export function metricSeries(
  rows: MetricsRow[],
  xKey: string,
  metric: MetricDef,
  smoothing: number,
  label: string,
  color: string,
): LineSeries {
  const x: number[] = [];
  const raw: number[] = [];
  for (const r of rows) {
    const xv = r[xKey];
    const yv = r[metric.key];
    if (xv === undefined || yv === undefined) continue;
    x.push(xv);
    raw.push(yv * (metric.factor ?? 1));
  }
  return { label, color, x, y: smooth(raw, smoothing), dashed: metric.dashed };
}

const CHARTED = new Set([
  ...CHARTS.flatMap((c) => c.metrics.map((m) => m.key)),
  'step',
  'wall_s',
  'tokens_decoded_total',
]);

/** Which charts, with which lines: a change means the grid must be rebuilt. */
function chartsKey(defs: ChartDef[]): string {
  return JSON.stringify(defs.map((d) => [d.id, d.metrics.map((m) => m.key)]));
}

export class ChartsPanel {
  readonly el = h('section', { class: 'charts-panel' });
  private readonly grid = h('div', { class: 'charts' });
  private charts: Array<{ def: ChartDef; chart: Chart }> = [];
  private runs: RunRows[] = [];
  private x: XAxis = 'step';
  private smoothing = 0;
  private extra: string[] = [];
  private controls = h('div', { class: 'controls' });

  constructor(readonly compare: boolean) {
    this.el.append(this.controls, this.grid);
  }

  setRuns(runs: RunRows[]): void {
    const keysBefore = this.metricKeys().join();
    const chartsBefore = chartsKey(this.defs());
    this.runs = runs;
    if (!this.charts.length || chartsKey(this.defs()) !== chartsBefore) this.rebuild();
    else {
      this.refresh();
      if (this.metricKeys().join() !== keysBefore) this.renderControls();
    }
  }

  private defs(): ChartDef[] {
    const rows = this.runs.flatMap((r) => r.rows);
    const base = this.compare ? compareCharts(rows) : runCharts(rows);
    return [...base, ...this.extra.map((k) => ({ id: k, title: k, metrics: [{ key: k, label: k }] }))];
  }

  private metricKeys(): string[] {
    const keys = new Set<string>();
    for (const r of this.runs) for (const row of r.rows) for (const k of Object.keys(row)) keys.add(k);
    // the SFT's keys have no RL step: only the SFT chart (its own x axis) can draw them
    const offered = (k: string) => !CHARTED.has(k) && !isRewardComponent(k) && !k.startsWith(SFT_PREFIX);
    return [...keys].filter((k) => offered(k) && !this.extra.includes(k)).sort();
  }

  /** The chart's x axis: its own (the SFT chart's), else the panel's. */
  private xOf(def: ChartDef): { key: string; label: string } {
    return def.x ?? X_AXES[this.x];
  }

  private series(def: ChartDef): LineSeries[] {
    const xKey = this.xOf(def).key;
    if (this.compare)
      return this.runs.map((r, i) =>
        metricSeries(r.rows, xKey, def.metrics[0], this.smoothing, r.name, COLORS[i % COLORS.length]),
      );
    const rows = this.runs[0]?.rows ?? [];
    return def.metrics.map((m, i) => metricSeries(rows, xKey, m, this.smoothing, m.label, COLORS[i % COLORS.length]));
  }

  private refresh(): void {
    for (const { def, chart } of this.charts) chart.update(this.series(def));
  }

  private rebuild(): void {
    for (const c of this.charts) c.chart.destroy();
    clear(this.grid);
    this.charts = this.defs().map((def) => ({
      def,
      chart: lineChart(def.title, this.xOf(def).label, this.series(def)),
    }));
    for (const c of this.charts) this.grid.append(c.chart.el);
    this.renderControls();
  }

  /** Release the charts (uPlot listens on the window). */
  destroy(): void {
    for (const c of this.charts) c.chart.destroy();
    this.charts = [];
  }

  private renderControls(): void {
    const xSel = select(
      Object.entries(X_AXES).map(([k, v]) => [k, v.label]),
      this.x,
      (v) => {
        this.x = v as XAxis;
        this.rebuild();
      },
      { class: 'x-axis', 'aria-label': 'x axis' },
    );
    const slider = h('input', {
      type: 'range',
      min: '0',
      max: '0.99',
      step: '0.01',
      value: String(this.smoothing),
      class: 'smoothing',
      'aria-label': 'smoothing',
    });
    const shown = h('span', { class: 'muted' }, this.smoothing.toFixed(2));
    slider.addEventListener('input', () => {
      this.smoothing = Number(slider.value);
      shown.textContent = this.smoothing.toFixed(2);
      this.refresh();
    });
    const more = this.metricKeys();
    const add = more.length
      ? select(
          [['', `+ chart another metric (${more.length})`], ...more.map((k): [string, string] => [k, k])],
          '',
          (v) => {
            if (!v) return;
            this.extra.push(v);
            this.rebuild();
          },
          { class: 'add-metric' },
        )
      : null;
    this.controls.replaceChildren(
      h('label', {}, 'x axis ', xSel),
      h('label', {}, 'smoothing ', slider, ' ', shown),
      add ?? '',
    );
  }
}
