/**
 * The matched controls of the method benchmarks, checked without running a bench: DARS's control (bench/control.ts
 * `matchedUniform`) resolves to uniform allocation with the rollouts per step DARS trained on and nothing else
 * changed; ReMix's control (bench/replay.ts `remix-p0`) makes the same optimiser updates per batch on the same
 * fresh prompts with no stored trees; the per-seed ratios pair seeds and count a seed that never reaches the
 * target with all its tokens.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  VARIANTS as CONTROL_VARIANTS,
  matchedUniform,
  pairedTokenRatios,
  rolloutsPerStep,
} from '../../bench/control.js';
import type { Raw, RunOut, Variant } from '../../bench/control.js';
import { VARIANTS as REPLAY_VARIANTS } from '../../bench/replay.js';
import { Replay } from '../../src/replay/replay.js';
import { loadConfig, parseConfig, type ArborConfig } from '../../src/run/config.js';
import { group, recordingLearner } from '../../testkit/bench/results-json.js';

const base = JSON.parse(JSON.stringify(loadConfig('examples/control-mixed.yaml'))) as Raw;
const resolve = (v: Variant): ArborConfig => parseConfig(v.patch(base), v.name);
const find = (vs: Variant[], name: string) => vs.find((v) => v.name === name)!;
const rollouts = (c: ArborConfig) => c.run.promptsPerStep * (c.generate as { groupSize: number }).groupSize;

test("DARS's matched control: uniform with the whole groups nearest DARS's rollouts per step, all else equal", () => {
  const uniform = resolve(find(CONTROL_VARIANTS, 'uniform'));
  const dars = resolve(find(CONTROL_VARIANTS, 'dars'));
  assert.equal(dars.control.allocate.kind, 'dars');
  assert.equal(rollouts(uniform), 128, 'the unmatched control spends the whole budget');
  // the measurement: DARS trained on about 77 rollouts per step
  const matched = resolve(matchedUniform(77.4));
  assert.equal(matched.control.allocate.kind, 'uniform');
  assert.equal(matched.run.promptsPerStep, 10);
  assert.equal(rollouts(matched), 80);
  assert.deepEqual({ ...matched, run: { ...matched.run, promptsPerStep: 16 } }, uniform);
  assert.equal(resolve(matchedUniform(128)).run.promptsPerStep, 16);
  assert.equal(resolve(matchedUniform(3)).run.promptsPerStep, 1, 'at least one prompt');
});

/** A run with these per-step rollouts, start accuracy and curve (tokens, accuracy). */
function run(seed: number, curve: Array<[number, number]>, tokens: number, error?: string): RunOut {
  const metrics = [76, 78].map((r, i) => ({ step: i + 1, rollouts: r }) as unknown as RunOut['metrics'][number]);
  return {
    variant: 'x',
    seed,
    metrics,
    evals: [],
    start: curve[0][1],
    end: 0,
    tokens,
    byTokens: curve,
    bySeconds: [],
    error,
  };
}

test('per-seed ratios pair seeds, skip a seed that failed in either run, and count a miss with all its tokens', () => {
  const control = [
    run(
      0,
      [
        [0, 0.5],
        [1000, 0.8],
      ],
      1000,
    ),
    run(
      1,
      [
        [0, 0.5],
        [1000, 0.6],
      ],
      1000,
    ),
    run(2, [[0, 0]], 9),
  ];
  const method = [
    run(2, [[0, 0]], 5),
    run(
      1,
      [
        [0, 0.5],
        [500, 0.75],
      ],
      800,
    ),
    run(
      0,
      [
        [0, 0.5],
        [200, 0.6],
      ],
      250,
    ),
    run(3, [[0, 0.5]], 10, 'failed'),
  ];
  // targets: start + 0.25. Seed 2: neither reaches it, all tokens, 9 / 5; seed 1: the control never (1000), the
  // method at 500; seed 0: the control interpolated between its evaluations, the method never (all 250 tokens)
  const seed0 = ((0.75 - 0.5) / (0.8 - 0.5)) * 1000;
  assert.deepEqual(pairedTokenRatios(control, method, 0.25), [9 / 5, 1000 / 500, seed0 / 250]);
  assert.equal(rolloutsPerStep(control[0]), 77);
});

test("ReMix's matched control: the same fresh prompts and 2 updates per batch, no stored trees", async () => {
  const remix = resolve(find(REPLAY_VARIANTS, 'replay-remix'));
  const control = resolve(find(REPLAY_VARIANTS, 'remix-p0'));
  assert.equal(control.run.promptsPerStep, remix.run.promptsPerStep);
  assert.deepEqual(control.replay, { ...remix.replay, probability: 0 });
  assert.deepEqual({ ...control, replay: remix.replay }, remix, 'nothing else differs');
  const updates = async (config: ArborConfig) => {
    const replay = Replay.open(config.replay, 0);
    const learner = recordingLearner();
    for (const step of [1, 2]) {
      const fresh = Array.from({ length: config.run.promptsPerStep }, (_, i) => group(`${step}/p${i}`, [0, 1]));
      await replay.train(learner, fresh, step - 1, step - 1, step);
    }
    return learner.updates.map((ids) => [ids.length, ids.filter((id) => id.startsWith('1/')).length]);
  };
  // [trees in the update, trees from step 1]: at step 2 ReMix adds round(10·0.4/0.6) = 7 stored trees
  assert.deepEqual(await updates(remix), [
    [10, 10],
    [10, 10],
    [17, 7],
    [17, 7],
  ]);
  assert.deepEqual(await updates(control), [
    [10, 10],
    [10, 10],
    [10, 0],
    [10, 0],
  ]);
});
