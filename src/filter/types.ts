/**
 * The Filter stage's contract: a RewardFunction scores one finished response against its task item.
 * Rewards are async (verifiers may run programs or call a judge), return a scalar plus named
 * components, and report failures as values (info.error), never by crashing the run.
 */
import type { RewardResult, TaskItem } from '../core/types.js';

export interface ScoreInput {
  /** Decoded response text (the policy's output, without the prompt). */
  response: string;
  item: TaskItem;
  /** Response length in tokens (for length penalties). */
  responseTokens?: number;
  /**
   * Multi-turn episodes (agent generator): `response` is then the final answer of the last policy
   * turn (what a task's verifier reads); these are the rest of the episode.
   */
  episode?: {
    /** The whole decoded response: every turn and observation. */
    transcript: string;
    /** Sum of the environment's rewards along the path (absent: it gave none). */
    envReward?: number;
    turns: number;
    toolCalls: number;
    toolErrors: number;
    /** Your own agent through the gateway: the conversation as the gateway last saw it (the last call's messages and the reply). */
    messages?: Array<Record<string, unknown>>;
    /** Your own agent: every tool call the model made, in order (`arguments` as the JSON text sent). */
    calls?: Array<{ name: string; arguments: string }>;
    /** Your own agent: what it returned besides its answer (`{ response, info }`). */
    info?: Record<string, unknown>;
    /** Your own agent: the episode's id. */
    episodeId?: string;
  };
}

export interface RewardFunction {
  /** Component name used in logs (e.g. "correct", "format"). */
  readonly name: string;
  score(input: ScoreInput, context?: { signal?: AbortSignal }): Promise<RewardResult>;
  /**
   * Group-level rewards (majority vote): called once per group (one tree's leaves) before scoring,
   * returns the inputs to score (e.g. items labelled with the group's majority answer).
   */
  prepareGroup?(inputs: ScoreInput[]): Promise<ScoreInput[]>;
}

/** Build a RewardResult with one component named after the function. */
export function single(name: string, reward: number, info: Record<string, unknown> = {}): RewardResult {
  return { reward, components: { [name]: reward }, info };
}
