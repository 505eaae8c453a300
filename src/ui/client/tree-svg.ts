/**
 * A rollout tree drawn as SVG: real tree layout (tree-layout.ts), nodes coloured by reward or value,
 * leaves marked by how they ended (stop, length, abort = dashed ring, error = red cross), environment
 * segments (agent observations) as squares, branch points labelled with their decision; click an inner
 * node to collapse it, click a leaf to select its path; wheel zooms (positions spread, glyphs keep
 * their size), drag pans. Trees with more than 64 leaves open folded.
 */
import type { NodeView, TreeView } from '../types.js';
import { colourScale } from './colour.js';
import { h, svg } from './dom.js';
import { formatValue } from './ticks.js';
import { layoutTree, type Layout } from './tree-layout.js';

export type ColourBy = 'reward' | 'value';

export interface TreeSvgOptions {
  colourBy: ColourBy;
  onLeaf: (node: NodeView) => void;
}

const DX = 110;
const DY = 18;
const MARGIN = { l: 30, t: 24, r: 150, b: 24 };

function nodeColourValue(n: NodeView, by: ColourBy): number | undefined {
  if (by === 'value') return n.value ?? n.subtreeReward;
  return n.children.length ? n.subtreeReward : n.reward;
}

/**
 * The branching decision of a node with several children: recorded, else its fan-out, its value (what
 * value-guided allocation split on) and its children's mean first-token entropy, when logged.
 */
export function branchLabel(n: NodeView, byId: Map<string, NodeView>): string | undefined {
  if (n.children.length < 2) return undefined;
  if (n.decision) return n.decision;
  const hs = n.children.map((c) => byId.get(c)?.firstEntropy).filter((v): v is number => v !== undefined);
  const parts = [`×${n.children.length}`];
  if (n.value !== undefined) parts.push(`v ${formatValue(n.value)}`); // value-guided allocation decided on it
  if (hs.length) parts.push(`H ${formatValue(hs.reduce((a, b) => a + b, 0) / hs.length)}`);
  return parts.join(' ');
}

function tooltip(n: NodeView): string {
  const parts = [
    `node ${n.id} · ${n.tokens} tokens${n.envTokens ? ` (${n.envTokens} from the environment)` : ''}`,
    JSON.stringify(n.text).slice(0, 300),
  ];
  if (n.finishReason) parts.push(`finish: ${n.finishReason}`);
  if (n.reward !== undefined) parts.push(`reward ${formatValue(n.reward)}`);
  if (n.value !== undefined) parts.push(`value ${formatValue(n.value)}`);
  if (n.subtreeReward !== undefined && n.children.length)
    parts.push(`mean reward below ${formatValue(n.subtreeReward)}`);
  if (n.error) parts.push(`error: ${n.error}`);
  return parts.join('\n');
}

export class TreeSvg {
  readonly el: HTMLElement;
  private readonly root: SVGSVGElement;
  private readonly layer: SVGGElement;
  private readonly byId: Map<string, NodeView>;
  private readonly collapsed = new Set<string>();
  private view = { sx: 1, sy: 1, tx: 0, ty: 0 };
  private nodeEls: Array<[SVGGElement, string]> = [];
  private edgeEls: Array<[SVGPathElement, string, string]> = [];
  private layout!: Layout;
  selected: string | undefined;

  constructor(
    readonly tree: TreeView,
    private readonly opts: TreeSvgOptions,
  ) {
    this.byId = new Map(tree.nodes.map((n) => [n.id, n]));
    this.layer = svg('g');
    this.root = svg('svg', { class: 'tree-svg', role: 'img', 'aria-label': `rollout tree ${tree.id}` }, this.layer);
    this.el = h('div', { class: 'tree-canvas' }, this.toolbar(), this.root);
    this.enableZoom();
    this.autoCollapse();
    this.draw();
  }

  /** A tree with more than `limit` leaves opens collapsed at the deepest level that shows at most `limit` ends. */
  private autoCollapse(limit = 64): void {
    if (this.tree.leaves <= limit) return;
    const byDepth = new Map<number, NodeView[]>();
    for (const n of this.tree.nodes) byDepth.set(n.depth, [...(byDepth.get(n.depth) ?? []), n]);
    let chosen = 1;
    let leavesAbove = 0;
    for (let d = 1; byDepth.has(d); d++) {
      const nodes = byDepth.get(d)!;
      if (leavesAbove + nodes.length > limit) break;
      chosen = d;
      leavesAbove += nodes.filter((n) => !n.children.length).length;
    }
    for (const n of byDepth.get(chosen) ?? []) if (n.children.length) this.collapsed.add(n.id);
  }

  setColour(by: ColourBy): void {
    this.opts.colourBy = by;
    this.draw();
  }

  private toolbar(): HTMLElement {
    const b = (label: string, title: string, f: () => void) =>
      h('button', { type: 'button', title, onclick: f }, label);
    return h(
      'div',
      { class: 'tree-tools' },
      b('fit', 'fit the tree in view', () => this.fit()),
      b('+', 'zoom in', () => this.zoomBy(1.25)),
      b('−', 'zoom out', () => this.zoomBy(0.8)),
      b('expand all', 'expand every collapsed node', () => {
        this.collapsed.clear();
        this.draw();
      }),
    );
  }

  /** Draw (after layout changes); keeps the zoom unless `fit`. */
  draw(fit = true): void {
    this.layout = layoutTree(this.tree.nodes, this.collapsed, { dx: DX, dy: DY });
    const colour = colourScale(this.tree.nodes.map((n) => nodeColourValue(n, this.opts.colourBy)));
    const path = new Set<string>();
    for (let id = this.selected; id; id = this.byId.get(id)?.parent ?? undefined) path.add(id);
    this.edgeEls = this.layout.edges.map(
      ([a, b]) =>
        [svg('path', { class: `edge${path.has(b) ? ' on-path' : ''}` }), a, b] as [SVGPathElement, string, string],
    );
    this.nodeEls = [...this.layout.placed.values()].map(
      (p) => [this.node(this.byId.get(p.id)!, p.hidden, colour), p.id] as [SVGGElement, string],
    );
    this.layer.replaceChildren(...this.edgeEls.map((e) => e[0]), ...this.nodeEls.map((e) => e[0]));
    if (fit) requestAnimationFrame(() => this.fit());
    else this.position();
  }

  /** Semantic zoom: positions scale, node glyphs and labels keep their size. */
  private position(): void {
    const { sx, sy, tx, ty } = this.view;
    const at = (id: string) => {
      const p = this.layout.placed.get(id)!;
      return [tx + p.x * sx, ty + p.y * sy];
    };
    for (const [g, id] of this.nodeEls) {
      const [x, y] = at(id);
      g.setAttribute('transform', `translate(${x.toFixed(1)},${y.toFixed(1)})`);
    }
    for (const [el, a, b] of this.edgeEls) {
      const [x1, y1] = at(a);
      const [x2, y2] = at(b);
      const mx = ((x1 + x2) / 2).toFixed(1);
      el.setAttribute(
        'd',
        `M${x1.toFixed(1)},${y1.toFixed(1)} C${mx},${y1.toFixed(1)} ${mx},${y2.toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}`,
      );
    }
    this.root.classList.toggle('compact', sy * DY < 10);
  }

  private node(n: NodeView, hidden: number, colour: (v: number | undefined) => string): SVGGElement {
    const leaf = n.children.length === 0 && n.parent !== null;
    const fill = colour(nodeColourValue(n, this.opts.colourBy));
    const kind = n.parent === null ? 'root' : leaf ? 'leaf' : hidden ? 'collapsed' : 'inner';
    const cls = [
      'node',
      kind,
      n.finishReason ? `finish-${n.finishReason}` : '',
      n.envTokens && n.envTokens === n.tokens ? 'env' : '',
      n.id === this.selected ? 'selected' : '',
    ]
      .filter(Boolean)
      .join(' ');
    const g = svg('g', { class: cls, 'data-id': n.id }, svg('title', {}, tooltip(n)));
    g.append(...this.shape(n, kind, fill, hidden));
    const label = leaf
      ? `${n.reward !== undefined ? `r=${formatValue(n.reward)}` : 'r=?'} ${n.finishReason ?? 'growing'}`
      : branchLabel(n, this.byId);
    if (label)
      g.append(
        svg(
          'text',
          {
            x: leaf || hidden ? 10 : -4,
            y: leaf || hidden ? 4 : -8,
            class: 'node-label',
            'text-anchor': leaf || hidden ? 'start' : 'end',
          },
          label,
        ),
      );
    g.addEventListener('click', (e) => {
      e.stopPropagation();
      if (leaf) this.selectLeaf(n);
      else if (n.children.length && n.parent !== null) this.toggle(n.id);
    });
    return g;
  }

  private shape(n: NodeView, kind: string, fill: string, hidden: number): SVGElement[] {
    if (kind === 'root') return [svg('rect', { x: -6, y: -6, width: 12, height: 12, fill: '#6b7280' })];
    if (kind === 'collapsed')
      return [
        svg('path', { d: 'M-6,-7 L7,0 L-6,7 Z', fill }),
        svg('text', { x: 10, y: -6, class: 'node-label' }, `+${hidden} leaves`),
      ];
    if (n.envTokens && n.envTokens === n.tokens) return [svg('rect', { x: -5, y: -5, width: 10, height: 10, fill })];
    const r = kind === 'leaf' ? 6 : 4;
    const out: SVGElement[] = [svg('circle', { r, fill })];
    if (n.finishReason === 'error') out.push(svg('path', { d: 'M-5,-5 L5,5 M5,-5 L-5,5', class: 'error-cross' }));
    if (n.finishReason === 'abort' || (n.finishReason === null && kind === 'leaf'))
      out.push(svg('circle', { r: r + 3, class: 'abort-ring' }));
    return out;
  }

  selectLeaf(n: NodeView): void {
    this.selected = n.id;
    this.draw(false);
    this.opts.onLeaf(n);
  }

  private toggle(id: string): void {
    if (this.collapsed.has(id)) this.collapsed.delete(id);
    else this.collapsed.add(id);
    this.draw(false);
  }

  fit(): void {
    const w = this.root.clientWidth || 800;
    const hgt = this.root.clientHeight || 480;
    const sx = Math.min(2, Math.max(0.3, (w - MARGIN.l - MARGIN.r) / Math.max(1, this.layout.width)));
    const sy = Math.min(1.6, (hgt - MARGIN.t - MARGIN.b) / Math.max(1, this.layout.height));
    this.view = {
      sx,
      sy,
      tx: MARGIN.l,
      ty: MARGIN.t + Math.max(0, (hgt - MARGIN.t - MARGIN.b - this.layout.height * sy) / 2),
    };
    this.position();
  }

  private zoomBy(f: number, cx = (this.root.clientWidth || 800) / 2, cy = (this.root.clientHeight || 480) / 2): void {
    const { sx, sy, tx, ty } = this.view;
    const g = Math.min(40, Math.max(0.02, sy * f)) / sy;
    this.view = { sx: sx * g, sy: sy * g, tx: cx - (cx - tx) * g, ty: cy - (cy - ty) * g };
    this.position();
  }

  private enableZoom(): void {
    this.root.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        const r = this.root.getBoundingClientRect();
        this.zoomBy(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
      },
      { passive: false },
    );
    let drag: { x: number; y: number; tx: number; ty: number } | undefined;
    this.root.addEventListener('pointerdown', (e) => {
      if ((e.target as Element).closest('.node')) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.view.tx, ty: this.view.ty };
      this.root.setPointerCapture(e.pointerId);
    });
    this.root.addEventListener('pointermove', (e) => {
      if (!drag) return;
      this.view.tx = drag.tx + e.clientX - drag.x;
      this.view.ty = drag.ty + e.clientY - drag.y;
      this.position();
    });
    this.root.addEventListener('pointerup', () => (drag = undefined));
  }
}
