/**
 * The Control stage's contract. A control strategy decides how the rollout budget of one learner
 * step is spent: which prompts are grown, how many rounds, when generation stops, and what is carried
 * to the next step. It sees the other stages only through `ControlIO` (select prompts; grow + score
 * trees) and plain core data, so it never imports a generator, a verifier or an engine.
 */
import type { RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { PromptStats, PromptStatsState } from './prompt-stats.js';
import type { SkipState } from './skip.js';
import type { QualityHeadState } from './quality-head.js';
import type { ExemplarState } from './contrastive.js';

/**
 * What control strategies learn across steps, carried in the producer's request and result (plain
 * JSON, saved with the run's checkpoint) so a batch stays an exact function of its request.
 */
export interface ControlState {
  /** Per-prompt success statistics (Beta posteriors with decay, recent group means). */
  prompts?: PromptStatsState;
  /** GRESO's adaptive skip probabilities. */
  skip?: SkipState;
  /** The quality head (value-guided branching, online pruning). */
  head?: QualityHeadState;
  /** Contrastive prompting's scored candidates per prompt. */
  exemplars?: ExemplarState;
}

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
  /** Leaves this tree should end with (default: the generator's G); more than it has = grow more. */
  groupSize?: number;
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
  /** A fresh, empty tree for `item` whose context carries `hint` (hint rescue), ready for grow(). */
  hinted(item: TaskItem, hint: PromptHint, index: number): RolloutTree;
  /** Per-prompt success statistics as of the start of this step (updated by the producer after it). */
  stats: PromptStats;
  /** The learner step this batch is for. */
  step: number;
  /** The generator's G (uniform leaves per prompt). */
  groupSize: number;
}

/**
 * A hint for a prompt the policy cannot solve. `response`: text the response starts with (a prefix of
 * the gold demonstration), kept in the training context. `context`: text shown before the prompt (a
 * solved example); training drops it, so the loss's ratio is π_θ(o|q) / π_behaviour(o|q,h) (Guide).
 */
export type PromptHint = { kind: 'response'; text: string } | { kind: 'context'; text: string };

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
