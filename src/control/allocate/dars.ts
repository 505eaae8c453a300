/**
 * DARS, Depth-Breadth synergy (arXiv 2508.13755; yangzhch6/DARS verl/verl/trainer/ppo/
 * ray_dars_trainer.py): prompts whose first-round accuracy a is below 0.5 get extra rollouts so that
 * the group's total advantage mass reaches a target. With S = 2a(1 − a) (the advantage mass per
 * rollout of a group at accuracy a; a = 0 is taken as 0.5/n) and A* = 0.5n:
 *   equal treatment:    Δn = ⌈(A* − nS) / S⌉
 *   hardness-weighted:  Δn = ⌈(2(1 − a)A* − nS) / S⌉
 * capped at nMax − n. Arbor runs it inside the step's fixed rollout budget: when the extras exceed
 * what the first round left, they are scaled down proportionally (largest remainders first); budget
 * they leave unused is not spent (DARS saves it).
 */
import { z } from 'zod';
import { largestRemainder } from '../../core/apportion.js';
import type { AllocationPrompt, Allocator } from './types.js';

export const darsSchema = z
  .object({
    kind: z.literal('dars').describe('DARS: extra rollouts for low-accuracy prompts, up to a target advantage mass'),
    firstRound: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(4)
      .describe('rollouts per prompt in the first stage (the authors use 8)'),
    maxPerPrompt: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .default(32)
      .describe('nMax: most rollouts one prompt can get (authors: 32 equal treatment, 64 hardness-weighted)'),
    schedule: z
      .enum(['equal', 'hardness'])
      .default('hardness')
      .describe('equal treatment (ET) or hardness-weighted (HW) extra rollouts'),
  })
  .strict();
export type DarsOptions = z.infer<typeof darsSchema>;

/** The extra rollouts DARS asks for at first-round accuracy `a` after n rollouts (before the budget). */
export function darsExtra(a: number, n: number, schedule: DarsOptions['schedule'], nMax: number): number {
  if (a >= 0.5) return 0;
  const acc = a === 0 ? 0.5 / n : a;
  const S = 2 * acc * (1 - acc);
  const target = 0.5 * n;
  const need = schedule === 'equal' ? target - n * S : 2 * (1 - acc) * target - n * S;
  return Math.max(0, Math.min(nMax - n, Math.ceil(need / S - 1e-9)));
}

export function darsAllocator(options: DarsOptions): Allocator {
  return {
    kind: 'dars',
    firstRound: options.firstRound,
    extra(prompts: AllocationPrompt[], budget: number): number[] {
      const n = options.firstRound;
      const want = prompts.map((q) =>
        darsExtra(
          q.firstRound.reduce((a, c) => a + c, 0) / Math.max(1, q.firstRound.length),
          n,
          options.schedule,
          options.maxPerPrompt,
        ),
      );
      const total = want.reduce((a, c) => a + c, 0);
      if (total <= budget) return want;
      return largestRemainder(
        want.map((w) => (w * budget) / total),
        budget,
      );
    },
  };
}
