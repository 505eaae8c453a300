import { test } from 'node:test';
import { grownTree as grownTreeWith, growOne, meanLogprobHead } from '../../testkit/control/grown-tree.js';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { ConfigError } from '../../src/core/errors.js';
import { isComplete, leaves } from '../../src/core/tree.js';
import {
  calibrated,
  calibrationBin,
  feedCalibrator,
  freshCalibrator,
  freshHead,
  qualityHeadSchema,
  type QualityHeadState,
} from '../../src/control/quality-head.js';
import { keepProbabilities, pruneOptionsSchema } from '../../src/control/prune.js';
import { QualityStep, type QualityStepOptions } from '../../src/control/quality-step.js';
import { generatorFromConfig } from '../../src/generate/index.js';
import { ScriptedTreeSampler } from '../generate/scripted.js';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

const grownTree = () => grownTreeWith(() => -1);
const RAW = [-0.55, -0.75, -0.65, -0.7, -0.6].map(sigmoid);

function options(prune: Record<string, unknown>, warmup = 0): QualityStepOptions {
  return {
    head: qualityHeadSchema.parse({ warmup, hidden: false }),
    prune: pruneOptionsSchema.parse({ kind: 'arrol', atRound: 1, ...prune }),
    valueAllocation: false,
    maxResponseTokens: 16,
    samplerHiddenSize: 0,
    samplerEntropy: false,
  };
}

test('calibrator: Laplace (sum + 1) / (n + 2) per equal-width bin, fractional labels add to the sum', () => {
  const c = freshCalibrator(128);
  close(calibrated(c, 0.9), 0.5, 0);
  feedCalibrator(c, new Array(10).fill(0.9), new Array(10).fill(0));
  close(calibrated(c, 0.9), 1 / 12);
  close(calibrated(c, 0.9 + 0.5 / 128), 1 / 12, 0); // same bin (115)
  close(calibrated(c, 0.5), 0.5, 0); // a bin without data stays at the prior
  feedCalibrator(c, [0.2, 0.2, 0.2], [0.75, 0.25, 1]);
  close(calibrated(c, 0.2), 3 / 5);
  assert.equal(calibrationBin(c, 0), 0);
  assert.equal(calibrationBin(c, 1), 127, 'a score of exactly 1 falls in the last bin');
  assert.equal(calibrationBin(c, 0.9), 115);
  assert.throws(() => feedCalibrator(c, [0.1], []), /1 scores for 0 labels/);
});

test('delta fixed: δ = 0, p = clip(κ + λ(ρ − q), 0.1, 0.9); a group the head is sure of keeps more', () => {
  const o = { keep: 0.5, target: 0.5, strength: 0.5 };
  keepProbabilities([0.9, 0.1, 0.5, 0, 1], { ...o, delta: 'fixed' }).forEach((p, i) =>
    close(p, [0.3, 0.7, 0.5, 0.75, 0.25][i]),
  );
  keepProbabilities([0.9, 0.0], { ...o, strength: 2, delta: 'fixed' }).forEach((p, i) => close(p, [0.1, 0.9][i]));
  // a group the head believes is failing: fixed keeps 0.7 of it, group pulls the mean back to κ
  keepProbabilities([0.1, 0.1, 0.1], { ...o, delta: 'fixed' }).forEach((p) => close(p, 0.7));
  keepProbabilities([0.1, 0.1, 0.1], { ...o, delta: 'group' }).forEach((p) => close(p, 0.5, 1e-6));
  assert.deepEqual(pruneOptionsSchema.parse({ kind: 'arrol' }), {
    kind: 'arrol',
    atRound: 1,
    keep: 0.5,
    target: 0.5,
    strength: 0.5,
    minKeep: 2,
    delta: 'group',
    calibrate: true,
    calibrationBins: 128,
  });
  assert.throws(() => pruneOptionsSchema.parse({ kind: 'arrol', calibrationBins: 1 }), /calibrationBins/);
  assert.throws(() => pruneOptionsSchema.parse({ kind: 'arrol', delta: 'none' }), /delta/);
});

test('an over-confident head: calibrated keep probabilities differ from raw ones and change the draw', () => {
  // the head says 0.32..0.37 for every path, but every path with such a score so far failed
  const overconfident = () => {
    const head = meanLogprobHead();
    head.calibration = { sums: new Array(128).fill(0), counts: new Array(128).fill(100) };
    return head;
  };
  const at06 = { next: () => 0.6 } as unknown as Rng;
  const run = (calibrate: boolean) => {
    const { tree, decisions } = grownTree();
    const step = new QualityStep(overconfident(), options({ calibrate, delta: 'fixed', minKeep: 1 }), () => 0, at06);
    const drop = step.hook!.prune!(tree, decisions, 1);
    return { drop, values: decisions.map((id) => tree.nodes[id].value!), raw: step.decided.get(tree.id)! };
  };
  const cal = run(true);
  const raw = run(false);
  cal.values.forEach((v) => close(v, 1 / 102));
  raw.values.forEach((v, i) => close(v, RAW[i]));
  // decision-time scores stay raw either way (the calibrator and head_auc_at_decision read them)
  assert.deepEqual([...cal.raw.values()], [...raw.raw.values()]);
  [...cal.raw.values()].forEach((v, i) => close(v, RAW[i]));
  // calibrated p = 0.5 + 0.5·(0.5 − 1/102) ≈ 0.745 > 0.6: all kept; raw p = 0.567..0.589 < 0.6: all drawn out,
  // minKeep 1 restores the likeliest kept (d2, the lowest raw score)
  assert.deepEqual(cal.drop, [false, false, false, false, false]);
  assert.deepEqual(raw.drop, [true, false, true, true, true]);
});

test('learn feeds the decision-time raw scores against the labels of the nodes before the head trains', () => {
  const { tree, decisions, finish } = grownTree();
  const step = new QualityStep(meanLogprobHead(), options({}), () => 0, new Rng(1));
  const head = step.state!;
  assert.equal(head.calibration?.counts.length, 128, 'a fresh head gets a fresh calibrator');
  step.hook!.prune!(tree, decisions, 1);
  finish();
  const weights = head.w.slice();
  const info = step.learn([tree]);
  assert.notDeepEqual(head.w, weights, 'the head trained');
  assert.equal(info.head_calibration_examples, 4, 'd1..d4 labelled; d5 was pruned and has no label');
  const c = head.calibration!;
  // d1 ✓, d2 ✗, d3 ✗, d4 ✓ at their decision-time raw scores (bins 46, 41, 43, 42)
  assert.deepEqual(
    RAW.slice(0, 4).map((r) => calibrationBin(c, r)),
    [46, 41, 43, 42],
  );
  [2 / 3, 1 / 3, 1 / 3, 2 / 3].forEach((q, i) => close(calibrated(c, RAW[i]), q));
  assert.equal(
    c.counts.reduce((a, n) => a + n, 0),
    4,
  );
  // a second step keeps counting
  const again = grownTree();
  const step2 = new QualityStep(head, options({}), () => 0, new Rng(2));
  step2.hook!.prune!(again.tree, again.decisions, 1);
  again.finish();
  assert.equal(step2.learn([again.tree]).head_calibration_examples, 8);
});

test('an old saved head without a calibrator loads (fresh calibrator); a different bin count is a config error', () => {
  const saved = JSON.parse(JSON.stringify(meanLogprobHead())) as QualityHeadState;
  assert.equal(saved.calibration, undefined);
  const step = new QualityStep(saved, options({ calibrationBins: 64 }), () => 0, new Rng(1));
  assert.deepEqual(step.state!.calibration, freshCalibrator(64));
  const { tree, decisions, finish } = grownTree();
  step.hook!.prune!(tree, decisions, 1);
  finish();
  step.learn([tree]);
  const roundTrip = JSON.parse(JSON.stringify(step.state)) as QualityHeadState;
  assert.deepEqual(roundTrip.calibration, step.state!.calibration, 'the calibrator is plain JSON');
  assert.throws(
    () => new QualityStep(roundTrip, options({ calibrationBins: 128 }), () => 0, new Rng(1)),
    (e: unknown) => e instanceof ConfigError && e.path === 'prune.calibrationBins' && /64 bins/.test(e.message),
  );
  // without ARRoL the head is used as it is, its calibrator untouched
  const valueOnly = new QualityStep(
    roundTrip,
    { ...options({}), prune: { kind: 'none' }, valueAllocation: true },
    () => 0,
    new Rng(1),
  );
  assert.deepEqual(valueOnly.learn([]).head_calibration_examples, 4);
});

test('over-sampling: TreePO G = 16 with ARRoL through the real hook; pruned paths are counted once each', async () => {
  let seen = 0;
  for (let seed = 0; seed < 4; seed++) {
    const g = generatorFromConfig({
      kind: 'treepo',
      groupSize: 16,
      segmentLength: 3,
      branchingFactor: 2,
      initialDivergence: 16,
    });
    const step = new QualityStep(freshHead(0), options({ atRound: 0 }), () => 0, new Rng(seed));
    const drops: boolean[][] = [];
    const calls: number[] = [];
    const hook = step.hook!;
    // no path ends early: all 16 reach the pruning round
    const { trees, stats } = await growOne(g, new ScriptedTreeSampler(0), seed, {
      ...hook,
      prune: (tree, ids, round) => {
        calls.push(ids.length);
        const drop = hook.prune!(tree, ids, round);
        if (drop) drops.push(drop);
        return drop;
      },
    });
    const t = trees[0];
    assert.equal(calls[0], 16, 'sixteen live paths after the first segment');
    assert.equal(drops.length, 1, 'one pruning round');
    assert.equal(drops[0].length, 16);
    const pruned = drops[0].filter(Boolean).length;
    assert.ok(pruned <= 14, 'minKeep 2 survive');
    const meta = t.meta?.pruned as { paths: number; tokens: number } | undefined;
    assert.equal(meta?.paths ?? 0, pruned, 'meta.pruned.paths (summed into pruned_paths) counts each pruned path');
    if (pruned) assert.ok(meta!.tokens >= 3 * pruned, 'each pruned path had its 3-token segment');
    assert.ok(isComplete(t));
    assert.equal(leaves(t).length, stats.trajectories);
    assert.equal(t.nodes['0'].children.length, 16 - pruned, 'pruned first-round paths left the tree');
    // the head is fresh: every score is ½, which is also the calibrated score of an empty bin
    [...step.decidedAtPrune.get(t.id)!.values()].forEach((q) => close(q, 0.5, 0));
    seen += pruned;
  }
  assert.ok(seen > 0, 'some paths were pruned in four groups of 16');
});
