/** One run: headline, tabs for its charts (live), its trees (per step, on demand), config and summary. */
import type { RunInfo } from '../types.js';
import { api } from './api.js';
import { ChartsPanel } from './charts-panel.js';
import { h } from './dom.js';
import { metricsOf } from './metrics-cache.js';
import { summaryTable } from './summary.js';
import { TreeExplorer } from './tree-explorer.js';

type Tab = 'charts' | 'trees' | 'config';

export class RunView {
  readonly el = h('section', { class: 'run-view' });
  private readonly charts = new ChartsPanel(false);
  private readonly head = h('div', { class: 'run-head' });
  private readonly panes: Record<Tab, HTMLElement> = {
    charts: h('div', { class: 'pane pane-charts' }),
    trees: h('div', { class: 'pane pane-trees' }),
    config: h('div', { class: 'pane pane-config' }),
  };
  private trees: TreeExplorer | undefined;
  private info: RunInfo | undefined;

  constructor(
    readonly name: string,
    tab: Tab = 'charts',
    step?: number,
  ) {
    const tabs = h(
      'nav',
      { class: 'tabs' },
      ...(['charts', 'trees', 'config'] as Tab[]).map((t) =>
        h(
          'a',
          { href: `#/run/${encodeURIComponent(name)}/${t}`, class: `tab${t === tab ? ' active' : ''}`, 'data-tab': t },
          t,
        ),
      ),
    );
    this.panes.charts.append(this.charts.el);
    this.el.append(h('p', {}, h('a', { href: '#/' }, '← all runs')), this.head, tabs, this.panes[tab]);
    void this.refresh().then(() => {
      if (tab === 'trees') this.openTrees(step);
      if (tab === 'config') void this.openConfig();
    });
  }

  /** Re-read the run (after a change on disk): headline, charts, tree steps. */
  destroy(): void {
    this.charts.destroy();
  }

  async refresh(): Promise<void> {
    try {
      const [info, rows] = await Promise.all([api.run(this.name), metricsOf(this.name)]);
      this.info = info;
      this.renderHead(info);
      this.charts.setRuns([{ name: this.name, rows }]);
      this.trees?.setSteps(info.treeSteps);
    } catch (e) {
      this.head.replaceChildren(h('p', { class: 'error' }, (e as Error).message));
    }
  }

  private renderHead(r: RunInfo): void {
    this.head.replaceChildren(
      h('h2', {}, r.name, ' ', h('span', { class: `status status-${r.status}` }, r.status)),
      h('p', { class: 'muted' }, `${r.task} · ${r.generator} · ${r.mode} · step ${r.lastStep} of ${r.steps}`),
    );
  }

  private openTrees(step?: number): void {
    this.trees = new TreeExplorer(this.info?.treeSteps ?? [], (s) => api.trees(this.name, s));
    this.panes.trees.append(this.trees.el);
    if (step !== undefined && this.info?.treeSteps.includes(step)) void this.trees.open(step);
  }

  private async openConfig(): Promise<void> {
    const [config, summary] = await Promise.all([api.config(this.name), api.summary(this.name)]);
    this.panes.config.append(
      h('h3', {}, 'Summary'),
      summary
        ? summaryTable([{ name: this.name, summary }])
        : h('p', { class: 'muted' }, 'No summary.json yet (the run has not finished).'),
      h('h3', {}, 'Resolved config'),
      h('pre', { class: 'config' }, config),
    );
  }
}
