import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { addNode, createTree, isComplete, leaves, type TreeNode } from '../../src/core/tree.js';
import { auc, brier, freshHead, nodeLabels, predict, train } from '../../src/control/quality-head.js';
import { choosePruned, keepProbabilities, pruneOptionsSchema, type ArrolOptions } from '../../src/control/prune.js';
import { allocate, generatorFromConfig } from '../../src/generate/index.js';
import { ScriptedTreeSampler } from '../generate/scripted.js';
import { growOne } from '../../testkit/control/grown-tree.js';

const close = (a: number, b: number, tol = 1e-6) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test('AUC (ties ½) and Brier score by hand', () => {
  assert.equal(auc([0.9, 0.8, 0.3, 0.8], [1, 1, 0, 0]), 3.5 / 4);
  assert.equal(auc([0.2, 0.1], [1, 1]), undefined, 'one class only');
  assert.equal(brier([1, 0], [1, 1]), 0.5);
  assert.equal(brier([], []), undefined);
});

test('the quality head learns a separable problem and its state round-trips through JSON', () => {
  const rng = new Rng(3);
  const xs: number[][] = [];
  const ys: number[] = [];
  for (let i = 0; i < 400; i++) {
    const y = i % 2;
    xs.push([y * 2 - 1 + 0.5 * rng.normal(), rng.normal(), 0, 0, 0.5, 0.3]);
    ys.push(y);
  }
  const head = freshHead();
  assert.equal(predict(head, xs[0]), 0.5, 'an untrained head says 0.5');
  train(head, xs.slice(0, 300), ys.slice(0, 300), { learningRate: 0.05, epochs: 3, l2: 0 });
  const p = xs.slice(300).map((x) => predict(head, x));
  assert.ok(auc(p, ys.slice(300))! > 0.95, `held-out AUC ${auc(p, ys.slice(300))}`);
  assert.ok(brier(p, ys.slice(300))! < 0.12);
  const copy = JSON.parse(JSON.stringify(head));
  assert.deepEqual(
    xs.slice(300).map((x) => predict(copy, x)),
    p,
  );
});

test('node labels: the share of correct leaves below each node', () => {
  const t = createTree('t', 'q', [1]);
  const a = addNode(t, '0', { tokens: [2] });
  addNode(t, a.id, { tokens: [3], finishReason: 'stop' }).reward = 1;
  addNode(t, a.id, { tokens: [4], finishReason: 'stop' }).reward = 0;
  addNode(t, '0', { tokens: [5], finishReason: 'stop' }).reward = 1;
  assert.deepEqual(Object.fromEntries(nodeLabels(t)), { '0.0': 0.5, '0.0.0': 1, '0.0.1': 0, '0.1': 1 });
});

test('ARRoL keep probabilities: clip(κ + δ + λ(ρ − q), 0.1, 0.9) with mean κ (δ by bisection)', () => {
  const o = { keep: 0.5, target: 0.5, strength: 0.5, delta: 'group' as const };
  keepProbabilities([0.9, 0.1], o).forEach((p, i) => close(p, [0.3, 0.7][i]));
  keepProbabilities([1, 1], o).forEach((p) => close(p, 0.5));
  // λ = 2: three clear failures and one success; the success is clipped at 0.1, δ = −0.8667
  keepProbabilities([0, 0, 0, 1], { ...o, strength: 2 }).forEach((p, i) =>
    close(p, [0.6333333, 0.6333333, 0.6333333, 0.1][i]),
  );
});

test('choosePruned keeps at least minKeep paths, restoring the likeliest-kept ones', () => {
  const o = pruneOptionsSchema.parse({ kind: 'arrol', minKeep: 3 }) as ArrolOptions;
  for (let s = 0; s < 30; s++) {
    const drop = choosePruned([0.9, 0.1, 0.5, 0.2], o, new Rng(s));
    assert.ok(drop.filter((d) => !d).length >= 3);
  }
  // keep probabilities [0.3, 0.7, 0.5, 0.65]: when only one survives the draw, 0.7 and 0.65 come back first
  const never = { next: () => 0.99 } as unknown as Rng;
  assert.deepEqual(choosePruned([0.9, 0.1, 0.5, 0.2], { ...o, minKeep: 2 }, never), [true, false, true, false]);
});

test('value allocation: branch budget by exp(−|p − 0.5| / τ), largest remainders', () => {
  const paths = [0, 1, 2].map((i) => ({ id: `n${i}` }) as TreeNode);
  // weights [1, e^-0.4, e^-0.4]: exact 1 + 5·w/Σw = [3.136, 2.432, 2.432]
  assert.deepEqual(allocate(paths, 8, { allocation: 'value', allocationTemperature: 1 }, [0.5, 0.9, 0.1]), [3, 3, 2]);
  assert.throws(() => allocate(paths, 8, { allocation: 'value', allocationTemperature: 1 }), /one prediction per path/);
});

test('treepo with a pruning hook: pruned paths leave the tree, their slots are freed, the tree stays complete', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 8,
    segmentLength: 3,
    branchingFactor: 2,
    initialDivergence: 4,
  });
  const calls: Array<{ round: number; n: number }> = [];
  const { trees, stats } = await growOne(g, new ScriptedTreeSampler(0.02), 5, {
    predict: () => undefined,
    prune: (_tree, ids, round) => {
      calls.push({ round, n: ids.length });
      return round === 0 ? ids.map((_, i) => i < 2) : undefined;
    },
  });
  const t = trees[0];
  assert.deepEqual(t.meta?.pruned, { paths: 2, tokens: 6 }, 'two 3-token paths pruned after the first round');
  assert.equal(calls[0].round, 0);
  assert.equal(calls[0].n, 4);
  assert.ok(isComplete(t));
  // 4 paths, 2 pruned: half of the 8 open slots are freed
  assert.equal(leaves(t).length, 4);
  assert.equal(stats.trajectories, 4);
  assert.equal(t.nodes['0'].children.length, 2);
});
