/**
 * The contract of per-prompt allocation: after a first round of `firstRound` rollouts per prompt, an
 * allocator splits the rest of the step's rollout budget among the prompts. It sees each prompt's
 * first-round outcomes and its history (plain numbers), never a tree or an engine.
 */
import type { Posterior } from '../prompt-stats.js';

export interface AllocationPrompt {
  /** Correctness values (0/1 for verifiers) of this step's first-round leaves. */
  firstRound: number[];
  /** Latest leaf correctness values including the first round (newest last, bounded window). */
  recent: number[];
  /** The prompt's Beta posterior including the first round. */
  posterior: Posterior;
}

export interface Allocator {
  readonly kind: string;
  /** Rollouts every prompt gets in the first round (the uniform allocator: all of G, one round). */
  readonly firstRound: number;
  /** Extra rollouts per prompt (same order), summing to at most `budget`; each total ≤ the cap. */
  extra(prompts: AllocationPrompt[], budget: number): number[];
}

/** Hand out `budget` units one at a time round-robin over `order`, respecting per-index room. */
export function spreadEvenly(extra: number[], room: number[], order: number[], budget: number): number {
  let left = budget;
  for (let progress = true; left > 0 && progress;) {
    progress = false;
    for (const i of order) {
      if (left <= 0) break;
      if (room[i] - extra[i] > 0) {
        extra[i]++;
        left--;
        progress = true;
      }
    }
  }
  return left;
}
