/**
 * One step's metrics line (metrics.jsonl) and progress line, from the producer's batch metadata and
 * the learner's result. Rollout figures (reward, accuracy, `reward/<name>` per reward component) cover
 * every complete tree generated for the step, including groups dynamic sampling dropped, and only its
 * leaves not in error; training figures cover the trees trained on. Fixed keys win over control
 * counters and reward components, which never name a fixed key (the `reward/` prefix).
 */
import { generatedTokenCount, isComplete, leaves, type RolloutTree, type TreeNode } from '../core/tree.js';
import { correctness, isCorrect } from '../filter/constants.js';
import type { LearnerResult } from './learner.js';
import type { ProducedMeta } from './pipeline.js';
import type { EvalResult } from './evaluate.js';
import type { StepMetrics } from './rundir.js';
import type { LoopState } from './run-state.js';

export function stepMetrics(
  step: number,
  batch: RolloutTree[],
  meta: ProducedMeta,
  learned: LearnerResult | undefined,
  trainMs: number,
  state: LoopState,
): StepMetrics {
  const ls = meta.drawn
    .filter((t) => isComplete(t))
    .flatMap((t) => leaves(t))
    .filter((l) => l.finishReason !== 'error');
  const rewardMean = mean(ls.map((l) => l.reward ?? 0));
  const accuracy = mean(ls.map((l) => (isCorrect(correctness(l)) ? 1 : 0)));
  // FAPO rewards carry a `flawed` component: the share of correct leaves with a wrong step
  const flawed = ls.filter((l) => isCorrect(correctness(l))).map((l) => l.rewardInfo?.components.flawed);
  const judged = ls.some((l) => l.rewardInfo?.components.flawed !== undefined);
  const s = meta.stats;
  const m = learned?.metrics ?? {};
  const components = rewardComponentMeans(ls);
  return {
    step,
    // every control counter (allocation, skipping, hints, pruning...); the fixed keys below win
    ...meta.info,
    ...components.means,
    ...(components.dropped ? { reward_components_dropped: components.dropped } : {}),
    reward_mean: rewardMean,
    accuracy,
    ...(judged ? { flawed_positive_ratio: mean(flawed.map((f) => f ?? 0)) } : {}),
    tokens_decoded: s.tokensDecoded,
    tokens_decoded_total: state.tokensDecoded,
    prefix_tokens_reused: s.prefixTokensReused,
    prompt_tokens_computed: s.promptTokensComputed,
    prefix_reuse_ratio: s.prefixTokensReused / Math.max(1, s.prefixTokensReused + s.promptTokensComputed),
    trajectories: s.trajectories,
    sampler_calls: s.samplerCalls,
    groups_dropped: meta.info.groups_dropped ?? 0,
    sampling_rounds: meta.info.sampling_rounds ?? 1,
    trees_error: meta.info.trees_error ?? 0,
    reward_failures: meta.info.reward_failures ?? 0,
    carried_in: meta.info.carried_in ?? 0,
    carried_out: meta.info.carried_out ?? 0,
    carried_partial_out: meta.info.carried_partial_out ?? 0,
    batch_tree_tokens: batch.reduce((a, t) => a + generatedTokenCount(t), 0),
    weight_version: meta.weightVersion,
    response_length: m.response_length ?? 0,
    loss: m.loss ?? 0,
    clip_fraction: m.clip_fraction ?? 0,
    approx_kl: m.approx_kl ?? 0,
    entropy: m.entropy ?? 0,
    grad_norm: m.grad_norm ?? 0,
    lr: m.lr ?? 0,
    staleness_mean: m.staleness_mean ?? 0,
    staleness_max: m.staleness_max ?? 0,
    staleness_hist: learned ? JSON.stringify(learned.stalenessHistogram) : null,
    logprob_gap: m.logprob_gap ?? 0,
    ...(m.logprob_gap_max !== undefined ? { logprob_gap_max: m.logprob_gap_max } : {}),
    ...(m.is_weight_mean !== undefined
      ? {
          is_weight_mean: m.is_weight_mean,
          is_weight_max: m.is_weight_max,
          is_filtered_fraction: m.is_filtered_fraction,
        }
      : {}),
    trees_trained: m.trees_trained ?? 0,
    // embedded trainer: tokens computed / tokens trained (tree packing computes a shared prefix once)
    ...(m.train_token_ratio !== undefined ? { train_token_ratio: m.train_token_ratio } : {}),
    nonfinite_updates: m.nonfinite_updates ?? 0,
    nonfinite_datums: m.nonfinite_datums ?? 0,
    ms_generate: meta.timings.generate,
    ms_score: meta.timings.score,
    ms_produce: meta.timings.produce,
    ms_wait: meta.waitMs ?? 0,
    ms_train: trainMs,
  };
}

/** Metrics key prefix of the per-step reward components (`reward/<name>`, as TRL's `rewards/<name>/mean`). */
export const REWARD_COMPONENT_PREFIX = 'reward/';
/** Longest component name logged, in characters (longer names are cut; names equal once cut are one). */
export const COMPONENT_NAME_MAX = 64;
/** Most components logged per step: names past it, in order of first appearance, are dropped and counted. */
export const COMPONENTS_MAX = 32;

/** A component name made safe for a metrics key: control characters become `_`, cut to COMPONENT_NAME_MAX. */
export function componentKey(name: string): string {
  // eslint-disable-next-line no-control-regex
  const clean = [...name.replace(/[\u0000-\u001f\u007f-\u009f]/g, '_')].slice(0, COMPONENT_NAME_MAX).join('');
  return REWARD_COMPONENT_PREFIX + (clean || '_');
}

/**
 * `reward/<name>` for every component the leaves' rewards returned: the mean over the leaves that carry
 * it (a leaf without the component is left out, not counted as 0); non-finite values are left out too.
 * `dropped` counts the distinct names past COMPONENTS_MAX.
 */
export function rewardComponentMeans(leaves_L: readonly TreeNode[]): {
  means: Record<string, number>;
  dropped: number;
} {
  const sums = new Map<string, { sum: number; count: number }>();
  const dropped = new Set<string>();
  for (const leaf of leaves_L) {
    const seen = new Set<string>(); // one value per leaf and key (two names may be equal once cut)
    for (const [name, value] of Object.entries(leaf.rewardInfo?.components ?? {})) {
      if (typeof value !== 'number' || !Number.isFinite(value)) continue;
      const key = componentKey(name);
      if (seen.has(key)) continue;
      seen.add(key);
      let total = sums.get(key);
      if (!total) {
        if (sums.size >= COMPONENTS_MAX) {
          dropped.add(key);
          continue;
        }
        total = { sum: 0, count: 0 };
        sums.set(key, total);
      }
      total.sum += value;
      total.count++;
    }
  }
  const keys = [...sums.keys()].sort();
  return {
    means: Object.fromEntries(keys.map((k) => [k, sums.get(k)!.sum / sums.get(k)!.count])),
    dropped: dropped.size,
  };
}

export function stepLine(prefix: string, m: StepMetrics, lastEval: EvalResult | undefined): string {
  const sec = (k: string) => ((m[k] as number) / 1000).toFixed(1);
  const stale = (m.staleness_max as number) > 0 ? ` stale ${(m.staleness_mean as number).toFixed(2)}` : '';
  return (
    `${prefix} reward ${(m.reward_mean as number).toFixed(3)} acc ${pct(m.accuracy as number)} ` +
    `decoded ${m.tokens_decoded} reused ${m.prefix_tokens_reused}${stale}` +
    ` | gen ${sec('ms_generate')}s score ${sec('ms_score')}s wait ${sec('ms_wait')}s train ${sec('ms_train')}s` +
    (m.eval_greedy_acc !== undefined
      ? ` | held-out greedy ${pct(m.eval_greedy_acc as number)}${lastEval?.sampleAccuracy != null ? ` sampled ${pct(lastEval.sampleAccuracy)}` : ''}`
      : '')
  );
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

function pct(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}
