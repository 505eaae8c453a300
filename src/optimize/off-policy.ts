/**
 * Off-policy correction as a Datum transformation, so it works with any Trainer (the embedded engine
 * or a remote Tinker trainer) and needs no new loss kind. Inputs: the datums as built from the
 * rollouts (samplingLogprobs = behaviour log-probs from the sampler, logp_behav) and the proximal
 * log-probs logp_prox that the trainer computes on the pre-update weights (`Trainer.logprobs`).
 *
 * Decoupled PPO (AReaL, runtime.md §1), per token with w = exp(logp_prox − logp_behav) (detached) and
 * u = exp(logp_θ − logp_prox):
 *     L = −Σ M·w·min(u·A, clip(u, 1−ε_low, 1+ε_high)·A) / Σ M_orig.
 * Because w ≥ 0 is a constant it factors out of the min, so this is the ordinary ppo loss with
 * samplingLogprobs := logp_prox and advantages := w·A. Tokens with w > maxWeight are masked (weight
 * 0); the others keep their weights, so the aggregation denominator keeps the original token count.
 * TIS (runtime.md §3) is the same rewrite with the weight min(w, C) and no masking.
 */
import { z } from 'zod';
import { NumericsError } from '../core/errors.js';
import type { Datum } from '../engine/types.js';

export const correctionSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('none').describe('no correction: the loss ratio is taken against the behaviour log-probs'),
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('decoupled')
        .describe(
          'AReaL decoupled PPO: clip against the proximal (pre-update trainer) policy, weight by w = exp(logp_prox − logp_behav)',
        ),
      maxWeight: z
        .number()
        .gt(1)
        .max(1e6)
        .default(5)
        .describe(
          'tokens whose behaviour weight w exceeds this are masked out (the loss denominator keeps the original token count)',
        ),
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('tis')
        .describe('truncated importance sampling: weight each token by min(ρ, C), ρ = exp(logp_prox − logp_behav)'),
      cap: z.number().positive().max(1e6).default(2).describe('C: the truncation cap of the importance weight'),
    })
    .strict(),
]);
export type Correction = z.infer<typeof correctionSchema>;

/** Per-datum, per-target-token log-probs (same shape as `Datum.targetTokens`). */
type Logprobs = number[][];

function checkShapes(datums: Datum[], other: Logprobs, what: string): void {
  if (other.length !== datums.length)
    throw new NumericsError(`${what}: ${other.length} rows for ${datums.length} datums`);
  datums.forEach((d, i) => {
    if (other[i].length !== d.targetTokens.length)
      throw new NumericsError(
        `${what}: datum ${i} has ${d.targetTokens.length} target tokens but ${other[i].length} log-probs`,
      );
  });
}

function behaviourOf(d: Datum, i: number): number[] {
  if (!d.samplingLogprobs) throw new NumericsError(`off-policy correction: datum ${i} lacks samplingLogprobs`);
  return d.samplingLogprobs;
}

/**
 * Mean over policy tokens (weights ≠ 0) of |samplingLogprobs − current|: how far the behaviour
 * log-probs are from the trainer's. 0 when there are no policy tokens.
 */
/**
 * max_t |behav − current| over the weighted tokens: 0 up to float rounding when the sampler and the trainer
 * hold the same weights (the token-exactness check).
 */
export function logprobMaxGap(datums: Datum[], current: Logprobs): number {
  checkShapes(datums, current, 'logprobMaxGap');
  let max = 0;
  datums.forEach((d, i) => {
    const behaviour = behaviourOf(d, i);
    for (let t = 0; t < d.weights.length; t++)
      if (d.weights[t] !== 0) max = Math.max(max, Math.abs(behaviour[t] - current[i][t]));
  });
  return max;
}

export function logprobGap(datums: Datum[], current: Logprobs): number {
  checkShapes(datums, current, 'logprobGap');
  let sum = 0;
  let n = 0;
  datums.forEach((d, i) => {
    const behaviour = behaviourOf(d, i);
    for (let t = 0; t < d.weights.length; t++) {
      if (d.weights[t] === 0) continue;
      sum += Math.abs(behaviour[t] - current[i][t]);
      n++;
    }
  });
  return n ? sum / n : 0;
}

/**
 * Rewrites `datums` for an off-policy correction against the proximal log-probs `proximal`
 * (`proximal[i].length === datums[i].targetTokens.length`). Returns new datums (inputs untouched)
 * with samplingLogprobs := proximal and, on policy tokens, advantages := weight·A where weight is
 * w = exp(prox − behav) (decoupled; tokens with w > maxWeight get weight 0 and advantage 0) or
 * min(w, cap) (tis). Non-policy tokens (weight 0) keep their advantage.
 *
 * Metrics, over policy tokens of the input (weights ≠ 0), 0 when there are none:
 * `is_weight_mean` / `is_weight_max` of the raw w (before cap or mask), `is_filtered_fraction` the
 * share of tokens masked (always 0 for tis), `logprob_gap` the mean |behav − prox|.
 * For kind 'none' the input array itself is returned and only `logprob_gap` is reported.
 */
export function applyCorrection(
  datums: Datum[],
  proximal: Logprobs,
  correction: Correction,
): { datums: Datum[]; metrics: Record<string, number> } {
  checkShapes(datums, proximal, 'applyCorrection');
  if (correction.kind === 'none') return { datums, metrics: { logprob_gap: logprobGap(datums, proximal) } };
  let n = 0;
  let gapSum = 0;
  let weightSum = 0;
  let weightMax = 0;
  let filtered = 0;
  const out = datums.map((d, i): Datum => {
    const behaviour = behaviourOf(d, i);
    if (!d.advantages) throw new NumericsError(`off-policy correction: datum ${i} lacks advantages`);
    const prox = proximal[i];
    const weights = d.weights.slice();
    const advantages = d.advantages.slice();
    for (let t = 0; t < weights.length; t++) {
      if (weights[t] === 0) continue;
      const gap = prox[t] - behaviour[t];
      if (!Number.isFinite(gap))
        throw new NumericsError(
          `off-policy correction: datum ${i} token ${t} has log-probs behaviour ${behaviour[t]}, proximal ${prox[t]}`,
        );
      const w = Math.exp(gap);
      n++;
      gapSum += Math.abs(gap);
      weightSum += w;
      weightMax = Math.max(weightMax, w);
      if (correction.kind === 'decoupled') {
        if (w > correction.maxWeight) {
          weights[t] = 0;
          advantages[t] = 0;
          filtered++;
        } else advantages[t] *= w;
      } else advantages[t] *= Math.min(w, correction.cap);
    }
    return { ...d, weights, advantages, samplingLogprobs: prox.slice() };
  });
  return {
    datums: out,
    metrics: {
      is_weight_mean: n ? weightSum / n : 0,
      is_weight_max: weightMax,
      is_filtered_fraction: n ? filtered / n : 0,
      logprob_gap: n ? gapSum / n : 0,
    },
  };
}
