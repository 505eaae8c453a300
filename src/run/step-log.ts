/**
 * One step's metrics line (metrics.jsonl) and progress line, from the producer's batch metadata and
 * the learner's result. Rollout figures (reward, accuracy) cover every complete tree generated for the
 * step, including groups dynamic sampling dropped; training figures cover the trees trained on.
 */
import { generatedTokenCount, isComplete, leaves, type RolloutTree } from '../core/tree.js';
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
  return {
    step,
    // every control counter (allocation, skipping, hints, pruning...); the fixed keys below win
    ...meta.info,
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
    nonfinite_updates: m.nonfinite_updates ?? 0,
    nonfinite_datums: m.nonfinite_datums ?? 0,
    ms_generate: meta.timings.generate,
    ms_score: meta.timings.score,
    ms_produce: meta.timings.produce,
    ms_wait: meta.waitMs ?? 0,
    ms_train: trainMs,
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
