/**
 * The details of a selected leaf: the decoded text of its whole path (prompt, then each segment,
 * environment observations marked), its reward and reward components, and the advantage each segment
 * received when the trees carry advantages.
 */
import type { NodeView, TreeView } from '../types.js';
import { h } from './dom.js';
import { formatValue } from './ticks.js';

export function pathOf(tree: TreeView, leafId: string): NodeView[] {
  const byId = new Map(tree.nodes.map((n) => [n.id, n]));
  const path: NodeView[] = [];
  for (let n = byId.get(leafId); n; n = n.parent === null ? undefined : byId.get(n.parent)) path.unshift(n);
  return path;
}

function advantageText(a: number | number[] | undefined): string {
  if (a === undefined) return '–';
  if (typeof a === 'number') return formatValue(a);
  const mean = a.reduce((s, v) => s + v, 0) / a.length;
  return `${formatValue(mean)} (mean of ${a.length})`;
}

function table(rows: Array<[string, string]>, cls: string): HTMLTableElement {
  return h('table', { class: cls }, ...rows.map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v))));
}

export function leafPanel(tree: TreeView, leaf: NodeView): HTMLElement {
  const path = pathOf(tree, leaf.id);
  const text = h(
    'pre',
    { class: 'path-text' },
    ...path.map((n, i) =>
      h(
        'span',
        {
          class: `seg ${i === 0 ? 'prompt' : n.envTokens === n.tokens && n.tokens ? 'env' : `seg-${i % 2}`}`,
          title: `node ${n.id}${n.envTokens ? ` · ${n.envTokens} environment tokens` : ''}`,
        },
        n.text,
      ),
    ),
  );
  const facts: Array<[string, string]> = [
    ['leaf', leaf.id],
    ['finish', leaf.finishReason ?? 'unfinished'],
    ['reward', formatValue(leaf.reward)],
    ['tokens', String(path.slice(1).reduce((s, n) => s + n.tokens, 0))],
  ];
  if (leaf.value !== undefined) facts.push(['value', formatValue(leaf.value)]);
  if (leaf.error) facts.push(['error', leaf.error]);
  const components = Object.entries(leaf.components ?? {}).map(([k, v]): [string, string] => [k, formatValue(v)]);
  const hasAdv = path.some((n) => n.advantage !== undefined);
  const segments = h(
    'table',
    { class: 'segments' },
    h(
      'tr',
      {},
      h('th', {}, 'segment'),
      h('th', {}, 'tokens'),
      h('th', {}, 'value'),
      h('th', {}, 'mean log-prob'),
      h('th', {}, 'advantage'),
    ),
    ...path
      .slice(1)
      .map((n) =>
        h(
          'tr',
          {},
          h('td', {}, n.id),
          h('td', {}, String(n.tokens)),
          h('td', {}, formatValue(n.value ?? n.subtreeReward ?? n.reward)),
          h('td', {}, formatValue(n.meanLogprob)),
          h('td', {}, advantageText(n.advantage)),
        ),
      ),
  );
  return h(
    'div',
    { class: 'leaf-panel', 'data-leaf': leaf.id },
    h('h3', {}, `Path to leaf ${leaf.id}`),
    text,
    table(facts, 'facts'),
    components.length
      ? h('div', {}, h('h4', {}, 'Reward components'), table(components, 'components'))
      : h('p', { class: 'muted' }, 'No reward components logged.'),
    h('h4', {}, 'Segments'),
    segments,
    hasAdv ? null : h('p', { class: 'muted' }, "This run's trees carry no advantages."),
    leaf.info
      ? h('details', {}, h('summary', {}, 'reward info'), h('pre', {}, JSON.stringify(leaf.info, null, 2)))
      : null,
  );
}
