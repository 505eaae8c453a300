/**
 * The tree explorer: pick a logged step (loaded on demand) and a prompt's tree (filter prompts by
 * text), colour by reward or value, click a leaf to read its path. Used by the dashboard (trees fetched per step) and report.html
 * (the last step's trees embedded).
 */
import type { TreeStep, TreeView } from '../types.js';
import { clear, h, select } from './dom.js';
import { leafPanel } from './leaf-panel.js';
import { formatValue } from './ticks.js';
import { TreeSvg, type ColourBy } from './tree-svg.js';

function treeLabel(t: TreeView): string {
  const root = t.nodes.find((n) => n.parent === null);
  const flags = [
    t.partial ? 'partial' : '',
    t.pruned?.paths ? `${t.pruned.paths} pruned` : '',
    t.nodes.some((n) => n.finishReason === 'error') ? 'error' : '',
  ].filter(Boolean);
  return `${t.itemId} · ${t.leaves} leaves · mean reward ${formatValue(root?.subtreeReward)}${flags.length ? ` · ${flags.join(', ')}` : ''}`;
}

export class TreeExplorer {
  readonly el = h('section', { class: 'tree-explorer' });
  private readonly header = h('div', { class: 'controls' });
  private readonly body = h('div', { class: 'tree-body' });
  private readonly side = h(
    'aside',
    { class: 'tree-side' },
    h('p', { class: 'muted' }, 'Click a leaf to read its path.'),
  );
  private data: TreeStep | undefined;
  private treeIndex = 0;
  private colourBy: ColourBy = 'reward';
  private filter = '';
  private view: TreeSvg | undefined;

  constructor(
    private steps: number[],
    private readonly load: (step: number) => Promise<TreeStep>,
  ) {
    this.el.append(this.header, h('div', { class: 'tree-main' }, this.body, this.side));
    this.renderHeader();
    if (steps.length) void this.open(steps[steps.length - 1]);
    else this.body.append(h('p', { class: 'muted' }, 'No trees logged yet (run.logTreesEvery).'));
  }

  setSteps(steps: number[]): void {
    const had = this.steps.length;
    this.steps = steps;
    this.renderHeader();
    if (!had && steps.length) void this.open(steps[steps.length - 1]);
  }

  async open(step: number): Promise<void> {
    this.body.replaceChildren(h('p', { class: 'muted' }, `Loading the trees of step ${step}…`));
    try {
      this.data = await this.load(step);
    } catch (e) {
      this.body.replaceChildren(h('p', { class: 'error' }, (e as Error).message));
      return;
    }
    this.treeIndex = 0;
    this.renderHeader();
    this.showTree();
  }

  private renderHeader(): void {
    const stepSel = select(
      this.steps.map((s): [string, string] => [String(s), `step ${s}`]),
      String(this.data?.step ?? this.steps[this.steps.length - 1] ?? ''),
      (v) => void this.open(Number(v)),
      { class: 'tree-step', 'aria-label': 'step' },
    );
    const trees = this.data?.trees ?? [];
    const shown = trees
      .map((t, i) => [t, i] as const)
      .filter(
        ([t]) =>
          !this.filter || t.itemId.toLowerCase().includes(this.filter.toLowerCase()) || t.id.includes(this.filter),
      );
    const treeSel = select(
      shown.map(([t, i]): [string, string] => [String(i), treeLabel(t)]),
      String(this.treeIndex),
      (v) => {
        this.treeIndex = Number(v);
        this.showTree();
      },
      { class: 'tree-pick', 'aria-label': 'prompt' },
    );
    const search = h('input', {
      type: 'search',
      class: 'tree-filter',
      placeholder: `filter ${trees.length} prompts`,
      value: this.filter,
      'aria-label': 'filter prompts',
    });
    search.addEventListener('change', () => {
      this.filter = search.value;
      this.renderHeader();
      const first = trees.findIndex(
        (t) => t.itemId.toLowerCase().includes(this.filter.toLowerCase()) || t.id.includes(this.filter),
      );
      if (first >= 0 && first !== this.treeIndex) {
        this.treeIndex = first;
        this.renderHeader();
        this.showTree();
      }
    });
    const colourSel = select(
      [
        ['reward', 'colour by reward'],
        ['value', 'colour by value'],
      ],
      this.colourBy,
      (v) => {
        this.colourBy = v as ColourBy;
        this.view?.setColour(this.colourBy);
      },
      { class: 'tree-colour' },
    );
    this.header.replaceChildren(
      stepSel,
      search,
      treeSel,
      colourSel,
      this.data ? h('span', { class: 'muted small' }, `decoded with ${this.data.tokenizer}`) : '',
      legend(),
    );
  }

  private showTree(): void {
    const tree = this.data?.trees[this.treeIndex];
    clear(this.body);
    this.side.replaceChildren(h('p', { class: 'muted' }, 'Click a leaf to read its path.'));
    if (!tree) {
      this.body.append(h('p', { class: 'muted' }, 'No trees in this step.'));
      return;
    }
    this.view = new TreeSvg(tree, {
      colourBy: this.colourBy,
      onLeaf: (leaf) => this.side.replaceChildren(leafPanel(tree, leaf)),
    });
    const notes = [
      tree.pruned?.paths ? `${tree.pruned.paths} paths (${tree.pruned.tokens} tokens) pruned online` : '',
      tree.carries ? `carried over ${tree.carries}×` : '',
      tree.partial ? 'unfinished (partial rollout)' : '',
    ].filter(Boolean);
    this.body.append(
      h(
        'div',
        { class: 'tree-title' },
        `${tree.id} · prompt ${JSON.stringify(tree.nodes.find((n) => n.parent === null)?.text ?? '')}`,
        notes.length ? h('span', { class: 'badge' }, notes.join(' · ')) : '',
      ),
      this.view.el,
    );
  }
}

function legend(): HTMLElement {
  const item = (cls: string, label: string) => h('span', { class: `legend-item ${cls}` }, label);
  return h(
    'span',
    { class: 'tree-legend' },
    item('lg-low', 'low'),
    item('lg-high', 'high'),
    item('lg-abort', 'aborted / unfinished'),
    item('lg-error', 'error'),
    item('lg-env', 'environment'),
    item('lg-collapsed', 'collapsed'),
  );
}
