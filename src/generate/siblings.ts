/**
 * The identical-sibling rate of any tree generator: over every node's unordered child pairs, the share
 * whose continuations from the fork are the same LIKE-FOR-LIKE: equal on their first min(|a|, |b|)
 * tokens, a child that ends (finished leaf) inside the other's window counting as different. Siblings
 * of one length (TreePO segments, i.i.d. responses) compare whole as before; LATR's mixed pairs (an
 * 8-token segment beside a whole-response fill sample, a lookahead beside a split tail) could never
 * match whole. A window, not node kinds: it needs no tags from the generators and treats
 * every generator alike. `wholeNodeSiblingStats` reproduces the old whole-node figure.
 */
import type { RolloutTree, TreeNode } from '../core/tree.js';

export interface SiblingStats {
  /** Unordered pairs of children of one node, over every node of every tree. */
  pairs: number;
  /** Pairs that are the same (per the comparison used). */
  identical: number;
}

/** A leaf whose response ended here (stop, length, depth, repetition, error); an aborted leaf may go on. */
function ends(node: TreeNode): boolean {
  return !node.children.length && node.finishReason !== null && node.finishReason !== 'abort';
}

/** Like-for-like: the same first min(|a|, |b|) tokens, and neither stops inside the other's window. */
export function sameContinuation(a: TreeNode, b: TreeNode): boolean {
  if (a.tokens.length !== b.tokens.length) {
    const shorter = a.tokens.length < b.tokens.length ? a : b;
    if (!shorter.tokens.length || ends(shorter)) return false;
  }
  const w = Math.min(a.tokens.length, b.tokens.length);
  for (let i = 0; i < w; i++) if (a.tokens[i] !== b.tokens[i]) return false;
  return true;
}

/** The old comparison: whole child nodes, token for token (kept to reproduce earlier figures). */
function sameNode(a: TreeNode, b: TreeNode): boolean {
  return a.tokens.length === b.tokens.length && a.tokens.every((t, i) => t === b.tokens[i]);
}

function countPairs(trees: RolloutTree[], same: (a: TreeNode, b: TreeNode) => boolean): SiblingStats {
  let pairs = 0;
  let identical = 0;
  for (const tree of trees) {
    for (const node of Object.values(tree.nodes)) {
      const kids_K = node.children.map((id) => tree.nodes[id]);
      for (let i = 0; i < kids_K.length; i++) {
        for (let j = i + 1; j < kids_K.length; j++) {
          pairs++;
          if (same(kids_K[i], kids_K[j])) identical++;
        }
      }
    }
  }
  return { pairs, identical };
}

/** Sibling pairs and those identical like-for-like (the logged `identical_sibling_rate`). */
export function siblingStats(trees: RolloutTree[]): SiblingStats {
  return countPairs(trees, sameContinuation);
}

/** Sibling pairs and those whose whole child nodes are identical (the older, coarser metric). */
export function wholeNodeSiblingStats(trees: RolloutTree[]): SiblingStats {
  return countPairs(trees, sameNode);
}
