import { test } from 'node:test';
import { grownTree as grownTreeWith, meanLogprobHead } from '../../testkit/control/grown-tree.js';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { addNode, createTree } from '../../src/core/tree.js';
import { qualityHeadSchema } from '../../src/control/quality-head.js';
import { pruneOptionsSchema } from '../../src/control/prune.js';
import { decisionAuc, QualityStep, type QualityStepOptions } from '../../src/control/quality-step.js';

const grownTree = () => grownTreeWith((correct) => (correct ? 0 : -5));

function options(prune: 'none' | 'arrol', valueAllocation: boolean, warmup = 0): QualityStepOptions {
  return {
    head: qualityHeadSchema.parse({ warmup, hidden: false }),
    prune: pruneOptionsSchema.parse({ kind: prune, ...(prune === 'arrol' ? { atRound: 1 } : {}) }),
    valueAllocation,
    maxResponseTokens: 16,
    samplerHiddenSize: 0,
    samplerEntropy: false,
  };
}

// all labelled nodes: positives d1 d4 l1 l4, negatives a b (label ½) d2 d3 l2 l3; only d4 loses, to d3: 23/24.
// decision nodes: d1 beats d2 and d3, d4 beats d2 only: 3/4.
test('ARRoL: head_auc over every node is 23/24, at the pruning decision 3/4 (the pruned node has no label)', () => {
  const { tree, decisions, pruned, finish } = grownTree();
  const step = new QualityStep(meanLogprobHead(), options('arrol', false), () => 0, new Rng(1));
  assert.equal(step.hook!.prune!(tree, decisions, 0), undefined, 'round 0 is not the pruning round');
  assert.equal(step.decided.size, 0, 'no decision, nothing recorded');
  const drop = step.hook!.prune!(tree, decisions, 1);
  assert.equal(drop?.length, 5);
  assert.deepEqual([...step.decided.get(tree.id)!.keys()], decisions);
  finish();
  const info = step.learn([tree]);
  assert.equal(info.head_auc, 23 / 24);
  assert.equal(info.head_auc_at_decision, 3 / 4);
  assert.equal(info.head_decision_nodes, 4, `5 scored, ${pruned} pruned`);
});

test('value-guided branching: the nodes predict() scores are the decision nodes', () => {
  const { tree, decisions, finish } = grownTree();
  const step = new QualityStep(meanLogprobHead(), options('none', true), () => 0, new Rng(1));
  const q = step.hook!.predict(tree, decisions.slice(0, 4))!;
  // the scores are sigmoid(path mean log-prob): their logits give the means back
  [-0.55, -0.75, -0.65, -0.7].forEach((m, i) => assert.ok(Math.abs(Math.log(q[i] / (1 - q[i])) - m) < 1e-12));
  finish();
  const info = step.learn([tree]);
  assert.equal(info.head_auc, 23 / 24);
  assert.equal(info.head_auc_at_decision, 3 / 4);
});

test('no decision before warm-up: no head_auc_at_decision is logged', () => {
  const { tree, decisions, finish } = grownTree();
  const step = new QualityStep(meanLogprobHead(), options('arrol', true, 64), () => 0, new Rng(1));
  assert.equal(step.hook!.prune!(tree, decisions, 1), undefined);
  assert.equal(step.hook!.predict(tree, decisions), undefined);
  finish();
  const info = step.learn([tree]);
  assert.equal(info.head_auc, 23 / 24, 'the all-node AUC is measured as soon as the head has examples');
  assert.equal('head_auc_at_decision' in info, false);
  assert.equal('head_decision_nodes' in info, false);
});

test('decisionAuc: hand-made decision scores, other trees and unlabelled nodes ignored', () => {
  const { tree, decisions, finish } = grownTree();
  finish();
  const other = createTree('other', 'item', [9]);
  addNode(other, '0', { tokens: [1], finishReason: 'stop' }).reward = 1;
  const decided = new Map([
    // d1 ✓ 0.2, d2 ✗ 0.9, d3 ✗ 0.1, d4 ✓ 0.5, d5 (pruned) 1.0: positives win 2 of 4 pairs
    [tree.id, new Map(decisions.map((id, i) => [id, [0.2, 0.9, 0.1, 0.5, 1][i]]))],
    ['absent', new Map([['0.0', 0.3]])],
  ]);
  assert.deepEqual(decisionAuc([tree, other], decided), { auc: 2 / 4, nodes: 4 });
  // an incomplete tree has no labels yet
  const open = createTree('open', 'item', [9]);
  const n = addNode(open, '0', { tokens: [1] });
  assert.deepEqual(decisionAuc([open], new Map([['open', new Map([[n.id, 0.4]])]])), { auc: undefined, nodes: 0 });
});
