/**
 * Fixtures of the quality-head tests (test/control/auc-decision.test.ts, arrol-calibration.test.ts): a head
 * that scores a path by sigmoid(mean log-prob of its response so far), and a tree whose decision nodes and
 * outcomes are known by hand, and one tree grown through a quality hook. They assert nothing.
 */
import { addNode, createTree, removeLeaf, type RolloutTree } from '../../src/core/tree.js';
import { freshHead, type QualityHeadState } from '../../src/control/quality-head.js';
import { Rng } from '../../src/core/rng.js';
import type { Sampler } from '../../src/engine/types.js';
import type { Generator, QualityHook } from '../../src/generate/types.js';

/** Weight 1 on the first statistic (mean log-prob), unit variance, zero mean: every score is known by hand. */
export function meanLogprobHead(): QualityHeadState {
  const head = freshHead(0);
  head.w[0] = 1;
  head.examples = 2;
  head.m2 = head.m2.map(() => 1);
  return head;
}

/**
 * root → a, b (log-prob −1) → decision nodes d1, d2 under a and d3, d4, d5 under b. `finish` prunes d5 and ends
 * d1..d4 with one leaf each, correct for d1 and d4, whose log-prob is `leafLogprob(correct)`. Path means at the
 * decision: d1 −0.55, d2 −0.75, d3 −0.65, d4 −0.7, d5 −0.6.
 */
export function grownTree(leafLogprob: (correct: boolean) => number): {
  tree: RolloutTree;
  decisions: string[];
  pruned: string;
  finish: () => void;
} {
  const tree = createTree('s1r0p0', 'item', [9]);
  const a = addNode(tree, '0', { tokens: [1], logprobs: [-1] });
  const b = addNode(tree, '0', { tokens: [2], logprobs: [-1] });
  const d = [
    addNode(tree, a.id, { tokens: [3], logprobs: [-0.1] }),
    addNode(tree, a.id, { tokens: [4], logprobs: [-0.5] }),
    addNode(tree, b.id, { tokens: [3], logprobs: [-0.3] }),
    addNode(tree, b.id, { tokens: [4], logprobs: [-0.4] }),
    addNode(tree, b.id, { tokens: [5], logprobs: [-0.2] }),
  ];
  const finish = () => {
    removeLeaf(tree, d[4].id);
    [1, 0, 0, 1].forEach((correct, i) => {
      const leaf = addNode(tree, d[i].id, {
        tokens: [7],
        logprobs: [leafLogprob(correct === 1)],
        finishReason: 'stop',
      });
      leaf.reward = correct;
    });
  };
  return { tree, decisions: d.map((n) => n.id), pruned: d[4].id, finish };
}

/**
 * One TreePO tree grown for prompt [1, 2] by `generator` from `sampler` (stop token 2, at most 30 response
 * tokens, T = 1), with `quality` as the quality hook: the setting of the pruning tests.
 */
export function growOne(
  generator: Generator,
  sampler: Sampler,
  seed: number,
  quality: QualityHook,
): ReturnType<Generator['grow']> {
  return generator.grow([{ item: { id: 'q', prompt: 'q', answer: '' }, promptTokens: [1, 2] }], {
    sampler,
    rng: new Rng(seed),
    step: 1,
    stopTokens: [2],
    maxResponseTokens: 30,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: 't',
    quality,
  });
}
