/**
 * report.html's script (inlined with uPlot and the styles, so the file stays self-contained): the
 * same charts and tree explorer as `arbor ui`, over the data embedded in #arbor-data.
 */
import type { ReportData } from '../types.js';
import { ChartsPanel } from './charts-panel.js';
import { h } from './dom.js';
import { summaryTable } from './summary.js';
import { TreeExplorer } from './tree-explorer.js';

function main(): void {
  const data = JSON.parse(document.getElementById('arbor-data')!.textContent ?? '{}') as ReportData;
  const root = document.getElementById('app')!;
  const charts = new ChartsPanel(false);
  root.replaceChildren(h('h1', {}, data.title));
  if (data.summary) root.append(h('h2', {}, 'Summary'), summaryTable([{ name: 'value', summary: data.summary }]));
  root.append(h('h2', {}, 'Curves'), charts.el);
  charts.setRuns([{ name: data.title, rows: data.metrics }]);
  const trees = data.trees;
  root.append(h('h2', {}, trees ? `Rollout trees of step ${trees.step}` : 'Rollout trees'));
  if (trees) root.append(new TreeExplorer([trees.step], async () => trees).el);
  else root.append(h('p', { class: 'muted' }, 'No trees logged.'));
}

main();
