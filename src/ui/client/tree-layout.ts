/**
 * Tidy layout of a rollout tree, root on the left: depth sets x, leaves take consecutive rows in
 * depth-first order and a parent sits midway between its first and last child. A collapsed node is
 * laid out as a leaf and reports how many leaves it hides.
 */
import type { NodeView } from '../types.js';

export interface Placed {
  id: string;
  x: number;
  y: number;
  /** Leaves hidden under a collapsed node (0 otherwise). */
  hidden: number;
}

export interface Layout {
  placed: Map<string, Placed>;
  edges: Array<[string, string]>;
  width: number;
  height: number;
}

export interface LayoutOptions {
  dx: number;
  dy: number;
}

export function countLeaves(byId: Map<string, NodeView>, id: string): number {
  const n = byId.get(id);
  if (!n || !n.children.length) return 1;
  return n.children.reduce((s, c) => s + countLeaves(byId, c), 0);
}

export function layoutTree(
  nodes: NodeView[],
  collapsed: ReadonlySet<string>,
  opts: LayoutOptions = { dx: 120, dy: 18 },
): Layout {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const placed = new Map<string, Placed>();
  const edges: Array<[string, string]> = [];
  let row = 0;
  let maxDepth = 0;
  const visit = (id: string, depth: number): number => {
    const n = byId.get(id)!;
    maxDepth = Math.max(maxDepth, depth);
    const kids = n.children.filter((c) => byId.has(c));
    let y: number;
    let hidden = 0;
    if (!kids.length || collapsed.has(id)) {
      y = row++ * opts.dy;
      if (kids.length) hidden = countLeaves(byId, id);
    } else {
      const ys = kids.map((c) => {
        edges.push([id, c]);
        return visit(c, depth + 1);
      });
      y = (ys[0] + ys[ys.length - 1]) / 2;
    }
    placed.set(id, { id, x: depth * opts.dx, y, hidden });
    return y;
  };
  const root = nodes.find((n) => n.parent === null);
  if (root) visit(root.id, 0);
  return { placed, edges, width: maxDepth * opts.dx, height: Math.max(0, row - 1) * opts.dy };
}
