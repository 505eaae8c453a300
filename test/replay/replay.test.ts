import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import { Rng } from '../../src/core/rng.js';
import { DataError } from '../../src/core/errors.js';
import type { Datum } from '../../src/engine/types.js';
import { computeAdvantages, buildDatums } from '../../src/optimize/index.js';
import {
  Replay,
  ReplayBuffer,
  StepCorrection,
  effectiveSampleSize,
  isZeroVariance,
  replayOptionsSchema,
  weighReplayed,
  type ReplayCorrection,
} from '../../src/replay/replay.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';

/** A GRPO group: one tree, one leaf per reward, each leaf `len` tokens generated at `version`. */
function group(id: string, itemId: string, rewards: number[], version = 0, len = 2): RolloutTree {
  const t = createTree(id, itemId, [1, 2]);
  rewards.forEach((r, k) => {
    const n = addNode(t, '0', {
      tokens: Array.from({ length: len }, (_, i) => 3 + i + k),
      logprobs: Array.from({ length: len }, () => -1),
      weightVersion: version,
      finishReason: 'stop',
    });
    n.reward = r;
  });
  return t;
}
const entry = (tree: RolloutTree, step: number, score = 0) => ({ tree, step, score });

test('FIFO buffer keeps the newest `capacity` entries, one per prompt when asked; the age filter drops old trees', () => {
  const b = new ReplayBuffer(3);
  for (let i = 0; i < 5; i++) b.add([entry(group(`t${i}`, `p${i}`, [0, 1], i), i)]);
  assert.deepEqual(
    b.entries.map((e) => e.tree.id),
    ['t2', 't3', 't4'],
  );
  // at version 5 the trees of versions 2, 3, 4 are 3, 2, 1 versions old
  assert.equal(b.evictOlderThan(5, 2), 1);
  assert.deepEqual(
    b.entries.map((e) => e.tree.id),
    ['t3', 't4'],
  );
  const perPrompt = new ReplayBuffer(10, 'fifo', true);
  perPrompt.add([
    entry(group('a1', 'p', [0, 1]), 1),
    entry(group('b1', 'q', [0, 1]), 1),
    entry(group('a2', 'p', [1, 0]), 2),
  ]);
  assert.deepEqual(
    perPrompt.entries.map((e) => e.tree.id),
    ['b1', 'a2'],
  );
});

test('top buffer keeps the highest scores (a new entry only replaces the lowest if it beats it); score sampling is without replacement', () => {
  const b = new ReplayBuffer(2, 'top');
  b.add([
    entry(group('a', 'a', [0, 1]), 1, 1),
    entry(group('b', 'b', [0, 1]), 1, 3),
    entry(group('c', 'c', [0, 1]), 1, 0.5),
    entry(group('d', 'd', [0, 1]), 1, 2),
  ]);
  assert.deepEqual(b.entries.map((e) => e.tree.id).sort(), ['b', 'd']);
  const two = b.sampleByScore(2, new Rng(1));
  assert.deepEqual(two.map((e) => e.tree.id).sort(), ['b', 'd']);
  assert.equal(b.sampleByScore(5, new Rng(1)).length, 5, 'with replacement when more are asked than held');
});

test('effective sample size: (Σw)²/Σw² / n against hand-computed values', () => {
  assert.equal(effectiveSampleSize([1, 1, 1, 1]), 1);
  // (1+2+3+2)² / (1+4+9+4) / 4 = 64 / 72
  assert.ok(Math.abs(effectiveSampleSize([1, 2, 3, 2]) - 64 / 72) < 1e-12);
  // one weight dominates: (10+0+0)²/100/3 = 1/3
  assert.ok(Math.abs(effectiveSampleSize([10, 0, 0]) - 1 / 3) < 1e-12);
  assert.equal(effectiveSampleSize([]), 1);
});

test('replayed datums: advantage × min(exp(lp_now − lp_behaviour), cap); tokens older than maxAge dropped', () => {
  // one datum, targets 0..3; positions 1..3 are policy tokens with behaviour log-prob -1
  const d: Datum = {
    inputTokens: [1, 2, 3, 4],
    targetTokens: [2, 3, 4, 5],
    weights: [0, 0.25, 0.25, 0.25],
    samplingLogprobs: [0, -1, -1, -1],
    advantages: [0, 2, 2, 2],
  };
  const now = [[0, -1.5, -0.2, -1]]; // w = e^-0.5, e^0.8 (> cap 2 → 2), e^0
  const versions = [[NaN, 4, 4, 1]]; // at version 5: ages 1, 1, 4 → the last one is dropped (maxAge 2)
  const r = weighReplayed([d], now, versions, 5, 2, { kind: 'tis', cap: 2 });
  const out = r.datums[0];
  assert.ok(Math.abs(out.advantages![1] - 2 * Math.exp(-0.5)) < 1e-12);
  assert.ok(Math.abs(out.advantages![2] - 2 * 2) < 1e-12, 'capped at 2');
  assert.equal(out.weights[3], 0);
  assert.equal(out.advantages![3], 0);
  assert.equal(r.dropped, 1);
  assert.deepEqual(out.samplingLogprobs, now[0], 'the PPO ratio is then taken against the current policy');
  assert.deepEqual(
    r.weights.map((w) => +w.toFixed(12)),
    [Math.exp(-0.5), Math.exp(0.8)].map((w) => +w.toFixed(12)),
    'raw weights (for the ESS) before the cap',
  );
  assert.deepEqual(r.ages, [1, 1]);
  assert.deepEqual(d.advantages, [0, 2, 2, 2], 'input untouched');
  const dec = weighReplayed([d], now, versions, 5, 10, { kind: 'decoupled', cap: 2 });
  assert.equal(dec.datums[0].weights[2], 0, 'decoupled masks w > cap');
  assert.ok(Math.abs(dec.datums[0].advantages![3] - 2) < 1e-12, 'w = 1 at an unchanged log-prob');
});

test('StepCorrection rewrites only the datums of replayed trees', async () => {
  const fresh = group('fresh', 'a', [0, 1], 3);
  const old = group('old', 'b', [0, 1], 1);
  const chunk = computeAdvantages([fresh, old], { kind: 'grpo' });
  const datums = buildDatums(chunk, { aggregation: 'token_mean', maxResponseTokens: 4 });
  const c = new StepCorrection(new Set(['old']), 3, 2, { kind: 'tis', cap: 2 });
  let asked = 0;
  const out = await c.correct(chunk, datums, async (ds) => {
    asked = ds.length;
    return ds.map((d) => d.targetTokens.map(() => -0.5)); // w = e^0.5 on every replayed token
  });
  assert.equal(asked, 2, "the proximal pass covers the replayed tree's two trajectories only");
  assert.deepEqual(out[0], datums[0]);
  assert.deepEqual(out[1], datums[1]);
  const w = Math.exp(0.5);
  assert.ok(Math.abs(out[2].advantages![2] - datums[2].advantages![2] * w) < 1e-12);
  assert.equal(c.weights.length, 4);
  assert.ok(Math.abs(effectiveSampleSize(c.weights) - 1) < 1e-12);
  assert.deepEqual(c.ages, [2, 2, 2, 2]);
});

/** A learner stub that records the trees and corrections of every call. */
function recorder() {
  const calls: Array<{ ids: string[]; replay?: ReplayCorrection; optimizerStep: number }> = [];
  return {
    calls,
    async train(trees: RolloutTree[], _version: number, optimizerStep: number, replay?: ReplayCorrection) {
      calls.push({ ids: trees.map((t) => t.id), replay, optimizerStep });
      return { metrics: {}, stalenessHistogram: {}, updates: 1, nonFiniteUpdates: 0 };
    },
  };
}

test('replay off (kind none, no substitution) is a plain learner call with no correction and no replay metrics', async () => {
  const r = new Replay(replayOptionsSchema.parse({ kind: 'none' }), 0);
  const l = recorder();
  const out = await r.train(l, [group('1/a', 'a', [0, 1]), group('1/b', 'b', [1, 1])], 0, 7, 1);
  assert.deepEqual(l.calls, [{ ids: ['1/a', '1/b'], replay: undefined, optimizerStep: 7 }]);
  assert.deepEqual(
    Object.keys(out.metrics).filter((k) => k.startsWith('replay_')),
    [],
  );
  assert.equal(r.active, false);
});

test('substitution replaces exactly the zero-variance groups by stored groups with variance', async () => {
  const r = new Replay(replayOptionsSchema.parse({ kind: 'none', substituteZeroVariance: true }), 0);
  const l = recorder();
  const s1 = [group('s1/a', 'a', [0, 1]), group('s1/b', 'b', [1, 0, 1]), group('s1/c', 'c', [1, 1])];
  await r.train(l, s1, 0, 0, 1);
  assert.deepEqual(
    l.calls[0].ids,
    ['s1/a', 's1/b', 's1/c'],
    'nothing stored before step 1: the zero-variance group stays',
  );
  const s2 = [group('s2/d', 'd', [0, 1], 1), group('s2/e', 'e', [0, 0], 1), group('s2/f', 'f', [1, 1], 1)];
  const m = await r.train(l, s2, 1, 1, 2);
  const ids = l.calls[1].ids;
  assert.equal(ids.length, 3);
  assert.ok(ids.includes('s2/d'));
  assert.ok(!ids.includes('s2/e') && !ids.includes('s2/f'), 'both zero-variance groups are replaced');
  assert.deepEqual(ids.filter((i) => i.startsWith('s1/')).sort(), ['s1/a', 's1/b']);
  assert.equal(m.metrics.replay_substituted, 2);
  assert.ok(s2.filter(isZeroVariance).length === 2);
});

test('remix: p/(1−p) stored trees per fresh one, utd updates per batch, none from step onPolicyAfter; recent: the last N steps', async () => {
  const r = new Replay(
    replayOptionsSchema.parse({ kind: 'remix', probability: 0.5, utd: 3, onPolicyAfter: 3, maxAge: 5 }),
    0,
    2,
  );
  const l = recorder();
  await r.train(l, [group('1/a', 'a', [0, 1], 0), group('1/b', 'b', [0, 1], 0)], 0, 0, 1);
  assert.equal(l.calls.length, 3, 'utd 3: three updates of the same batch');
  await r.train(l, [group('2/a', 'a', [0, 1], 1), group('2/b', 'b', [0, 1], 1)], 1, 3, 2);
  assert.deepEqual(
    l.calls.slice(3).map((c) => c.ids.length),
    [4, 4, 4],
    'two fresh + two stored',
  );
  assert.deepEqual(
    l.calls.slice(3).map((c) => c.optimizerStep),
    [2, 2, 2],
    "extra updates share the step's learning rate",
  );
  await r.train(l, [group('3/a', 'a', [0, 1], 2)], 2, 6, 3);
  assert.deepEqual(
    l.calls.slice(6).map((c) => c.ids),
    [['3/a']],
    'on-policy from step 3',
  );
  const rec = new Replay(replayOptionsSchema.parse({ kind: 'recent', steps: 1, maxAge: 1 }), 0);
  const l2 = recorder();
  await rec.train(l2, [group('1/a', 'a', [0, 1], 0)], 0, 0, 1);
  await rec.train(l2, [group('2/a', 'a', [0, 1], 1)], 1, 1, 2);
  await rec.train(l2, [group('3/a', 'a', [0, 1], 2)], 2, 2, 3);
  assert.deepEqual(
    l2.calls.map((c) => c.ids),
    [['1/a'], ['2/a', '1/a'], ['3/a', '2/a']],
  );
});

test('replay buffers save and load exactly; a damaged file names its line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-replay-'));
  const r = new Replay(replayOptionsSchema.parse({ kind: 'dots', substituteZeroVariance: true }), 0);
  await r.train(
    recorder(),
    [group('1/a', 'a', [0, 1]), group('1/b', 'b', [1, 1]), group('1/c', 'c', [0, 1, 1])],
    0,
    0,
    1,
  );
  assert.deepEqual(
    r.main.entries.map((e) => e.tree.id),
    ['1/a', '1/c'],
    'DOTS stores groups with reward variance only',
  );
  r.save(dir);
  const back = Replay.open(r.options, 0, 1, dir);
  assert.deepEqual(back.main.entries, r.main.entries);
  assert.deepEqual(back.substitute.entries, r.substitute.entries);
  const lines = readFileSync(join(dir, 'replay.jsonl'), 'utf8').split('\n');
  lines[1] = '{"buffer":"main","step":"x"}';
  writeFileSync(join(dir, 'replay.jsonl'), lines.join('\n'));
  assert.throws(
    () => Replay.open(r.options, 0, 1, dir),
    (e: unknown) => e instanceof DataError && /replay\.jsonl:line 2/.test(e.message),
  );
});

const tiny = (root: string, name: string, steps: number) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed: 7,
      steps,
      promptsPerStep: 6,
      evalEvery: 0,
      evalCount: 10,
      evalPassK: 0,
      checkpointEvery: 2,
      logTreesEvery: 0,
      trainItems: 100,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32, tieEmbeddings: false },
    sft: { steps: 40, batchSize: 16, learningRate: 0.01, examples: 200, checkpoint: join(root, 'sft') },
    sampling: { maxResponseTokens: 8 },
    generate: { kind: 'iid', groupSize: 4 },
    optimize: { advantage: { kind: 'grpo' } },
    trainer: { learningRate: 0.003 },
    replay: { kind: 'recent', steps: 1, maxAge: 2 },
  });

test(
  'a tiny run with replay recent trains, logs replay_ess in (0, 1], and resumes exactly',
  { timeout: 120_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-replay-run-'));
    await train(tiny(root, 'full', 4), { quiet: true });
    await train(tiny(root, 'parts', 2), { quiet: true });
    assert.ok(existsSync(join(root, 'parts', 'checkpoints', 'step-2', 'replay.jsonl')));
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 4 });
    const keys = [
      'reward_mean',
      'loss',
      'grad_norm',
      'replay_trees',
      'replay_tokens',
      'replay_ess',
      'replay_age_mean',
      'trees_trained',
    ];
    const pick = (dir: string) =>
      new RunDir(dir)
        .readMetrics()
        .filter((m) => m.step > 0)
        .map((m) => Object.fromEntries(keys.map((k) => [k, m[k]])));
    const a = pick(join(root, 'full'));
    assert.equal(a.length, 4);
    assert.equal(a[0].replay_trees, 0, 'nothing stored before step 1');
    for (const m of a.slice(1)) {
      assert.equal(m.replay_trees, 6, "the previous step's 6 trees are replayed");
      assert.equal(m.trees_trained, 12);
      assert.equal(m.replay_age_mean, 1);
      assert.ok((m.replay_tokens as number) > 0);
      assert.ok((m.replay_ess as number) > 0 && (m.replay_ess as number) <= 1, `replay_ess ${m.replay_ess}`);
    }
    assert.ok(
      a.slice(1).some((m) => (m.replay_ess as number) < 1),
      'the policy moved: replayed weights are not all 1',
    );
    assert.deepEqual(pick(join(root, 'parts')), a);
    // a damaged replay.jsonl makes its checkpoint unusable: resume falls back to step 2 and redoes steps 3-4 identically
    writeFileSync(join(root, 'full', 'checkpoints', 'step-4', 'replay.jsonl'), '{"buffer":"main",');
    await train(undefined, { quiet: true, resume: join(root, 'full'), steps: 4 });
    assert.notEqual(
      readFileSync(join(root, 'full', 'checkpoints', 'step-4', 'replay.jsonl'), 'utf8'),
      '{"buffer":"main",',
      'step 4 was trained again and checkpointed anew',
    );
    assert.deepEqual(pick(join(root, 'full')), a);
  },
);
