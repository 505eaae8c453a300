/**
 * `npm run bench -- control [--seeds 3] [--steps 40] [--gain 0.25] [--only allocation|trees] [--variants a,b]`: every
 * Control strategy against its baseline from the same warm start, on examples/control-mixed.yaml
 * (1–2 digit + and −, a pool of 256 prompts that come back every few steps, so success histories
 * exist). Two families:
 * - allocation (i.i.d. GRPO groups): uniform vs knapsack, xrpo, dars; GRESO skipping and hint rescue
 *   on top of uniform; and `uniform-matched`, DARS's matched control (run after DARS on each seed: uniform
 *   with the whole groups closest to the rollouts per step that DARS trained on, since DARS leaves budget
 *   unspent); `allocation_matched_tokens_to_target_gain` is DARS against it, per seed (`headline_seeds`);
 * - trees (TreePO, tree advantages): treepo vs treepo+distinct, latr, value-guided treepo, ARRoL pruning
 *   (its quality head with the embedded engine's hidden state, and with log-prob statistics only).
 * Held-out greedy accuracy is evaluated every 2 steps (300 problems) and the tokens to reach the
 * seed's start + gain are interpolated linearly between evaluations; a seed that never reaches it counts with
 * all the tokens it decoded (a lower bound). Writes bench/out/control.json and SVG curves of accuracy
 * against tokens decoded and against wall time (evaluations excluded), and informative rollouts per step.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/run/config.js';
import { lineChart } from '../src/ui/report.js';
import type { StepMetrics } from '../src/run/rundir.js';
import { RunDir } from '../src/run/rundir.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { benchOutDir, printTable, trainInChild, writeBenchJson } from './util.js';

export type Raw = Record<string, unknown>;
export interface Variant {
  name: string;
  family: string;
  patch: (c: Raw) => Raw;
}
export interface RunOut {
  variant: string;
  seed: number;
  metrics: StepMetrics[];
  /** The metrics lines that carry an evaluation (step 0 included). */
  evals: StepMetrics[];
  start: number;
  end: number;
  tokens: number;
  /** Held-out accuracy against tokens decoded and against loop seconds (evaluations excluded), step 0 included. */
  byTokens: Array<[number, number]>;
  bySeconds: Array<[number, number]>;
  error?: string;
}

/** `c` with `sections` set under its `control:` (the Control methods' config). */
export const withControl = (c: Raw, sections: Raw): Raw => ({
  ...c,
  control: { ...((c.control as Raw) ?? {}), ...sections },
});
const treepo = { kind: 'treepo', groupSize: 8, segmentLength: 8, branchingFactor: 2, initialDivergence: 2 };
const asTrees = (c: Raw): Raw => ({
  ...withControl(c, { allocate: { kind: 'uniform' } }),
  generate: treepo,
  optimize: { ...(c.optimize as Raw), advantage: { kind: 'tree', level: 'segment' } },
});
const uniform = (c: Raw): Raw => withControl(c, { allocate: { kind: 'uniform' } });

export const VARIANTS: Variant[] = [
  { name: 'uniform', family: 'allocation', patch: uniform },
  {
    name: 'knapsack',
    family: 'allocation',
    patch: (c) => withControl(c, { allocate: { kind: 'knapsack', firstRound: 2, maxPerPrompt: 32 } }),
  },
  {
    name: 'xrpo',
    family: 'allocation',
    patch: (c) => withControl(c, { allocate: { kind: 'xrpo', firstRound: 2, maxPerPrompt: 32 } }),
  },
  {
    name: 'dars',
    family: 'allocation',
    patch: (c) => withControl(c, { allocate: { kind: 'dars', firstRound: 4, maxPerPrompt: 32 } }),
  },
  { name: 'greso', family: 'allocation', patch: (c) => withControl(uniform(c), { skip: { kind: 'greso' } }) },
  {
    name: 'hint',
    family: 'allocation',
    patch: (c) => withControl(uniform(c), { hint: { kind: 'gold_prefix', fraction: 0.5 } }),
  },
  { name: 'treepo', family: 'trees', patch: asTrees },
  {
    name: 'treepo-distinct',
    family: 'trees',
    patch: (c) => ({ ...asTrees(c), generate: { ...treepo, distinct: true } }),
  },
  { name: 'latr', family: 'trees', patch: (c) => ({ ...asTrees(c), generate: { kind: 'latr', groupSize: 8 } }) },
  {
    name: 'treepo-value',
    family: 'trees',
    patch: (c) => ({ ...asTrees(c), generate: { ...treepo, allocation: 'value', allocationTemperature: 0.2 } }),
  },
  { name: 'treepo-prune', family: 'trees', patch: (c) => withControl(asTrees(c), { prune: { kind: 'arrol' } }) },
  // the same quality head without the hidden state (the features a remote engine gives)
  {
    name: 'treepo-prune-stats',
    family: 'trees',
    patch: (c) => withControl(asTrees(c), { prune: { kind: 'arrol' }, qualityHead: { hidden: false } }),
  },
];

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}
export const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
export const metricMean = (ms: StepMetrics[], k: string) =>
  mean(ms.filter((m) => typeof m[k] === 'number').map((m) => m[k] as number));

/** Tokens at which the accuracy curve first reaches `target`, interpolated between evaluations (undefined: never). */
export function tokensToTarget(curve: Array<[number, number]>, target: number): number | undefined {
  for (let i = 0; i < curve.length; i++) {
    const [x, y] = curve[i];
    if (y < target) continue;
    if (i === 0) return x;
    const [x0, y0] = curve[i - 1];
    return x0 + ((target - y0) / (y - y0)) * (x - x0);
  }
  return undefined;
}

/** Tokens a run needed to reach its start + gain; a run that never reaches it counts with all it decoded. */
export const tokensNeeded = (r: RunOut, gain: number): number => tokensToTarget(r.byTokens, r.start + gain) ?? r.tokens;

/**
 * Per-seed ratios control ÷ method of the tokens to each seed's start + gain, paired by seed number (the
 * same warm start and held-out set); a seed that failed in either run is left out. > 1: the method needs fewer.
 */
export function pairedTokenRatios(control: RunOut[], method: RunOut[], gain: number): number[] {
  return method
    .filter((m) => !m.error)
    .flatMap((m) => {
      const c = control.find((x) => x.seed === m.seed && !x.error);
      return c ? [tokensNeeded(c, gain) / tokensNeeded(m, gain)] : [];
    });
}

/** Rollouts a run trained on per step, mean over its steps (the `rollouts` step metric). */
export const rolloutsPerStep = (r: RunOut): number => metricMean(r.metrics, 'rollouts');

/**
 * DARS's matched control: uniform allocation with the whole groups closest to `rollouts` per step
 * (promptsPerStep = round(rollouts / G), at least 1; G = generate.groupSize), so both spend the same batch.
 */
export function matchedUniform(rollouts: number): Variant {
  return {
    name: 'uniform-matched',
    family: 'allocation',
    patch: (c) => {
      const prompts = Math.max(1, Math.round(rollouts / ((c.generate as Raw).groupSize as number)));
      return { ...uniform(c), run: { ...(c.run as Raw), promptsPerStep: prompts } };
    },
  };
}

/** How a bench evaluates: every `evalEvery` steps on `evalCount` held-out problems, into bench/out/<bench>/. */
export interface RunSettings {
  bench: string;
  evalEvery: number;
  evalCount: number;
}
const CONTROL_SETTINGS: RunSettings = { bench: 'control', evalEvery: 2, evalCount: 300 };

/** The config of one run of a variant: the base with the bench's run settings, then the variant's patch. */
export function runConfig(base: Raw, v: Variant, seed: number, steps: number, settings: RunSettings): Raw {
  const outDir = join(benchOutDir, settings.bench, `${v.name}-seed${seed}`);
  const run = {
    ...(base.run as Raw),
    seed,
    steps,
    outDir,
    evalEvery: settings.evalEvery,
    evalCount: settings.evalCount,
    evalPassK: 0,
    logTreesEvery: 0,
    checkpointEvery: 0,
  };
  return v.patch({ ...base, run });
}

/** A finished run's curves from its run directory (`summary`: the child's last line). */
export function collectRun(v: Variant, seed: number, outDir: string, summary: Record<string, unknown>): RunOut {
  const all = new RunDir(outDir).readMetrics();
  const metrics = all.filter((m) => m.step > 0);
  let evalSeconds = 0;
  const byTokens: Array<[number, number]> = [];
  const bySeconds: Array<[number, number]> = [];
  for (const m of all) {
    evalSeconds += ((m.ms_eval as number) ?? 0) / 1000;
    if (typeof m.eval_greedy_acc !== 'number') continue;
    byTokens.push([m.tokens_decoded_total as number, m.eval_greedy_acc]);
    bySeconds.push([m.step === 0 ? 0 : (m.wall_s as number) - evalSeconds, m.eval_greedy_acc]);
  }
  return {
    variant: v.name,
    seed,
    metrics,
    evals: all.filter((m) => typeof m.eval_greedy_acc === 'number'),
    start: summary.heldout_acc_start as number,
    end: summary.heldout_acc_end as number,
    tokens: summary.tokens_decoded as number,
    byTokens,
    bySeconds,
  };
}

/** The RunOut of a run that failed (its error kept, every figure NaN). */
export const failedRun = (v: Variant, seed: number, error: unknown): RunOut => ({
  variant: v.name,
  seed,
  metrics: [],
  evals: [],
  start: NaN,
  end: NaN,
  tokens: NaN,
  byTokens: [],
  bySeconds: [],
  error: (error as Error).message.slice(0, 2000),
});

/** One training run of a variant in a child process, its held-out curve against tokens and against loop seconds. */
export function runOnce(
  base: Raw,
  v: Variant,
  seed: number,
  steps: number,
  bench: string | RunSettings = 'control',
): RunOut {
  const settings = typeof bench === 'string' ? { ...CONTROL_SETTINGS, bench } : bench;
  const config = runConfig(base, v, seed, steps, settings);
  try {
    const summary = trainInChild(config, { force: true });
    return collectRun(v, seed, (config.run as Raw).outDir as string, summary);
  } catch (error) {
    return failedRun(v, seed, error);
  }
}

/** Mean curve over seeds at each evaluation index (x and y averaged). */
export function meanCurve(runs: RunOut[], key: 'byTokens' | 'bySeconds'): Array<[number, number]> {
  const ok = runs.filter((r) => !r.error && r[key].length);
  if (!ok.length) return [];
  const n = Math.min(...ok.map((r) => r[key].length));
  return Array.from(
    { length: n },
    (_, i) => [mean(ok.map((r) => r[key][i][0])), mean(ok.map((r) => r[key][i][1]))] as [number, number],
  );
}

export const COLORS = ['#111827', '#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];

function plots(family: string, names: string[], byVariant: Map<string, RunOut[]>): void {
  const series = (key: 'byTokens' | 'bySeconds') =>
    names.map((n, i) => ({
      name: n,
      color: COLORS[i % COLORS.length],
      points: meanCurve(byVariant.get(n) ?? [], key),
    }));
  writeFileSync(
    join(benchOutDir, `control-${family}-tokens.svg`),
    lineChart(
      `${family}: held-out greedy accuracy vs tokens decoded (mean of seeds)`,
      'tokens decoded',
      series('byTokens'),
      760,
      380,
    ),
  );
  writeFileSync(
    join(benchOutDir, `control-${family}-wall.svg`),
    lineChart(
      `${family}: held-out greedy accuracy vs seconds (evaluations excluded)`,
      'seconds of the step loop',
      series('bySeconds'),
      760,
      380,
    ),
  );
  const informative = names.map((n, i) => {
    const runs = (byVariant.get(n) ?? []).filter((r) => !r.error);
    const steps = runs.length ? Math.min(...runs.map((r) => r.metrics.length)) : 0;
    return {
      name: n,
      color: COLORS[i % COLORS.length],
      points: Array.from(
        { length: steps },
        (_, s) => [s + 1, mean(runs.map((r) => r.metrics[s].informative_rollouts as number))] as [number, number],
      ),
    };
  });
  writeFileSync(
    join(benchOutDir, `control-${family}-informative.svg`),
    lineChart(
      `${family}: share of rollouts in mixed-reward groups per step (mean of seeds)`,
      'step',
      informative,
      760,
      380,
    ),
  );
}

export async function main(args: string[]): Promise<void> {
  const seeds = Number(arg(args, 'seeds', '3'));
  const steps = Number(arg(args, 'steps', '40'));
  const gain = Number(arg(args, 'gain', '0.25'));
  const only = arg(args, 'only', '');
  const names = arg(args, 'variants', '').split(',').filter(Boolean);
  const file = 'examples/control-mixed.yaml';
  const loaded = loadConfig(file);
  // one warm start for every run: the config's own SFT cache
  const base = JSON.parse(
    JSON.stringify({ ...loaded, sft: { ...loaded.sft, checkpoint: loaded.sft.checkpoint ?? sftCacheDir(loaded) } }),
  ) as Raw;
  const variants = VARIANTS.filter((v) => (!only || v.family === only) && (!names.length || names.includes(v.name)));
  const byVariant = new Map<string, RunOut[]>();
  const record = (v: Variant, r: RunOut) => {
    byVariant.set(v.name, [...(byVariant.get(v.name) ?? []), r]);
    console.log(
      r.error
        ? `${v.name} seed ${r.seed}: FAILED ${r.error.split('\n').slice(-3).join(' ')}`
        : `${v.name} seed ${r.seed}: ${(100 * r.start).toFixed(1)}% → ${(100 * r.end).toFixed(1)}%, ` +
            `${r.tokens} tokens, informative rollouts ${metricMean(r.metrics, 'informative_rollouts').toFixed(3)}`,
    );
  };
  for (let s = 0; s < seeds; s++) {
    for (const v of variants) {
      const r = runOnce(base, v, s, steps);
      record(v, r);
      // DARS's matched control, on the same seed, with the batch DARS actually trained on
      if (v.name !== 'dars' || r.error) continue;
      const control = matchedUniform(rolloutsPerStep(r));
      record(control, runOnce(base, control, s, steps));
    }
  }
  const ran = byVariant.has('uniform-matched') ? [...variants, matchedUniform(NaN)] : variants;
  const rows: Array<Record<string, string | number | null>> = [];
  const summary: Record<string, Record<string, number | null | string>> = {};
  for (const v of ran) {
    const runs = byVariant.get(v.name) ?? [];
    const ok = runs.filter((r) => !r.error);
    // each seed's target is its own start + gain (a seed's held-out set, hence its start, depends on the seed)
    const reach = ok.map((r) => tokensToTarget(r.byTokens, r.start + gain));
    const needed = ok.map((r, i) => reach[i] ?? r.tokens);
    const ms = ok.flatMap((r) => r.metrics);
    const row = {
      variant: v.name,
      family: v.family,
      seeds_ok: ok.length,
      rollouts_per_step: mean(ok.map(rolloutsPerStep)),
      acc_start: mean(ok.map((r) => r.start)),
      acc_end: mean(ok.map((r) => r.end)),
      tokens: mean(ok.map((r) => r.tokens)),
      tokens_to_target: mean(needed),
      reached: reach.filter((x) => x !== undefined).length,
      informative_groups: metricMean(ms, 'informative_groups'),
      informative_rollouts: metricMean(ms, 'informative_rollouts'),
      identical_sibling_rate: metricMean(ms, 'identical_sibling_rate'),
      prompts_skipped: metricMean(ms, 'prompts_skipped'),
      hint_rescued: metricMean(ms, 'hint_rescued'),
      pruned_paths: metricMean(ms, 'pruned_paths'),
      head_auc: metricMean(ms, 'head_auc'),
      head_auc_at_decision: metricMean(ms, 'head_auc_at_decision'),
      head_brier: metricMean(ms, 'head_brier'),
    };
    rows.push(
      Object.fromEntries(
        Object.entries(row).map(([k, x]) => [k, typeof x === 'number' && !Number.isFinite(x) ? null : x]),
      ),
    );
    summary[v.name] = {
      ...rows[rows.length - 1],
      errors:
        runs
          .filter((r) => r.error)
          .map((r) => r.error)
          .join(' | ') || null,
    };
  }
  printTable(rows);
  const get = (name: string, key: string) => {
    const x = summary[name]?.[key];
    return typeof x === 'number' ? x : null;
  };
  const ratio = (a: number | null, b: number | null) => (a !== null && b !== null && b !== 0 ? a / b : null);
  // each allocation headline is its best allocator's (named in the details; every allocator's figures are there too)
  const allocators = ['knapsack', 'xrpo', 'dars'].filter((n) => summary[n]);
  const tokenGain = Object.fromEntries(
    allocators.map((n) => [n, ratio(get('uniform', 'tokens_to_target'), get(n, 'tokens_to_target'))]),
  );
  const groupGain = Object.fromEntries(
    allocators.map((n) => [n, ratio(get(n, 'informative_groups'), get('uniform', 'informative_groups'))]),
  );
  const rolloutGain = Object.fromEntries(
    allocators.map((n) => [n, ratio(get(n, 'informative_rollouts'), get('uniform', 'informative_rollouts'))]),
  );
  const argmax = (by: Record<string, number | null>) =>
    allocators.reduce<string | null>((b, n) => (by[n] !== null && (b === null || by[n]! > by[b]!) ? n : b), null);
  const best = argmax(tokenGain);
  const bestGroups = argmax(groupGain);
  const distinct = (n: string) =>
    get(n, 'identical_sibling_rate') === null ? null : 1 - get(n, 'identical_sibling_rate')!;
  // DARS against uniform with the same rollouts per step, seed by seed (mean in the headline, each seed in
  // headline_seeds): the unmatched ratios above also credit DARS with its smaller batch
  const matchedRatios = pairedTokenRatios(byVariant.get('uniform-matched') ?? [], byVariant.get('dars') ?? [], gain);
  const headline = {
    allocation_matched_tokens_to_target_gain: matchedRatios.length ? mean(matchedRatios) : null,
    latr_distinct_sibling_gain: ratio(distinct('latr'), distinct('treepo')),
    pruning_tokens_saved:
      get('treepo-prune', 'tokens') !== null && get('treepo', 'tokens')
        ? 1 - get('treepo-prune', 'tokens')! / get('treepo', 'tokens')!
        : null,
    pruning_final_acc_delta:
      get('treepo-prune', 'acc_end') !== null && get('treepo', 'acc_end') !== null
        ? 100 * (get('treepo-prune', 'acc_end')! - get('treepo', 'acc_end')!)
        : null,
    // over the nodes the head scored when it decided (ARRoL's pruning round, value-guided branching)
    value_head_auc_at_decision:
      get('treepo-prune', 'head_auc_at_decision') ?? get('treepo-value', 'head_auc_at_decision'),
  };
  console.log(JSON.stringify({ best_allocator_tokens: best, best_allocator_groups: bestGroups, headline }, null, 2));
  for (const family of ['allocation', 'trees'] as const) {
    const names = ran.filter((v) => v.family === family).map((v) => v.name);
    if (names.length) plots(family, names, byVariant);
  }
  writeBenchJson('control', headline, {
    config: file,
    seeds,
    steps,
    target: 'each seed: its start accuracy + gain',
    gain,
    best_allocator_tokens: best,
    best_allocator_groups: bestGroups,
    headline_seeds: { allocation_matched_tokens_to_target_gain: matchedRatios },
    // not headlines: DARS's smaller batch, XRPO reducing to uniform, finished leaves in the AUC
    unmatched: {
      allocation_tokens_to_target_gain: best ? tokenGain[best] : null,
      allocation_informative_groups_gain: bestGroups ? groupGain[bestGroups] : null,
      value_head_auc: get('treepo-prune', 'head_auc') ?? get('treepo-value', 'head_auc'),
    },
    allocation_matched: {
      method: 'dars',
      control: 'uniform-matched: uniform, promptsPerStep = round(DARS rollouts per step / G), same seed',
      rollouts_per_step: {
        dars: (byVariant.get('dars') ?? []).filter((r) => !r.error).map(rolloutsPerStep),
        'uniform-matched': (byVariant.get('uniform-matched') ?? []).filter((r) => !r.error).map(rolloutsPerStep),
      },
    },
    allocation_tokens_to_target_gain_by_allocator: tokenGain,
    allocation_informative_groups_gain_by_allocator: groupGain,
    allocation_informative_rollouts_gain_by_allocator: rolloutGain,
    head_auc_by_features: {
      hidden_state: get('treepo-prune', 'head_auc'),
      statistics_only: get('treepo-prune-stats', 'head_auc'),
    },
    head_brier_by_features: {
      hidden_state: get('treepo-prune', 'head_brier'),
      statistics_only: get('treepo-prune-stats', 'head_brier'),
    },
    variants: summary,
    curves: Object.fromEntries(
      [...byVariant.entries()].map(([n, rs]) => [
        n,
        rs.map((r) => ({ seed: r.seed, byTokens: r.byTokens, bySeconds: r.bySeconds })),
      ]),
    ),
  });
}
