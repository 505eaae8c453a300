/**
 * Knapsack RL (arXiv 2509.25849; liziniu/KnapsackRL verl/trainer/ppo/exploration_utils.py): a prompt
 * with success rate p given n rollouts is worth V(n, p) = (1 − pⁿ − (1 − p)ⁿ) · p(1 − p)², the
 * probability that its GRPO group has a non-zero gradient times the information gain. p̂ is the mean
 * of the prompt's latest rewards (the authors' latest 16, this step's first round included). Prompts
 * with 0 < p̂ < 1 are capped at the n where P(non-zero gradient) reaches 0.9, ln 0.1 / ln max(p̂, 1 − p̂)
 * (and at maxPerPrompt); a dynamic programme over the extra rollouts of each prompt maximises ΣV under
 * the step's budget. Budget the caps leave over goes to p̂ = 0 prompts, then evenly to all, as in the
 * authors' code.
 */
import { z } from 'zod';
import { spreadEvenly, type AllocationPrompt, type Allocator } from './types.js';

export const knapsackSchema = z
  .object({
    kind: z
      .literal('knapsack')
      .describe('Knapsack RL: maximise the expected informative gradients under the step budget'),
    firstRound: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(2)
      .describe('rollouts per prompt before allocating the rest (the authors give every prompt 2)'),
    maxPerPrompt: z.number().int().min(1).max(1024).default(32).describe('most rollouts one prompt can get in a step'),
  })
  .strict();
export type KnapsackOptions = z.infer<typeof knapsackSchema>;

/** V(n, p): P(the group's rewards are mixed) × p(1 − p)². */
export function knapsackValue(n: number, p: number): number {
  return (1 - p ** n - (1 - p) ** n) * p * (1 - p) ** 2;
}

/** The n at which a prompt with success rate p has a 90% chance of a mixed group. */
export function usefulRollouts(p: number): number {
  const q = Math.max(p, 1 - p);
  return q >= 1 ? 0 : Math.ceil(Math.log(0.1) / Math.log(q));
}

export function knapsackAllocator(options: KnapsackOptions): Allocator {
  return {
    kind: 'knapsack',
    firstRound: options.firstRound,
    extra(prompts: AllocationPrompt[], budget: number): number[] {
      const n0 = options.firstRound;
      const p = prompts.map((q) => (q.recent.length ? q.recent.reduce((a, c) => a + c, 0) / q.recent.length : 0.5));
      const informative = p.map((v) => v > 0 && v < 1);
      const cap = p.map(
        (v, i) => (informative[i] ? Math.max(n0, Math.min(options.maxPerPrompt, usefulRollouts(v))) : n0) - n0,
      );
      const extra = solveKnapsack(cap, (i, k) => knapsackValue(n0 + k, p[i]), budget);
      let left = budget - extra.reduce((a, c) => a + c, 0);
      const room = prompts.map(() => options.maxPerPrompt - n0);
      const zeros = p.map((v, i) => (v === 0 ? i : -1)).filter((i) => i >= 0);
      left = spreadEvenly(extra, room, zeros, left);
      spreadEvenly(
        extra,
        room,
        prompts.map((_, i) => i),
        left,
      );
      return extra;
    },
  };
}

/**
 * Multiple-choice knapsack: choose k_i ∈ [0, cap_i] maximising Σ value(i, k_i) with Σ k_i ≤ budget.
 * O(prompts · budget · cap). Ties keep the smaller k (earlier prompts decide first).
 */
export function solveKnapsack(cap: number[], value: (i: number, k: number) => number, budget: number): number[] {
  const m = cap.length;
  const R = Math.max(
    0,
    Math.min(
      budget,
      cap.reduce((a, c) => a + c, 0),
    ),
  );
  // best[r] = best value of the prompts so far using exactly ≤ r units; choice[i][r] = k_i taken
  let best = new Float64Array(R + 1);
  const choice: Int32Array[] = [];
  for (let i = 0; i < m; i++) {
    const next = new Float64Array(R + 1).fill(-Infinity);
    const pick = new Int32Array(R + 1);
    const base = value(i, 0);
    for (let r = 0; r <= R; r++) {
      for (let k = 0; k <= Math.min(cap[i], r); k++) {
        const v = best[r - k] + value(i, k) - base;
        if (v > next[r] + 1e-15) {
          next[r] = v;
          pick[r] = k;
        }
      }
    }
    best = next;
    choice.push(pick);
  }
  const out = new Array<number>(m).fill(0);
  let r = R;
  for (let i = m - 1; i >= 0; i--) {
    out[i] = choice[i][r];
    r -= out[i];
  }
  return out;
}
