/**
 * The task contract: a named family of prompts with checkable answers. A task makes deterministic,
 * seeded train/test splits of TaskItems (disjoint), provides its verifier as a RewardFunction, and
 * a demonstration completion per item for SFT warm-start.
 */
import type { TaskItem } from '../core/types.js';
import type { RewardFunction } from '../filter/types.js';
import type { TranscriptMessage } from '../env/transcript.js';

export type Split = 'train' | 'test';

/** A conversation for the warm start: the messages and tools the agent sends (OpenAI chat format). */
export interface AgentTranscript {
  messages: Array<Record<string, unknown>>;
  tools?: Array<Record<string, unknown>>;
}

export interface Task {
  readonly name: string;
  readonly description: string;
  /** `count` items of `split`, identical for identical (split, count, seed). */
  makeItems(split: Split, count: number, seed: number): TaskItem[];
  /** The task's verifier. */
  readonly reward: RewardFunction;
  /** The final answer a response states, as the verifier reads it (majority vote); absent: the math extractor. */
  extractAnswer?(response: string): string | null;
  /** A correct completion for SFT (ends where the model should stop; EOS is appended by the caller). */
  demonstration(item: TaskItem): string;
  /**
   * Step judge (tasks with checkable steps): the 0-based index of the first wrong step of `response`,
   * null when every step is right, −1 when it cannot be parsed. FAPO's program judge.
   */
  firstWrongStep?(item: TaskItem, response: string): number | null;
  /**
   * Agent runs: a demonstration as OpenAI chat messages (the user prompt, assistant turns with
   * `tool_calls`, `tool` results), rendered in the run's tool format for the warm start.
   */
  transcript?(item: TaskItem): TranscriptMessage[];
  /**
   * Agents trained through the gateway (`env.kind: agent`): the conversation your agent would have for
   * `item` — the messages and tools it sends, with assistant turns and tool results as a good agent run
   * writes them — rendered through the model's chat template for the warm start (run/chat-transcripts.ts).
   */
  agentTranscript?(item: TaskItem): AgentTranscript;
  /** Load what the task needs before makeItems (dataset files); callers await it once. */
  prepare?(): Promise<void>;
}
