/**
 * XRPO's allocation (arXiv 2510.06672, code not released; the formula comes from a secondary summary
 * and is unverified against the authors' code). Each extra rollout goes, one at a time, to the prompt with
 * the largest priority Π_q = Δ̂_q + φ_q: Δ̂_q = h_q(n_q) − h_q(n_q + 1) is how much one more sample
 * shrinks the half-width h_q(n) = t₁₋α/₂,ₙ₋₁ · s_q / √n of the success rate's confidence interval, and
 * φ_q = λ √(ln T / n_q) an exploration bonus (T = rollouts of the step so far). Our reading: s_q is the
 * Bernoulli standard deviation at the prompt's posterior mean (history with decay + first round), so
 * a prompt whose first round was all-equal still has an uncertainty if its history says so.
 */
import { z } from 'zod';
import { studentTQuantile } from './student-t.js';
import type { AllocationPrompt, Allocator } from './types.js';

export const xrpoSchema = z
  .object({
    kind: z.literal('xrpo').describe('XRPO: extra rollouts where they shrink the success-rate uncertainty most'),
    firstRound: z
      .number()
      .int()
      .min(2)
      .max(256)
      .default(2)
      .describe('rollouts per prompt before allocating the rest (≥ 2: the interval needs n − 1 ≥ 1)'),
    maxPerPrompt: z.number().int().min(2).max(1024).default(32).describe('most rollouts one prompt can get in a step'),
    alpha: z.number().gt(0).lt(1).default(0.05).describe('confidence level α of the half-width t₁₋α/₂,ₙ₋₁ · s/√n'),
    lambda: z.number().min(0).max(10).default(0.05).describe('weight λ of the exploration bonus λ√(ln T / n)'),
  })
  .strict();
export type XrpoOptions = z.infer<typeof xrpoSchema>;

export function xrpoAllocator(options: XrpoOptions): Allocator {
  const tCache = new Map<number, number>();
  const t = (df: number) => {
    let v = tCache.get(df);
    if (v === undefined) tCache.set(df, (v = studentTQuantile(1 - options.alpha / 2, df)));
    return v;
  };
  const halfWidth = (n: number, s: number) => (t(n - 1) * s) / Math.sqrt(n);
  return {
    kind: 'xrpo',
    firstRound: options.firstRound,
    extra(prompts: AllocationPrompt[], budget: number): number[] {
      const s = prompts.map((q) => Math.sqrt(q.posterior.mean * (1 - q.posterior.mean)));
      const n = prompts.map(() => options.firstRound);
      const extra = prompts.map(() => 0);
      let total = n.reduce((a, c) => a + c, 0);
      for (let u = 0; u < budget; u++) {
        let bestI = -1;
        let bestV = -Infinity;
        for (let i = 0; i < prompts.length; i++) {
          if (n[i] >= options.maxPerPrompt) continue;
          const v = xrpoPriority(n[i], s[i], total, options.lambda, halfWidth);
          if (v > bestV + 1e-12) {
            bestV = v;
            bestI = i;
          }
        }
        if (bestI < 0) break;
        n[bestI]++;
        extra[bestI]++;
        total++;
      }
      return extra;
    },
  };
}

/** Π = h(n) − h(n + 1) + λ √(ln T / n). */
export function xrpoPriority(
  n: number,
  s: number,
  T: number,
  lambda: number,
  halfWidth: (n: number, s: number) => number,
): number {
  return halfWidth(n, s) - halfWidth(n + 1, s) + lambda * Math.sqrt(Math.log(Math.max(T, 1)) / n);
}
