/**
 * The Generate stage's contract: a Generator grows one RolloutTree per prompt through the Sampler
 * interface and reports exact compute accounting. Generators never touch an engine's internals.
 */
import type { Rng } from '../core/rng.js';
import type { EpisodeRecord } from '../core/episode.js';
import type { RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { Sampler } from '../engine/types.js';
import type { EnvironmentFactory, TextPiece, ToolCallFormat, ToolSpec } from '../env/types.js';

export interface GenerateInput {
  item: TaskItem;
  /** Prompt token ids (BOS + formatted prompt). */
  promptTokens: number[];
  /**
   * An unfinished tree returned by an earlier grow() for this item (partial rollouts): it is
   * continued, keeping its id and shape, instead of starting a new tree.
   */
  tree?: RolloutTree;
  /**
   * Leaves this tree should end with (default: the generator's G). Given with a complete tree that
   * has fewer leaves, the generator grows the missing ones (per-prompt allocation's later rounds).
   */
  groupSize?: number;
}

export interface GenerateContext {
  sampler: Sampler;
  /** Source of every seed this round (advanced deterministically). */
  rng: Rng;
  step: number;
  /** Token ids that finish a trajectory (EOS...). */
  stopTokens: number[];
  /** Maximum response length in tokens. */
  maxResponseTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  /** Tree ids are `${treeIdPrefix}${index}`. */
  treeIdPrefix: string;
  signal?: AbortSignal;
  /**
   * Partial rollouts: stop once this many trees of the call are complete; the others come back
   * unfinished (isComplete false) with whatever they grew, to be continued by a later call.
   */
  stopAfterTrees?: number;
  /** Control's view into growing trees (value-guided branching, online pruning); absent = none. */
  quality?: QualityHook;
  /** Multi-turn episodes: the environment and chat format (the `agent` generator needs it). */
  agent?: AgentRuntime;
  /** The user's own agent through the gateway (`env.kind: agent`): the `agent` generator runs its episodes. */
  gateway?: AgentDriver;
}

/** How one episode of the user's agent is sampled (the gateway applies it to every call of the episode). */
export interface EpisodeSpec {
  /** Unique in the run (`<tree id>/e<k>`). */
  episodeId: string;
  /** The episode's seed: call k of the episode samples with a seed derived from (seed, k). */
  seed: number;
  temperature: number;
  topP: number;
  topK: number;
  /** Tokens one call may sample at most. */
  maxTokens: number;
  signal?: AbortSignal;
}

/** Runs episodes of the user's own agent through the gateway (run/gateway-runtime.ts). */
export interface AgentDriver {
  /** One episode on `item`; the agent's own faults (a throw, a timeout, no call) come back in `error`, never thrown. */
  runEpisode(item: TaskItem, spec: EpisodeSpec): Promise<EpisodeRecord>;
}

/** What the `agent` generator needs besides the sampler: environments, the tool format, token I/O. */
export interface AgentRuntime {
  factory: EnvironmentFactory;
  format: ToolCallFormat;
  /** Tools the environments offer (listed once when the run starts). */
  tools: ToolSpec[];
  /** Prompt token ids for an item whose episode starts with `initialObservation` ('' = none). */
  encodePrompt(item: TaskItem, initialObservation: string): number[];
  /** Observation pieces → token ids (separators with special-token parsing on, tool text off). */
  encodePieces(pieces: TextPiece[]): number[];
  /** A policy turn's text with special tokens kept (what the format parses). */
  decodeTurn(tokens: number[]): string;
  /** The model's context in tokens (embedded engine); undefined = unbounded. */
  contextLength?: number;
}

/** What a learned success predictor offers a generator (control/quality-head.ts via the producer). */
export interface QualityHook {
  /** What the predictor reads from the sampler: ask for entropies / hidden states in every request. */
  wants?: { entropy: boolean; hidden: boolean };
  /** Predicted success of each node's path; undefined while the predictor warms up. */
  predict(tree: RolloutTree, nodeIds: string[]): number[] | undefined;
  /** After round `round`, which continuing paths to prune (true = prune); undefined = none. */
  prune?(tree: RolloutTree, nodeIds: string[], round: number): boolean[] | undefined;
}

/** Compute accounting for one grow() call (generate.md). */
export interface GenerateStats {
  /** New tokens the engine decoded. */
  tokensDecoded: number;
  /** Context tokens served from shared pages / prefix cache. */
  prefixTokensReused: number;
  /** Context tokens the engine had to compute. */
  promptTokensComputed: number;
  /** Leaves of the trees completed in this call. */
  trajectories: number;
  /** Calls to sampler.sample. */
  samplerCalls: number;
  wallMs: number;
}

export interface Generator {
  readonly kind: string;
  /** Trajectories (leaves) per prompt. */
  readonly groupSize: number;
  grow(inputs: GenerateInput[], context: GenerateContext): Promise<{ trees: RolloutTree[]; stats: GenerateStats }>;
}

export function emptyStats(): GenerateStats {
  return {
    tokensDecoded: 0,
    prefixTokensReused: 0,
    promptTokensComputed: 0,
    trajectories: 0,
    samplerCalls: 0,
    wallMs: 0,
  };
}

export function addUsage(
  stats: GenerateStats,
  usage: { tokensDecoded: number; prefixTokensReused: number; promptTokensComputed: number },
): void {
  stats.tokensDecoded += usage.tokensDecoded;
  stats.prefixTokensReused += usage.prefixTokensReused;
  stats.promptTokensComputed += usage.promptTokensComputed;
}
