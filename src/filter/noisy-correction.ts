/**
 * Backward correction of a noisy binary reward: a verifier with false-positive rate fp
 * (P(r=1 | y=0)) and false-negative rate fn (P(r=0 | y=1)) gives r; r̂ = (r − fp) / (1 − fp − fn)
 * satisfies E[r̂ | y] = y, so advantages built on r̂ are unbiased. Requires fp + fn < 1.
 */
import { ConfigError } from '../core/errors.js';
import type { RewardFunction } from './types.js';

export function correctNoisyReward(r: number, fp: number, fn: number): number {
  return (r - fp) / (1 - fp - fn);
}

export function noisyCorrectionReward(
  inner: RewardFunction,
  options: { falsePositiveRate: number; falseNegativeRate: number },
): RewardFunction {
  const { falsePositiveRate: fp, falseNegativeRate: fn } = options;
  if (!(fp >= 0 && fn >= 0 && fp + fn < 1))
    throw new ConfigError(
      `noisy_correction: need falsePositiveRate, falseNegativeRate ≥ 0 with sum < 1 (got ${fp}, ${fn})`,
      'reward.falsePositiveRate',
    );
  return {
    name: `${inner.name}_corrected`,
    ...(inner.prepareGroup
      ? {
          prepareGroup: (inputs: Parameters<NonNullable<RewardFunction['prepareGroup']>>[0]) =>
            inner.prepareGroup!(inputs),
        }
      : {}),
    async score(input, context) {
      const r = await inner.score(input, context);
      const corrected = correctNoisyReward(r.reward, fp, fn);
      return {
        reward: corrected,
        components: { ...r.components, [this.name]: corrected },
        info: { ...r.info, raw: r.reward },
      };
    },
  };
}
