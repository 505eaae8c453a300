/**
 * `npm run bench -- methods --task arith|scratchpad|closest [--seeds 3] [--steps N] [--gain G] [--keys a,b]
 *  [--eval-every N] [--eval-count N]`:
 * every method headline against a control matched in rollouts, optimiser updates and prompts per
 * step, steps, seeds, warm start and held-out set, seed by seed. One task per invocation; each writes
 * bench/out/methods-<task>.json whose `task` names the test bed, `headline` holds the mean over seeds of each
 * key and `headline_seeds` its per-seed values (scripts/results-table.ts turns them into the results table).
 * Runs are shared between keys (TreePO is LATR's control and TreePO's method) and never mixed across commits:
 * every figure of one JSON comes from this invocation. Tokens to target (each seed's start + gain) are
 * interpolated linearly between evaluations every `evalEvery` steps; a run that never reaches the target counts
 * with all the tokens it decoded, so its ratio is a bound (`reached` says how many seeds did).
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/run/config.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import {
  collectRun,
  failedRun,
  matchedUniform,
  mean,
  metricMean,
  rolloutsPerStep,
  runConfig,
  runOnce,
  tokensNeeded,
  tokensToTarget,
  VARIANTS as CONTROL_VARIANTS,
  type Raw,
  withControl,
  type RunOut,
  type RunSettings,
  type Variant,
} from './control.js';
import { VARIANTS as REPLAY_VARIANTS } from './replay.js';
import { benchOutDir, printTable, trainInChildAsync, writeBenchJson } from './util.js';

export type TaskName = 'arith' | 'scratchpad' | 'closest';

/** A test bed: its base config, run length, target gain, evaluation grid and where ARRoL prunes. */
export interface TestBed {
  label: string;
  config: string;
  steps: number;
  gain: number;
  evalEvery: number;
  evalCount: number;
  /** ARRoL's pruning round: about a quarter of the answer (arith: 8 of ~22 tokens; scratchpad: 24 of ~90). */
  pruneRound: number;
}

export const TEST_BEDS: Record<TaskName, TestBed> = {
  arith: {
    label: 'arith (control-mixed)',
    config: 'examples/control-mixed.yaml',
    steps: 40,
    gain: 0.25,
    evalEvery: 2,
    evalCount: 300,
    pruneRound: 0,
  },
  scratchpad: {
    label: 'scratchpad (2×2-digit long multiplication)',
    config: 'examples/scratchpad-grpo.yaml',
    steps: 60,
    gain: 0.05,
    // a held-out evaluation decodes 200 × ~90 tokens: every 10 steps it costs about a third of the training
    evalEvery: 10,
    evalCount: 200,
    pruneRound: 2,
  },
  closest: {
    label: 'closest (graded)',
    config: 'examples/contrastive-closest-plain.yaml',
    steps: 100,
    gain: 0.1,
    evalEvery: 25,
    evalCount: 200,
    pruneRound: 0,
  },
};

const byName = (list: Variant[], name: string): Variant => {
  const v = list.find((x) => x.name === name);
  if (!v) throw new Error(`no variant ${name}`);
  return v;
};
const control = (name: string) => byName(CONTROL_VARIANTS, name);
// 16 paths from the root (initialDivergence 16): ARRoL prunes i.i.d. rollouts part-way (the paper's G = 16)
const treepo16 = { kind: 'treepo', groupSize: 16, segmentLength: 8, branchingFactor: 2, initialDivergence: 16 };
// independent paths: plain GRPO advantages (a segment-level tree advantage gives a chain's later segments none)
const asTrees16 = (c: Raw): Raw => ({
  ...control('treepo').patch(c),
  generate: treepo16,
  optimize: { ...(c.optimize as Raw), advantage: { kind: 'grpo' } },
});
/**
 * TreePO's own estimator (treepo-reference.md §2: each leaf's mean of its sub-group terms, level `trajectory`)
 * instead of the control bench's segment-level values: past the last fork a segment-level advantage is 0, and
 * on the scratchpad's ~90-token answers (forks end by token 24) it collapsed seed 0 from 53.0% to 34.5%.
 */
const treeTrajectory = (v: Variant): Variant => ({
  ...v,
  patch: (c) => {
    const t = v.patch(c);
    return { ...t, optimize: { ...(t.optimize as Raw), advantage: { kind: 'tree', level: 'trajectory' } } };
  },
});

/** Answers sampled per held-out problem (T = 1) in the FAPO pair's evaluations. */
export const FAPO_K = 4;
const sampledEval = (c: Raw): Raw => ({ ...c, run: { ...(c.run as Raw), evalPassK: FAPO_K } });

/** The variants the methods bench adds to the control and replay benches' (`bed` sets ARRoL's round). */
export function methodVariants(bed: TestBed): Variant[] {
  const uniform = control('uniform');
  const shaping = (term: Raw): Variant => ({
    name: `shaping-${term.kind as string}`,
    family: 'shaping',
    patch: (c) => {
      const u = uniform.patch(c);
      const optimize = u.optimize as Raw;
      return { ...u, optimize: { ...optimize, advantage: { ...(optimize.advantage as Raw), shaping: [term] } } };
    },
  });
  return [
    uniform,
    control('dars'),
    treeTrajectory(control('treepo')),
    treeTrajectory(control('latr')),
    byName(REPLAY_VARIANTS, 'replay-remix'),
    byName(REPLAY_VARIANTS, 'remix-p0'),
    // ARRoL as the spec has it: over-sample G = 16, prune to about half at round `pruneRound` with the
    // calibrated head; its control is the same G = 16 tree without pruning
    { name: 'treepo16', family: 'trees', patch: asTrees16 },
    {
      name: 'treepo16-prune',
      family: 'trees',
      patch: (c) => withControl(asTrees16(c), { prune: { kind: 'arrol', atRound: bed.pruneRound } }),
    },
    // FAPO and its control also sample FAPO_K answers per held-out problem at T = 1 at each evaluation: flawed
    // positives are what sampling produces (greedy answers are rarely flawed: 0.8–3.4% at 096439d)
    {
      name: 'fapo',
      family: 'fapo',
      patch: (c) => ({
        ...sampledEval(uniform.patch(c)),
        reward: { parts: [{ kind: 'fapo', lambda: 0.5, judge: 'program' }] },
      }),
    },
    { name: 'grpo-sampled-eval', family: 'fapo', patch: (c) => sampledEval(uniform.patch(c)) },
    shaping({ kind: 'novelty' }),
    shaping({ kind: 'entropy' }),
    shaping({ kind: 'ace' }),
    {
      name: 'contrastive',
      family: 'contrastive',
      patch: (c) => withControl(c, { contrastive: { kind: 'cuda_l1', best: 2, worst: 1, capacity: 16, maxChars: 14 } }),
    },
    { name: 'plain', family: 'contrastive', patch: (c) => c },
  ];
}

/** The last evaluation's value of `key` (NaN when no evaluation logged it). */
export function lastEval(r: RunOut, key: string): number {
  const xs = r.evals.filter((m) => typeof m[key] === 'number');
  return xs.length ? (xs[xs.length - 1][key] as number) : NaN;
}

/** 1 − identical_sibling_rate over a run's steps (NaN when never logged). */
const distinct = (r: RunOut) => 1 - metricMean(r.metrics, 'identical_sibling_rate');

/** How one headline is measured: the method's run, its control's, and the per-seed value from the pair. */
export interface Comparison {
  key: string;
  tasks: TaskName[];
  method: string;
  /** The control's variant name, or (DARS) a control built from the method's own run. */
  control: string | ((method: RunOut) => Variant);
  value: (method: RunOut, control: RunOut, gain: number) => number;
  /** What the control matches, for the JSON. */
  matched: string;
}

const tokenRatio = (m: RunOut, c: RunOut, gain: number) => tokensNeeded(c, gain) / tokensNeeded(m, gain);
const accDelta = (m: RunOut, c: RunOut) => 100 * (m.end - c.end);
const BOTH: TaskName[] = ['arith', 'scratchpad'];

export const COMPARISONS: Comparison[] = [
  {
    key: 'allocation_matched_tokens_to_target_gain',
    tasks: BOTH,
    method: 'dars',
    control: (dars) => matchedUniform(rolloutsPerStep(dars)),
    value: tokenRatio,
    matched: 'uniform with promptsPerStep = round(DARS rollouts per step / G), same seed',
  },
  {
    key: 'replay_matched_tokens_to_target_gain',
    tasks: BOTH,
    method: 'replay-remix',
    control: 'remix-p0',
    value: tokenRatio,
    matched: 'ReMix with replay probability 0: the same 10 fresh prompts and 2 updates per batch',
  },
  {
    key: 'treepo_tokens_to_target_gain',
    tasks: BOTH,
    method: 'treepo',
    control: 'uniform',
    value: tokenRatio,
    matched: 'i.i.d. GRPO groups, the same prompts and leaves (G = 8) per step',
  },
  {
    key: 'latr_distinct_sibling_gain',
    tasks: BOTH,
    method: 'latr',
    control: 'treepo',
    value: (m, c) => distinct(m) / distinct(c),
    matched: 'TreePO, G = 8, siblings compared like for like',
  },
  {
    key: 'pruning_tokens_saved',
    tasks: BOTH,
    method: 'treepo16-prune',
    control: 'treepo16',
    value: (m, c) => 1 - m.tokens / c.tokens,
    matched: 'TreePO with the same G = 16 over-sampling, no pruning',
  },
  {
    key: 'pruning_final_acc_delta',
    tasks: BOTH,
    method: 'treepo16-prune',
    control: 'treepo16',
    value: accDelta,
    matched: 'TreePO with the same G = 16 over-sampling, no pruning',
  },
  {
    key: 'value_head_auc_at_decision',
    tasks: BOTH,
    method: 'treepo16-prune',
    control: 'treepo16',
    value: (m) => metricMean(m.metrics, 'head_auc_at_decision'),
    matched: 'chance (0.5); the scores the head gave at the pruning round, against the outcomes below each path',
  },
  {
    key: 'fapo_flawed_positive_rate_delta',
    tasks: ['scratchpad'],
    method: 'fapo',
    control: 'grpo-sampled-eval',
    value: (m, c) => lastEval(m, 'eval_sample_flawed_positive_rate') - lastEval(c, 'eval_sample_flawed_positive_rate'),
    matched:
      'GRPO with the verifier alone: same rollouts, prompts, updates; at the last evaluation, the share of ' +
      `correct answers with a wrong step among ${FAPO_K} sampled (T = 1) per held-out problem`,
  },
  {
    key: 'fapo_final_acc_delta',
    tasks: ['scratchpad'],
    method: 'fapo',
    control: 'grpo-sampled-eval',
    value: accDelta,
    matched: 'GRPO with the verifier alone (same rollouts, prompts, updates)',
  },
  ...['novelty', 'entropy', 'ace'].map((term): Comparison => ({
    key: `shaping_${term}_tokens_to_target_gain`,
    tasks: ['arith'],
    method: `shaping-${term}`,
    control: 'uniform',
    value: tokenRatio,
    matched: 'plain GRPO: same rollouts, prompts, updates',
  })),
  {
    key: 'contrastive_score_gain',
    tasks: ['closest'],
    method: 'contrastive',
    control: 'plain',
    value: (m, c) => lastEval(m, 'eval_greedy_score') - lastEval(c, 'eval_greedy_score'),
    matched: 'the same prompts without earlier candidates; mean held-out greedy score at the end',
  },
];

/** A SAPO learner: uniform allocation, sharing through `dir` as `learner` (all own groups + 8 of its peer's). */
export function sapoLearner(dir: string, learner: string, promptsPerStep: number): Variant {
  return {
    name: `sapo-${learner}`,
    family: 'sapo',
    patch: (c) => ({
      ...control('uniform').patch(c),
      share: { dir, learner, local: promptsPerStep, external: promptsPerStep / 2, waitMs: 120_000 },
    }),
  };
}

/** The offset of learner B's seed: B is another learner (its own prompts and held-out set), matched by itself alone. */
export const PEER_SEED = 1000;

/** Two learners sharing, run at once; each compared with itself alone (uniform) at its seed. */
async function sapoSeed(base: Raw, bed: TestBed, settings: RunSettings, seed: number): Promise<RunOut[]> {
  const dir = join(benchOutDir, settings.bench, `sapo-share-seed${seed}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const prompts = (base.run as Raw).promptsPerStep as number;
  const pair = [
    [sapoLearner(dir, 'a', prompts), seed],
    [sapoLearner(dir, 'b', prompts), seed + PEER_SEED],
  ] as const;
  return Promise.all(
    pair.map(async ([v, s]) => {
      const config = runConfig(base, v, s, bed.steps, settings);
      try {
        return collectRun(v, s, (config.run as Raw).outDir as string, await trainInChildAsync(config, { force: true }));
      } catch (error) {
        return failedRun(v, s, error);
      }
    }),
  );
}

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

/** Mean and sample standard deviation (null below 2 values). */
const stats = (xs: number[]) => {
  const m = mean(xs);
  const sd = xs.length > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1)) : null;
  return { mean: m, sd };
};

export async function main(args: string[]): Promise<void> {
  const task = arg(args, 'task', '') as TaskName;
  if (!(task in TEST_BEDS)) throw new Error(`--task must be one of ${Object.keys(TEST_BEDS).join(', ')}`);
  const bed = TEST_BEDS[task];
  const seeds = Number(arg(args, 'seeds', '3'));
  const steps = Number(arg(args, 'steps', String(bed.steps)));
  const gain = Number(arg(args, 'gain', String(bed.gain)));
  const only = arg(args, 'keys', '').split(',').filter(Boolean);
  const bedRun = { ...bed, steps };
  const loaded = loadConfig(bed.config);
  const base = JSON.parse(
    JSON.stringify({ ...loaded, sft: { ...loaded.sft, checkpoint: loaded.sft.checkpoint ?? sftCacheDir(loaded) } }),
  ) as Raw;
  const evalEvery = Number(arg(args, 'eval-every', String(bed.evalEvery)));
  const evalCount = Number(arg(args, 'eval-count', String(bed.evalCount)));
  const settings: RunSettings = { bench: `methods-${task}`, evalEvery, evalCount };
  const variants = methodVariants(bed);
  const comparisons = COMPARISONS.filter((c) => c.tasks.includes(task) && (!only.length || only.includes(c.key)));
  const sapo = task === 'arith' && (!only.length || only.includes('sapo_tokens_to_target_gain'));
  const runs = new Map<string, RunOut>();
  const log = (r: RunOut) =>
    console.log(
      r.error
        ? `${r.variant} seed ${r.seed}: FAILED ${r.error.split('\n').slice(-3).join(' ')}`
        : `${r.variant} seed ${r.seed}: ${(100 * r.start).toFixed(1)}% → ${(100 * r.end).toFixed(1)}%, ` +
            `${r.tokens} tokens, ${rolloutsPerStep(r).toFixed(1)} rollouts per step`,
    );
  const get = (v: Variant, seed: number): RunOut => {
    const id = `${v.name}#${seed}`;
    let r = runs.get(id);
    if (!r) {
      r = runOnce(base, v, seed, steps, settings);
      runs.set(id, r);
      log(r);
    }
    return r;
  };
  const perSeed: Record<string, number[]> = {};
  const reached: Record<string, { method: number; control: number }> = {};
  const failures: string[] = [];
  for (let s = 0; s < seeds; s++) {
    for (const c of comparisons) {
      const m = get(byName(variants, c.method), s);
      if (m.error) continue;
      const cv = typeof c.control === 'string' ? byName(variants, c.control) : c.control(m);
      const ctl = get(cv, s);
      if (ctl.error) continue;
      const x = c.value(m, ctl, gain);
      if (!Number.isFinite(x)) {
        failures.push(`${c.key} seed ${s}: not finite (${x})`);
        continue;
      }
      (perSeed[c.key] ??= []).push(x);
      const hit = (r: RunOut) => (tokensToTarget(r.byTokens, r.start + gain) === undefined ? 0 : 1);
      const rc = (reached[c.key] ??= { method: 0, control: 0 });
      rc.method += hit(m);
      rc.control += hit(ctl);
    }
    if (sapo) {
      const pair = await sapoSeed(base, bedRun, settings, s);
      pair.forEach((r) => (runs.set(`${r.variant}#${r.seed}`, r), log(r)));
      const alone = [get(control('uniform'), s), get(control('uniform'), s + PEER_SEED)];
      if (pair.some((r) => r.error) || alone.some((r) => r.error)) {
        failures.push(`sapo seed ${s}: a run failed`);
        continue;
      }
      // each learner against itself alone at equal tokens per learner; the seed's value is the mean of the two
      (perSeed.sapo_tokens_to_target_gain ??= []).push(mean(pair.map((r, i) => tokenRatio(r, alone[i], gain))));
      const rc = (reached.sapo_tokens_to_target_gain ??= { method: 0, control: 0 });
      pair.forEach((r, i) => {
        rc.method += tokensToTarget(r.byTokens, r.start + gain) === undefined ? 0 : 1;
        rc.control += tokensToTarget(alone[i].byTokens, alone[i].start + gain) === undefined ? 0 : 1;
      });
    }
  }
  const keys = [...comparisons.map((c) => c.key), ...(sapo ? ['sapo_tokens_to_target_gain'] : [])];
  const headline: Record<string, number | null> = {};
  const rows = keys.map((key) => {
    const xs = perSeed[key] ?? [];
    const st = stats(xs);
    headline[key] = xs.length ? st.mean : null;
    return {
      key,
      seeds: xs.length,
      mean: xs.length ? st.mean : null,
      sd: st.sd,
      values: xs.map((x) => x.toPrecision(3)).join(' '),
    };
  });
  printTable(rows);
  const ran = [...runs.values()];
  const summary = (r: RunOut) => ({
    variant: r.variant,
    seed: r.seed,
    error: r.error ?? null,
    acc_start: r.start,
    acc_end: r.end,
    tokens: r.tokens,
    rollouts_per_step: rolloutsPerStep(r),
    tokens_to_target: r.error ? null : (tokensToTarget(r.byTokens, r.start + gain) ?? null),
    eval_flawed_positive_rate_end: lastEval(r, 'eval_flawed_positive_rate'),
    eval_sample_flawed_positive_rate_end: lastEval(r, 'eval_sample_flawed_positive_rate'),
    eval_sample_acc_end: lastEval(r, 'eval_sample_acc'),
    eval_greedy_score_end: lastEval(r, 'eval_greedy_score'),
    identical_sibling_rate: metricMean(r.metrics, 'identical_sibling_rate'),
    pruned_paths: metricMean(r.metrics, 'pruned_paths'),
    head_auc_at_decision: metricMean(r.metrics, 'head_auc_at_decision'),
    curve: r.byTokens,
  });
  const clean = (x: unknown): unknown =>
    typeof x === 'number' && !Number.isFinite(x) ? null : Array.isArray(x) ? x.map(clean) : x;
  writeBenchJson(`methods-${task}`, headline, {
    task: bed.label,
    config: bed.config,
    seeds,
    steps,
    gain,
    target: `each seed: its start accuracy + ${gain}`,
    resolution:
      `tokens to target interpolated linearly between held-out evaluations every ${evalEvery} steps ` +
      `(${evalCount} problems); a run that never reaches it counts with all its tokens (a bound)`,
    headline_seeds: perSeed,
    headline_spread: Object.fromEntries(rows.map((r) => [r.key, r.sd])),
    reached,
    matched: Object.fromEntries([
      ...comparisons.map((c) => [
        c.key,
        { method: c.method, control: typeof c.control === 'string' ? c.control : 'uniform-matched', what: c.matched },
      ]),
      ...(sapo
        ? [
            [
              'sapo_tokens_to_target_gain',
              {
                method: 'sapo-a and sapo-b sharing (own 16 groups + 8 of the peer per step)',
                control: `each learner alone (uniform), seeds s and s + ${PEER_SEED}`,
                what: 'equal tokens decoded per learner; the per-seed value is the mean of the two learners',
              },
            ],
          ]
        : []),
    ]),
    failures,
    runs: ran.map((r) => Object.fromEntries(Object.entries(summary(r)).map(([k, x]) => [k, clean(x)]))),
  });
}
