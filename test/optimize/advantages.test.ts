import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import {
  advantagesFromConfig,
  buildDatums,
  computeAdvantages,
  drGrpoAdvantages,
  grpoAdvantages,
  mcGrpoAdvantages,
  rlooAdvantages,
  treeLeafAdvantages,
  whitenTokenWeighted,
  lossFromConfig,
  policyLossReference,
} from '../../src/optimize/index.js';
import { policyTokenLoss } from '../../src/engine/model/losses.js';
import { ConfigError } from '../../src/core/errors.js';

const near = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} vs ${b}`);

test('flat estimators: hand-computed groups, ties, all-equal, G=1', () => {
  const g = grpoAdvantages([1, 0, 0, 1]);
  // mean 0.5, unbiased std sqrt(1/3)
  near(g[0], 0.5 / (Math.sqrt(1 / 3) + 1e-6), 1e-9);
  near(g[1], -0.5 / (Math.sqrt(1 / 3) + 1e-6), 1e-9);
  assert.deepEqual(grpoAdvantages([1, 1, 1]), [0, 0, 0]);
  assert.deepEqual(grpoAdvantages([1]), [0]);
  assert.deepEqual(drGrpoAdvantages([1, 0, 0, 1]), [0.5, -0.5, -0.5, 0.5]);
  assert.deepEqual(rlooAdvantages([1, 0, 0]), [1, -0.5, -0.5]);
  const mc = mcGrpoAdvantages([0, 1, 1]);
  assert.equal(mc.pivot, 1, 'the first median index is the pivot');
  assert.deepEqual(mc.advantages, [-1, 0, 0]);
  const even = mcGrpoAdvantages([0, 1, 3, 4]);
  assert.equal(even.pivot, -1);
  assert.deepEqual(even.advantages, [-2, -1, 1, 2]);
});

/** The worked example tree of treepo-reference.md §2.5. */
function workedExample(): RolloutTree {
  const t = createTree('t', 'i', [1]);
  const leaf = (parent: string, reward: number) => {
    const n = addNode(t, parent, { tokens: [2], finishReason: 'stop' });
    n.reward = reward;
    return n;
  };
  const a = leaf('0', -1);
  const b = leaf('0', 1);
  const c = addNode(t, '0', { tokens: [3] });
  const c1 = addNode(t, c.id, { tokens: [4] });
  const c2 = addNode(t, c.id, { tokens: [4] });
  const c11 = leaf(c1.id, -1),
    c12 = leaf(c1.id, -1);
  const c21 = leaf(c2.id, 1),
    c22 = leaf(c2.id, 1),
    c23 = leaf(c2.id, -1);
  const c3 = leaf(c.id, -1);
  void [a, b, c11, c12, c21, c22, c23, c3];
  return t;
}

test('tree advantage: the worked example of treepo-reference.md §2.5', () => {
  const t = workedExample();
  const adv = treeLeafAdvantages(t, 'average');
  // ids: a 0.0, b 0.1, c 0.2, c1 0.2.0, c2 0.2.1, c11 0.2.0.0, c12 0.2.0.1, c21..c23 0.2.1.0-2, c3 0.2.2
  near(adv.get('0.2.1.1')!, 1.0833333333333333, 1e-9); // c22
  near(adv.get('0.2.1.2')!, -0.9166666666666666, 1e-9); // c23
  near(adv.get('0.0')!, -0.75, 1e-12); // a
  near(adv.get('0.2.0.0')!, (-0.75 + -2 / 3 + 0) / 3, 1e-9); // c11: root, c-group, c1-group (mean -1 → term 0)
  near(adv.get('0.2.0.0')!, -0.4722222222, 1e-9);
  near(adv.get('0.2.2')!, -0.7083333333, 1e-9); // c3: root and c-group only
  // group_size weighting: c22 = (8·1.25 + 6·1.333 + 3·0.667) / 17
  near(treeLeafAdvantages(t, 'group_size').get('0.2.1.1')!, (8 * 1.25 + 6 * (4 / 3) + 3 * (2 / 3)) / 17, 1e-9);
});

test('tree advantage is whitened over policy tokens (token-weighted, Bessel)', () => {
  const t = workedExample();
  const out = computeAdvantages([t], { kind: 'tree' });
  const tokens = out.map((a) => a.trajectory.tokens.length);
  const n = tokens.reduce((a, b) => a + b, 0);
  const mean = out.reduce((s, a, i) => s + a.advantage * tokens[i], 0) / n;
  const variance = out.reduce((s, a, i) => s + tokens[i] * (a.advantage - mean) ** 2, 0) / (n - 1);
  near(mean, 0, 1e-9);
  near(variance, 1, 1e-6);
  assert.deepEqual(
    whitenTokenWeighted([1, 1], [1, 1]).map((x) => Math.round(x * 1e6)),
    [0, 0],
  );
});

test('segment-level tree advantage: value(node) − value(parent) tiled on each segment', () => {
  const t = createTree('t', 'i', [1]);
  const x = addNode(t, '0', { tokens: [5, 5] });
  const l1 = addNode(t, x.id, { tokens: [6], finishReason: 'stop' });
  const l2 = addNode(t, x.id, { tokens: [7], finishReason: 'stop' });
  const l3 = addNode(t, '0', { tokens: [8, 8, 8], finishReason: 'stop' });
  l1.reward = 1;
  l2.reward = 0;
  l3.reward = 0;
  const out = computeAdvantages([t], { kind: 'tree', level: 'segment', whiten: false });
  // values: x = 0.5, root = mean(x, l3) = 0.25
  assert.deepEqual(out[0].tokenAdvantages, [0.25, 0.25, 0.5]);
  assert.deepEqual(out[1].tokenAdvantages, [0.25, 0.25, -0.5]);
  assert.deepEqual(out[2].tokenAdvantages, [-0.25, -0.25, -0.25]);
});

test('datums: alignment, masks and aggregation weights on a hand-built tree', () => {
  const t = createTree('t', 'i', [1, 2]);
  const a = addNode(t, '0', { tokens: [3, 4], logprobs: [-0.1, -0.2], finishReason: 'stop' });
  const b = addNode(t, '0', { tokens: [5], logprobs: [-0.3], mask: [0], finishReason: 'stop' });
  a.reward = 1;
  b.reward = 0;
  const adv = computeAdvantages([t], { kind: 'dr_grpo' });
  const [d1, d2] = buildDatums(adv, { aggregation: 'token_mean', maxResponseTokens: 10 });
  assert.deepEqual(d1.inputTokens, [1, 2, 3]);
  assert.deepEqual(d1.targetTokens, [2, 3, 4]);
  assert.deepEqual(d1.weights, [0, 0.5, 0.5], 'two policy tokens in the batch (b is masked)');
  assert.deepEqual(d1.samplingLogprobs, [0, -0.1, -0.2]);
  assert.deepEqual(d1.advantages, [0, 0.5, 0.5]);
  assert.deepEqual(d2.weights, [0, 0]);
  const seq = buildDatums(adv, { aggregation: 'seq_mean_token_mean', maxResponseTokens: 10 });
  assert.deepEqual(seq[0].weights, [0, 0.25, 0.25]);
  const sum = buildDatums(adv, { aggregation: 'token_sum_norm', maxResponseTokens: 10 });
  assert.deepEqual(sum[0].weights, [0, 0.05, 0.05]);
  // mc_grpo pivot gets no datum
  const t3 = createTree('u', 'i', [1]);
  for (const r of [0, 1, 1]) addNode(t3, '0', { tokens: [2], finishReason: 'stop' }).reward = r;
  assert.equal(
    buildDatums(computeAdvantages([t3], { kind: 'mc_grpo' }), { aggregation: 'token_mean', maxResponseTokens: 4 })
      .length,
    2,
  );
});

test('loss config and the engine token loss agree with the reference formula', () => {
  const { loss } = lossFromConfig({ kind: 'ppo_clip', clipLow: 0.2, clipHigh: 0.28, dualClip: 3 });
  for (const [lp, b, A] of [
    [-1, -1.5, 1],
    [-1, -0.5, 1],
    [-1, -1.5, -2],
    [-1, -0.5, -2],
    [-2, -0.1, -1],
    [-0.1, -3, -1],
  ]) {
    const [engine] = policyTokenLoss(loss, lp, b, A);
    near(engine, policyLossReference('ppo_clip', lp, b, A, 0.2, 0.28, 3), 1e-12);
  }
  // hand-computed: ratio e^0.5 = 1.6487 > 1.28 with A = 1 → clipped objective 1.28
  near(policyLossReference('ppo_clip', -1, -1.5, 1), -1.28, 1e-12);
  // dual clip: A = -1, ratio e^1.9 = 6.69 → min(-6.69, -1.28) = -6.69, max with 3·(-1) = -3 → loss 3
  near(policyLossReference('ppo_clip', -2 + 1.9 + 0.1 - 0.1, -2 + 0.1 - 0.1, -1, 0.2, 0.28, 3), 3, 1e-12);
  assert.throws(
    () => lossFromConfig({ kind: 'ppo', clipLow: 0.2 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'optimize.loss.kind' && /received 'ppo'/.test(e.message),
  );
  assert.throws(
    () => lossFromConfig({ kind: 'ppo_clip', clipLo: 0.2 }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'optimize.loss.clipLo' &&
      /^optimize\.loss\.clipLo: .*'clipLo'/.test(e.message),
  );
});

test('advantage config errors name the key', () => {
  assert.throws(
    () => advantagesFromConfig({ kind: 'tree', levle: 'segment' }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'optimize.advantage.levle' &&
      /^optimize\.advantage\.levle: .*'levle'/.test(e.message),
  );
  assert.throws(
    () => advantagesFromConfig({ kind: 'treee' }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'optimize.advantage.kind' && /received 'treee'/.test(e.message),
  );
});
