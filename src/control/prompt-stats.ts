/**
 * Per-prompt success statistics shared by the control strategies (allocation, prompt skipping, hint
 * rescue): a Beta posterior of each prompt's success rate whose evidence decays geometrically with
 * the steps since it was seen (old policies' results count less), the latest leaf rewards (Knapsack
 * RL's p̂ is the mean of the latest 16) and the mean reward of each recent visit (GRESO's history).
 * The state is plain JSON carried in the producer's request/result and saved with the checkpoint.
 */
import { z } from 'zod';
import { isCorrect } from '../filter/constants.js';

export const promptStatsSchema = z
  .object({
    decay: z
      .number()
      .min(0)
      .max(1)
      .default(0.9)
      .describe("per-step decay of a prompt's past successes/failures in its Beta posterior (1 = never forget)"),
    prior: z.number().positive().max(100).default(1).describe('Beta(prior, prior) before any evidence'),
    window: z
      .number()
      .int()
      .min(1)
      .max(256)
      .default(16)
      .describe('latest leaf rewards kept per prompt (Knapsack RL: 16)'),
    visits: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(8)
      .describe('latest group mean rewards kept per prompt (GRESO history)'),
  })
  .strict();
export type PromptStatsOptions = z.infer<typeof promptStatsSchema>;

export interface PromptRecord {
  /** Decayed successes and failures seen (the posterior is Beta(prior + s, prior + f)). */
  s: number;
  f: number;
  /** Step of the last update. */
  step: number;
  /** Latest leaf rewards, newest last. */
  recent: number[];
  /** Mean reward of each latest visit (one per complete group), newest last. */
  visits: number[];
}

export interface PromptStatsState {
  items: Record<string, PromptRecord>;
}

export interface Posterior {
  a: number;
  b: number;
  mean: number;
  variance: number;
}

export class PromptStats {
  readonly state: PromptStatsState;

  constructor(
    private readonly options: PromptStatsOptions,
    state?: PromptStatsState,
  ) {
    this.state = state ?? { items: {} };
  }

  record(id: string): PromptRecord | undefined {
    return this.state.items[id];
  }

  /** The posterior at `step` (evidence decayed to that step); the prior for an unseen prompt. */
  posterior(id: string, step: number): Posterior {
    const r = this.state.items[id];
    const k = r ? this.options.decay ** Math.max(0, step - r.step) : 0;
    const a = this.options.prior + (r ? r.s * k : 0);
    const b = this.options.prior + (r ? r.f * k : 0);
    return { a, b, mean: a / (a + b), variance: (a * b) / ((a + b) ** 2 * (a + b + 1)) };
  }

  /** The posterior at `step` if `rewards` (correctness values) were observed now, without recording them. */
  posteriorWith(id: string, step: number, rewards: number[]): Posterior {
    const p = this.posterior(id, step);
    const successes = rewards.filter(isCorrect).length;
    const a = p.a + successes;
    const b = p.b + rewards.length - successes;
    return { a, b, mean: a / (a + b), variance: (a * b) / ((a + b) ** 2 * (a + b + 1)) };
  }

  /** The latest rewards window if `rewards` were observed now. */
  recentWith(id: string, rewards: number[]): number[] {
    return [...(this.state.items[id]?.recent ?? []), ...rewards].slice(-this.options.window);
  }

  /** Add one complete group of leaf rewards seen at `step` (success: isCorrect). */
  observe(id: string, rewards: number[], step: number): void {
    if (!rewards.length) return;
    const prev = this.state.items[id];
    const k = prev ? this.options.decay ** Math.max(0, step - prev.step) : 0;
    const successes = rewards.filter(isCorrect).length;
    const mean = rewards.reduce((a, c) => a + c, 0) / rewards.length;
    this.state.items[id] = {
      s: (prev ? prev.s * k : 0) + successes,
      f: (prev ? prev.f * k : 0) + rewards.length - successes,
      step,
      recent: [...(prev?.recent ?? []), ...rewards].slice(-this.options.window),
      visits: [...(prev?.visits ?? []), mean].slice(-this.options.visits),
    };
  }
}
