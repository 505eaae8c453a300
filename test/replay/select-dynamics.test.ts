/** Selection by training dynamics (replay/select-dynamics.ts): LIMR scores, S2L k-means + balanced sampling, curve binning. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import { ConfigError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import {
  alignCurves,
  binCurves,
  dynamicsSelectFromConfig,
  histogram,
  kMeans,
  learningCurve,
  limrScores,
  s2lSample,
  selectByDynamics,
  stepItemRewards,
  type RewardCurves,
} from '../../src/replay/select-dynamics.js';

const near = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} vs ${b}`);

function tree(item: string, rewards: Array<number | undefined>, meta?: Record<string, unknown>): RolloutTree {
  const t = createTree(`t-${item}`, item, [1], meta);
  for (const r of rewards) {
    const n = addNode(t, '0', { tokens: [2], finishReason: 'stop' });
    if (r !== undefined) n.reward = r;
  }
  return t;
}

const curves = (m: Record<string, Array<[number, number]>>): RewardCurves =>
  new Map(Object.entries(m).map(([id, c]) => [id, c.map(([step, reward]) => ({ step, reward }))]));

test("per-step item reward: mean over the item's leaves (all its trees), hinted trees and unscored leaves left out", () => {
  const r = stepItemRewards([
    tree('a', [1, 0, undefined]),
    tree('a', [1]),
    tree('b', [0.5]),
    tree('c', [1], { hint: { kind: 'response', text: 'x', tokens: 1 } }),
  ]);
  near(r.get('a')!, 2 / 3);
  near(r.get('b')!, 0.5);
  assert.equal(r.has('c'), false);
});

test('curves binned by visit or by steps; LIMR gap rule and median length', () => {
  const c = curves({
    a: [
      [1, 0],
      [4, 1],
      [7, 1],
    ],
    b: [
      [2, 0.5],
      [8, 1],
    ],
    d: [[3, 1]],
  });
  assert.deepEqual(binCurves(c).get('a'), [0, 1, 1]);
  const bySteps = binCurves(c, 3); // first step 1: bins [1-3], [4-6], [7-9]
  assert.deepEqual(bySteps.get('a'), [0, 1, 1]);
  assert.deepEqual(bySteps.get('b'), [0.5, undefined, 1]);
  const aligned = alignCurves(bySteps);
  assert.equal(aligned.bins, 3, 'median of lengths [1, 3, 3]');
  assert.deepEqual(aligned.ids, ['a', 'b']);
  assert.deepEqual(aligned.rows[1], [0.5, 1, 1], "a missing bin takes the next bin's value");
  assert.deepEqual(aligned.dropped, ['d']);
  const two = alignCurves(binCurves(c), 2);
  assert.deepEqual(two.ids, ['a', 'b']);
  assert.deepEqual(two.rows, [
    [0, 1],
    [0.5, 1],
  ]);
});

test("LIMR scores: hand-computed, best for the curve that follows the run's learning curve", () => {
  const rows = [
    [0, 1],
    [1, 1],
    [0, 0],
  ];
  assert.deepEqual(learningCurve(rows), [1 / 3, 2 / 3]);
  // normaliser (1 − 1/3)² + (1 − 2/3)² = 5/9
  const s = limrScores(rows);
  near(s[0], 1 - 2 / 9 / (5 / 9));
  near(s[1], 0);
  near(s[2], 0);
  near(
    limrScores([
      [0.2, 0.6],
      [0.2, 0.6],
    ])[0],
    1,
    1e-12,
  );
  // maxReward rescales the normaliser: rewards in [−1, 1]
  const wide = limrScores(
    [
      [-1, 1],
      [1, 1],
      [-1, -1],
    ],
    1,
  );
  near(wide[0], 1 - 8 / 9 / (20 / 9));
  // all items always solved: r̄ ≡ R, zero deviation → 1
  assert.deepEqual(
    limrScores([
      [1, 1],
      [1, 1],
    ]),
    [1, 1],
  );
});

test('k-means: seeded, separates two clear groups; fewer distinct points than k', () => {
  const rows = [
    [0, 0],
    [0, 0.1],
    [0.1, 0],
    [1, 1],
    [1, 0.9],
    [0.9, 1],
  ];
  const a = kMeans(rows, 2, new Rng(3));
  assert.equal(new Set(a.assign.slice(0, 3)).size, 1);
  assert.equal(new Set(a.assign.slice(3)).size, 1);
  assert.notEqual(a.assign[0], a.assign[3]);
  assert.deepEqual(kMeans(rows, 2, new Rng(3)).assign, a.assign, 'same seed, same clustering');
  const same = kMeans(
    [
      [1, 1],
      [1, 1],
      [1, 1],
    ],
    3,
    new Rng(0),
  );
  assert.equal(same.centres.length, 1);
  assert.deepEqual(same.assign, [0, 0, 0]);
});

test('S2L balanced sampling: smallest clusters first, budget spread evenly', () => {
  // cluster sizes: 0 → 6, 1 → 1, 2 → 3
  const assign = [0, 0, 0, 0, 0, 0, 1, 2, 2, 2];
  const chosen = s2lSample(assign, 6, new Rng(1));
  const per = [0, 1, 2].map((c) => chosen.filter((i) => assign[i] === c).length);
  // order 1 (size 1), 2 (size 3), 0 (size 6): min(1, ⌊6/3⌋) = 1, min(3, ⌊5/2⌋) = 2, min(6, ⌊3/1⌋) = 3
  assert.deepEqual(per, [3, 1, 2]);
  assert.equal(new Set(chosen).size, 6);
  assert.deepEqual(s2lSample(assign, 6, new Rng(1)), chosen, 'seeded');
  assert.equal(s2lSample(assign, 100, new Rng(1)).length, 10, 'a budget over the pool keeps everything');
});

test('selectByDynamics: limr top-k and threshold; s2l needs a budget; options bounded', () => {
  const c = curves({
    learn: [
      [1, 0],
      [2, 0.5],
      [3, 1],
    ],
    easy: [
      [1, 1],
      [2, 1],
      [3, 1],
    ],
    hard: [
      [1, 0],
      [2, 0],
      [3, 0],
    ],
    mid: [
      [1, 0],
      [2, 0.5],
      [3, 0.5],
    ],
  });
  // learning curve [0.25, 0.5, 0.625], normaliser 0.953125: mid 1 − 0.078125/0.953125 ≈ 0.918,
  // learn 1 − 0.203125/0.953125 ≈ 0.787, hard ≈ 0.262, easy 0
  const top = selectByDynamics(c, { method: 'limr', top: 2 });
  assert.deepEqual(
    top.ranked.map((r) => r.id),
    ['mid', 'learn', 'hard', 'easy'],
  );
  assert.deepEqual(
    top.ranked.filter((r) => r.chosen).map((r) => r.id),
    ['mid', 'learn'],
  );
  near(top.ranked[1].score, 1 - 0.203125 / 0.953125);
  near(top.ranked[3].score, 0);
  const thr = selectByDynamics(c, { method: 'limr', threshold: 0.8 });
  assert.deepEqual(
    thr.ranked.filter((r) => r.chosen).map((r) => r.id),
    ['mid'],
  );
  assert.deepEqual(
    selectByDynamics(c)
      .ranked.filter((r) => r.chosen)
      .map((r) => r.id),
    ['mid', 'learn'],
    'default: LIMR threshold 0.6',
  );
  const s2l = selectByDynamics(c, { method: 's2l', top: 2, clusters: 2 });
  assert.equal(s2l.ranked.filter((r) => r.chosen).length, 2);
  assert.deepEqual(
    s2l.clusterSizes!.reduce((a, b) => a + b, 0),
    4,
  );
  assert.throws(
    () => selectByDynamics(c, { method: 's2l' }),
    (e: unknown) => e instanceof ConfigError && /select\.top/.test((e as Error).message),
  );
  assert.throws(
    () => dynamicsSelectFromConfig({ clusters: 0 }),
    (e: unknown) => e instanceof ConfigError && /clusters/.test((e as Error).message),
  );
  assert.throws(
    () => dynamicsSelectFromConfig({ method: 'random' }),
    (e: unknown) => e instanceof ConfigError && /method/.test((e as Error).message),
  );
});

test('histogram: equal-width bins, last bin closed', () => {
  assert.deepEqual(histogram([0, 0.1, 0.5, 1], 2).counts, [2, 2]);
  assert.deepEqual(histogram([2, 2], 3).counts, [2, 0, 0]);
});
