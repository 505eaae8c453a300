/**
 * TreePO tree advantage (treepo-reference.md §2): for leaf i and each depth j = 0..D_i−1, the
 * sub-group G_j(i) = leaves under i's ancestor at depth j; term a_ij = r_i − mean_{G_j(i)} r.
 * j = 0 is always kept; deeper terms only when |G_j| > 1 (a chain of single-child nodes repeats the
 * same group, which is counted again, as the reference does). A_i = mean of kept terms ("average")
 * or the |G_j|-weighted mean ("group_size"). The batch is then whitened over all policy tokens
 * (token-weighted mean, Bessel std). The "segment" variant gives per-segment advantages
 * value(node) − value(parent), with value = mean of children (leaf value = reward), tiled on tokens.
 */
import { pathTo, type RolloutTree, type TreeNode } from '../../core/tree.js';
import type { AdvantagedTrajectory } from '../types.js';

/** Leaves under each node (ids), computed once per tree. */
function leavesUnder(tree: RolloutTree): Map<string, TreeNode[]> {
  const out = new Map<string, TreeNode[]>();
  const visit = (id: string): TreeNode[] => {
    const node = tree.nodes[id];
    const list = node.children.length === 0 ? (node.parent === null ? [] : [node]) : node.children.flatMap(visit);
    out.set(id, list);
    return list;
  };
  visit('0');
  return out;
}

/** Un-whitened A_i for every leaf of one tree, keyed by leaf id. */
export function treeLeafAdvantages(
  tree: RolloutTree,
  weighting: 'average' | 'group_size' = 'average',
): Map<string, number> {
  const under = leavesUnder(tree);
  const meanReward = (leaves: TreeNode[]) => leaves.reduce((s, l) => s + (l.reward ?? 0), 0) / leaves.length;
  const out = new Map<string, number>();
  for (const leaf of under.get('0')!) {
    // ancestors[j] is the ancestor at depth j (j = 0 root .. D−1)
    const ancestors = pathTo(tree, leaf.id).slice(0, -1);
    let num = 0;
    let den = 0;
    ancestors.forEach((a, j) => {
      const group = under.get(a.id)!;
      if (j > 0 && group.length <= 1) return;
      const term = (leaf.reward ?? 0) - meanReward(group);
      const w = weighting === 'group_size' ? group.length : 1;
      num += w * term;
      den += w;
    });
    out.set(leaf.id, den > 0 ? num / den : 0);
  }
  return out;
}

/** Segment-level values: value(leaf) = reward, value(node) = mean of its children's values. */
export function nodeValues(tree: RolloutTree): Map<string, number> {
  const values = new Map<string, number>();
  const visit = (id: string): number => {
    const node = tree.nodes[id];
    const v =
      node.children.length === 0
        ? (node.reward ?? 0)
        : node.children.map(visit).reduce((a, b) => a + b, 0) / node.children.length;
    values.set(id, v);
    return v;
  };
  visit('0');
  return values;
}

/** Whiten values over tokens: each entry counts `weights[i]` times (token-weighted mean, Bessel std). */
/** Whiten per-token advantages in place over all policy tokens of the batch (mask as weight). */
export function whitenTokenAdvantages(out: AdvantagedTrajectory[]): void {
  const flat: number[] = [];
  const w: number[] = [];
  for (const a of out) a.tokenAdvantages!.forEach((v, t) => (flat.push(v), w.push(a.trajectory.mask[t])));
  const white = whitenTokenWeighted(flat, w);
  let k = 0;
  for (const a of out) a.tokenAdvantages = a.tokenAdvantages!.map(() => white[k++]);
}

export function whitenTokenWeighted(values: number[], weights: number[], eps = 1e-8): number[] {
  const n = weights.reduce((a, b) => a + b, 0);
  if (n < 2) return values.map(() => 0);
  let mean = 0;
  values.forEach((v, i) => (mean += v * weights[i]));
  mean /= n;
  let ss = 0;
  values.forEach((v, i) => (ss += weights[i] * (v - mean) ** 2));
  const std = Math.sqrt(ss / (n - 1) + eps);
  return values.map((v) => (v - mean) / std);
}
