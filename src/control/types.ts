/**
 * The Control stage's contract. A control strategy decides how the rollout budget of one learner
 * step is spent: which prompts are grown, how many rounds, when generation stops, and what is carried
 * to the next step. It sees the other stages only through `ControlIO` (select prompts; grow + score
 * trees) and plain core data, so it never imports a generator, a verifier or an engine.
 */
import type { RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';

/** A tree kept between steps by the rollout store. */
export interface CarriedTree {
  tree: RolloutTree;
  item: TaskItem;
  /** partial = unfinished (continue it); ready = complete and scored, not yet trained on. */
  status: 'partial' | 'ready';
}

/** One tree to grow: a fresh prompt, or an unfinished tree to continue. */
export interface GrowEntry {
  item: TaskItem;
  tree?: RolloutTree;
}

export interface ControlIO {
  /** Select `count` new prompts (the Select stage's order). */
  select(count: number): TaskItem[];
  /**
   * Grow (or continue) trees and score every tree that completes (Generate + Filter). Trees come
   * back in entry order; `stopAfterTrees` stops generation once that many are complete, returning the
   * rest unfinished (partial rollouts). Trees whose generation or scoring failed carry `error` nodes.
   */
  grow(entries: GrowEntry[], round: number, options?: { stopAfterTrees?: number }): Promise<RolloutTree[]>;
}

export interface ControlResult {
  /** The learner's batch: complete, scored trees with their items, in a deterministic order. */
  batch: Array<{ tree: RolloutTree; item: TaskItem }>;
  /** Every tree generated or continued this step (for logging), in generation order. */
  drawn: RolloutTree[];
  /** Trees handed back to the store for a later step. */
  carry: CarriedTree[];
  /** Counters logged with the step (groups_dropped, sampling_rounds, carried_in, ...). */
  info: Record<string, number>;
}

export interface ControlStrategy {
  readonly kind: string;
  /** Collect a batch of `groups` trees, starting from the trees the store carried over. */
  collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult>;
}
