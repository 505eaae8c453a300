/**
 * The methods bench's matched controls (bench/methods.ts), checked without running it: each comparison's
 * method and control resolve, on every test bed it runs on, to configs that differ only where the method
 * does (so rollouts, prompts and updates per step, steps, warm start and held-out set are equal), the SAPO
 * learners share all of their own groups plus half as many of their peer's, and each headline's value is
 * computed from the runs it names.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Raw, RunOut } from '../../bench/control.js';
import {
  COMPARISONS,
  FAPO_K,
  lastEval,
  methodVariants,
  sapoLearner,
  TEST_BEDS,
  type TaskName,
} from '../../bench/methods.js';
import { loadConfig, parseConfig } from '../../src/run/config.js';

/** Leaf paths where two plain JSON values differ. */
function diff(a: unknown, b: unknown, at = ''): string[] {
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && !Array.isArray(a)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b as object)])].sort();
    return keys.flatMap((k) => diff((a as Raw)[k], (b as Raw)[k], at ? `${at}.${k}` : k));
  }
  return JSON.stringify(a) === JSON.stringify(b) ? [] : [at];
}

/** Where each headline's method may differ from its control: the method itself and nothing else. */
const ALLOWED: Record<string, RegExp> = {
  allocation_matched_tokens_to_target_gain: /^(control\.allocate\.|run\.promptsPerStep$)/,
  replay_matched_tokens_to_target_gain: /^replay\.probability$/,
  treepo_tokens_to_target_gain: /^(generate\.|optimize\.advantage\.(kind|level)$)/,
  latr_distinct_sibling_gain: /^generate\./,
  pruning_tokens_saved: /^control\.prune\./,
  pruning_final_acc_delta: /^control\.prune\./,
  value_head_auc_at_decision: /^control\.prune\./,
  fapo_flawed_positive_rate_delta: /^reward\./,
  fapo_final_acc_delta: /^reward\./,
  shaping_novelty_tokens_to_target_gain: /^optimize\.advantage\.shaping$/,
  shaping_entropy_tokens_to_target_gain: /^optimize\.advantage\.shaping$/,
  shaping_ace_tokens_to_target_gain: /^optimize\.advantage\.shaping$/,
  contrastive_score_gain: /^control\.contrastive\./,
};

/** A finished run with this per-step rollouts count, curve (tokens, accuracy) and evaluation lines. */
function run(curve: Array<[number, number]>, evals: Array<Record<string, number>> = []): RunOut {
  const metrics = [1, 2].map((step) => ({ step, rollouts: 64 }) as unknown as RunOut['metrics'][number]);
  return {
    variant: 'x',
    seed: 0,
    metrics,
    evals: evals as unknown as RunOut['evals'],
    start: curve[0][1],
    end: curve[curve.length - 1][1],
    tokens: curve[curve.length - 1][0],
    byTokens: curve,
    bySeconds: [],
  };
}

for (const task of Object.keys(TEST_BEDS) as TaskName[]) {
  const bed = TEST_BEDS[task];
  const base = JSON.parse(JSON.stringify(loadConfig(bed.config))) as Raw;
  const variants = methodVariants(bed);
  const resolve = (name: string) =>
    parseConfig(variants.find((v) => v.name === name)!.patch(base), `${name} on ${task}`) as unknown as Raw;
  for (const c of COMPARISONS.filter((x) => x.tasks.includes(task))) {
    test(`${task}: ${c.key} differs from its control only where the method does`, () => {
      const method = resolve(c.method);
      // DARS's control depends on DARS's run: 77.4 rollouts per step → round(77.4 / G) prompts
      const control =
        typeof c.control === 'string'
          ? resolve(c.control)
          : (parseConfig(c.control(run([[0, 0.5]])).patch(base), 'control') as unknown as Raw);
      const differs = diff(method, control);
      assert.ok(differs.length > 0, 'the method changes something');
      const stray = differs.filter((p) => !ALLOWED[c.key].test(p));
      assert.deepEqual(stray, [], `${c.key}: differs outside the method`);
      assert.equal((method.run as Raw).steps, (control.run as Raw).steps);
      assert.deepEqual(method.sft, control.sft, 'the same warm start');
      assert.equal((method.trainer as Raw).updatesPerStep, (control.trainer as Raw).updatesPerStep);
    });
  }
}

/** A scratchpad variant's resolved config. */
function scratchpadVariant(name: string) {
  const bed = TEST_BEDS.scratchpad;
  const base = JSON.parse(JSON.stringify(loadConfig(bed.config))) as Raw;
  return parseConfig(
    methodVariants(bed)
      .find((v) => v.name === name)!
      .patch(base),
    name,
  );
}
const get = scratchpadVariant;

test('ARRoL over-samples 16 i.i.d. paths and prunes at the test bed round; its control is the same tree unpruned', () => {
  const pruned = get('treepo16-prune');
  const unpruned = get('treepo16');
  assert.deepEqual(pruned.generate, unpruned.generate);
  assert.equal((pruned.generate as { groupSize: number }).groupSize, 16);
  assert.equal((pruned.generate as { initialDivergence: number }).initialDivergence, 16);
  assert.equal(pruned.control.prune.kind, 'arrol');
  assert.equal((pruned.control.prune as { atRound: number }).atRound, 2);
  assert.equal(unpruned.control.prune.kind, 'none');
  assert.equal(pruned.optimize.advantage.kind, 'grpo', 'independent paths: GRPO advantages');
  // TreePO and LATR with TreePO's own estimator (one tree advantage per leaf), not segment values
  for (const name of ['treepo', 'latr']) {
    const c = get(name);
    assert.equal(c.optimize.advantage.kind, 'tree');
    assert.equal(c.optimize.advantage.level, 'trajectory');
  }
});

test("FAPO and its control sample the same answers per held-out problem; FAPO's reward is all that differs", () => {
  const fapo = get('fapo');
  const grpo = get('grpo-sampled-eval');
  assert.equal(fapo.run.evalPassK, FAPO_K);
  assert.equal(grpo.run.evalPassK, FAPO_K);
  assert.equal(fapo.reward.parts[0].kind, 'fapo');
  assert.deepEqual({ ...fapo, reward: grpo.reward }, grpo);
});

test('SAPO learners train on all their own groups and half as many of their peer, through one directory', () => {
  const base = JSON.parse(JSON.stringify(loadConfig(TEST_BEDS.arith.config))) as Raw;
  const a = parseConfig(sapoLearner('/tmp/x', 'a', 16).patch(base), 'a');
  const b = parseConfig(sapoLearner('/tmp/x', 'b', 16).patch(base), 'b');
  assert.equal(a.share.dir, '/tmp/x');
  assert.equal(a.share.learner, 'a');
  assert.equal(b.share.learner, 'b');
  assert.equal(a.share.local, 16);
  assert.equal(a.share.external, 8);
  assert.equal(a.run.promptsPerStep, 16, 'each learner decodes what it would alone');
  assert.equal(a.control.allocate.kind, 'uniform');
});

test("headline values come from the runs they name: tokens ratios, deltas and the last evaluation's figures", () => {
  const byKey = (key: string) => COMPARISONS.find((c) => c.key === key)!;
  // control reaches +0.25 at 2000 tokens, the method at 1000: 2×
  const control = run([
    [0, 0.5],
    [2000, 0.75],
    [4000, 0.8],
  ]);
  const method = run([
    [0, 0.5],
    [1000, 0.75],
    [4000, 0.9],
  ]);
  assert.equal(byKey('treepo_tokens_to_target_gain').value(method, control, 0.25), 2);
  assert.ok(Math.abs(byKey('fapo_final_acc_delta').value(method, control, 0.25) - 10) < 1e-9);
  const evals = (rate: number) => [
    { step: 0, eval_sample_flawed_positive_rate: 0.5, eval_flawed_positive_rate: 0.9 },
    { step: 60, eval_sample_flawed_positive_rate: rate, eval_flawed_positive_rate: 0.9 },
  ];
  const fapo = run([[0, 0.5]], evals(0.1));
  const grpo = run([[0, 0.5]], evals(0.3));
  assert.ok(Math.abs(byKey('fapo_flawed_positive_rate_delta').value(fapo, grpo, 0.25) + 0.2) < 1e-12);
  assert.equal(lastEval(fapo, 'eval_sample_flawed_positive_rate'), 0.1);
  assert.ok(Number.isNaN(lastEval(fapo, 'eval_greedy_score')), 'never logged: NaN, not 0');
  const half = run([
    [0, 0.5],
    [1000, 0.5],
  ]);
  const full = run([
    [0, 0.5],
    [2000, 0.5],
  ]);
  assert.equal(byKey('pruning_tokens_saved').value(half, full, 0.25), 0.5);
});
