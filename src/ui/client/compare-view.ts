/** Several runs overlaid on the same axes (one line per run per metric), with their summaries side by side. */
import { api } from './api.js';
import { ChartsPanel } from './charts-panel.js';
import { h } from './dom.js';
import { metricsOf } from './metrics-cache.js';
import { summaryTable } from './summary.js';

export class CompareView {
  readonly el = h('section', { class: 'compare-view' });
  private readonly charts = new ChartsPanel(true);
  private readonly summaries = h('div', { class: 'compare-summary' });

  constructor(readonly names: string[]) {
    this.el.append(
      h('p', {}, h('a', { href: '#/' }, '← all runs')),
      h('h2', {}, `Comparing ${names.join(', ')}`),
      this.summaries,
      this.charts.el,
    );
    void this.refresh();
  }

  destroy(): void {
    this.charts.destroy();
  }

  async refresh(): Promise<void> {
    try {
      const rows = await Promise.all(this.names.map((n) => metricsOf(n)));
      const summaries = await Promise.all(this.names.map((n) => api.summary(n)));
      this.charts.setRuns(this.names.map((name, i) => ({ name, rows: rows[i] })));
      this.summaries.replaceChildren(summaryTable(this.names.map((name, i) => ({ name, summary: summaries[i] }))));
    } catch (e) {
      this.summaries.replaceChildren(h('p', { class: 'error' }, (e as Error).message));
    }
  }
}
