/**
 * Hand-built groups for the advantage-shaping tests: one tree per group, one single-segment leaf per sample with
 * the given reward, behaviour log-probs, entropies and mask. Token ids are 2, 3, …; the prompt is [1] (or longer).
 * Builds data only; asserts nothing.
 */
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';

export interface LeafSpec {
  reward: number;
  logprobs: number[];
  entropies?: number[];
  mask?: number[];
}

export function groupTree(id: string, leaves: LeafSpec[], prompt: number[] = [1]): RolloutTree {
  const tree = createTree(id, `item-${id}`, prompt);
  for (const leaf of leaves) {
    const node = addNode(tree, '0', {
      tokens: leaf.logprobs.map((_, t) => 2 + t),
      logprobs: leaf.logprobs,
      entropies: leaf.entropies,
      mask: leaf.mask,
      finishReason: 'stop',
    });
    node.reward = leaf.reward;
  }
  return tree;
}
