/**
 * Turn-level advantages over agent trees. In an agent tree every non-root node is one
 * turn (the policy's tokens, mask 1, then the environment's observation, mask 0) and the tree
 * branches at turn boundaries: a node with several children is a fork (an anchor whose
 * continuations are compared). Both estimators return per-response-token advantages, one array per
 * root-to-leaf trajectory (like the `tree` estimator's `segment` level): a turn's value is tiled on
 * all of its tokens, and the mask decides which of them are trained.
 *
 * Node value v(n) = mean reward of the leaves under n (a leaf's value is its reward; a leaf without a
 * reward counts 0, as in the flat estimators). Unlike `nodeValues` (tree.ts: mean of children's
 * values) this weights every leaf equally, PORTool's "a step's reward is shared by the trajectories
 * passing through it" (its m(s) set).
 *
 * - `fork` (PORTool, Wu et al., arXiv 2510.26020, method: "fork-relative advantages, blended with
 *   trajectory-relative advantages"): at a fork, child c's fork advantage is
 *   v(c) − mean_{c' ∈ children(parent)} v(c') (the mean over the fork's children, c included),
 *   divided by their std when `forkStd` (unbiased std + 1e-6, as `grpoAdvantages`). The trajectory
 *   advantage is GRPO over the tree's leaves. Turn n of trajectory τ gets
 *   `forkWeight · fork(n) + (1 − forkWeight) · traj(τ)`. The blend weight 0.5 is our default (the
 *   paper blends the two terms; we could not confirm its coefficient, so it is an option).
 *   An only child (no sibling to compare with) has exactly its parent's leaves, so it continues the
 *   branch its nearest forked ancestor chose: with `onlyChild: inherit` (default) it inherits its
 *   parent's fork advantage (0 when no ancestor forks, e.g. a plain chain); `zero` gives it 0. The
 *   paper defines fork advantages only for steps under a fork; the fallback is our decision.
 * - `turn_grpo` (turn-level GRPO, our definition; the same "siblings are the group" idea as TreeRL's
 *   local advantages, arXiv 2506.11902, and ARPO's branch sampling, arXiv 2507.19849): the group of a
 *   turn is the continuations of its anchor; advantage = GRPO over the siblings' values
 *   ((v − mean)/(std + 1e-6), unbiased std; all-equal siblings give 0). Only children fall back to the
 *   trajectory's GRPO advantage over the tree's leaves.
 * Optional whitening (`turnWhiten`) is over all policy tokens of the batch (token-weighted mean,
 * Bessel std), as `tree`'s segment level does.
 */
import { leaves, trajectory, type RolloutTree } from '../../core/tree.js';
import type { AdvantagedTrajectory } from '../types.js';
import { grpoAdvantages } from './group.js';
import { whitenTokenAdvantages } from './tree.js';

export interface TurnAdvantageOptions {
  kind: 'fork' | 'turn_grpo';
  /** fork: weight w of the fork advantage in w·fork + (1 − w)·trajectory. */
  forkWeight: number;
  /** fork: divide a fork's centred values by the fork's std. */
  forkStd: boolean;
  /** fork: what an only child's fork advantage is. */
  onlyChild: 'inherit' | 'zero';
  /** Whiten token advantages over all policy tokens of the batch. */
  turnWhiten: boolean;
}

const EPS = 1e-6;

/** v(n) = mean reward of the leaves under n, for every node of the tree (root included). */
export function leafMeanValues(tree: RolloutTree): Map<string, number> {
  const sum = new Map<string, number>();
  const count = new Map<string, number>();
  const visit = (id: string): void => {
    const node = tree.nodes[id];
    if (node.children.length === 0) {
      const leaf = node.parent !== null;
      sum.set(id, leaf ? (node.reward ?? 0) : 0);
      count.set(id, leaf ? 1 : 0);
      return;
    }
    let s = 0;
    let c = 0;
    for (const child of node.children) {
      visit(child);
      s += sum.get(child)!;
      c += count.get(child)!;
    }
    sum.set(id, s);
    count.set(id, c);
  };
  visit('0');
  const out = new Map<string, number>();
  for (const [id, s] of sum) out.set(id, count.get(id)! > 0 ? s / count.get(id)! : 0);
  return out;
}

/** Each forked child's sibling-relative advantage: (v − mean of the fork's children) [/ (std + eps)]. */
export function siblingAdvantages(
  tree: RolloutTree,
  values: Map<string, number>,
  divideByStd: boolean,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const node of Object.values(tree.nodes)) {
    if (node.children.length < 2) continue;
    const vs = node.children.map((c) => values.get(c)!);
    const adv = divideByStd ? grpoAdvantages(vs, EPS) : centred(vs);
    node.children.forEach((c, i) => out.set(c, adv[i]));
  }
  return out;
}

function centred(values: number[]): number[] {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return values.map((v) => v - mean);
}

/** PORTool fork advantage of every non-root node (only children per `onlyChild`). */
export function forkAdvantages(
  tree: RolloutTree,
  divideByStd: boolean,
  onlyChild: 'inherit' | 'zero',
): Map<string, number> {
  const values = leafMeanValues(tree);
  const forked = siblingAdvantages(tree, values, divideByStd);
  const out = new Map<string, number>();
  const visit = (id: string, inherited: number): void => {
    for (const child of tree.nodes[id].children) {
      const a = forked.get(child) ?? (onlyChild === 'inherit' ? inherited : 0);
      out.set(child, a);
      visit(child, a);
    }
  };
  visit('0', 0);
  return out;
}

/** Per-turn advantage of one trajectory (one value per non-root node on its path), by estimator. */
type TurnValue = (nodeId: string, trajAdv: number) => number;

function turnValueFn(tree: RolloutTree, o: TurnAdvantageOptions): TurnValue {
  if (o.kind === 'fork') {
    const fork = forkAdvantages(tree, o.forkStd, o.onlyChild);
    return (id, traj) => o.forkWeight * fork.get(id)! + (1 - o.forkWeight) * traj;
  }
  const sib = siblingAdvantages(tree, leafMeanValues(tree), true);
  return (id, traj) => sib.get(id) ?? traj;
}

/** `fork` / `turn_grpo` token advantages for every leaf of every tree. */
export function turnAdvantages(trees: RolloutTree[], o: TurnAdvantageOptions): AdvantagedTrajectory[] {
  const out: AdvantagedTrajectory[] = [];
  for (const tree of trees) {
    const ls = leaves(tree);
    const traj = grpoAdvantages(ls.map((l) => l.reward ?? 0));
    const value = turnValueFn(tree, o);
    ls.forEach((leaf, i) => {
      const tr = trajectory(tree, leaf.id);
      const tokenAdvantages: number[] = [];
      for (const id of tr.nodeIds.slice(1)) {
        const a = value(id, traj[i]);
        for (let t = 0; t < tree.nodes[id].tokens.length; t++) tokenAdvantages.push(a);
      }
      out.push({ trajectory: tr, advantage: 0, tokenAdvantages, excluded: false });
    });
  }
  if (o.turnWhiten) whitenTokenAdvantages(out);
  return out;
}
