/**
 * The agent layer's contract: tools, tool-call formats and episode environments.
 *
 * A multi-turn episode is a path of turn nodes in a rollout tree. Each turn node holds the policy's
 * sampled tokens (mask 1, ending with the stop token) followed by the environment's observation
 * tokens (mask 0) rendered by a `ToolCallFormat` with the chat template's exact separators. History
 * is never re-rendered or re-tokenised: the sampler continues from token ids.
 *
 * Conventions follow what users know: Tinker's `Env` (initial observation, `step(action) ->
 * {observation, reward, done}`), SkyRL's `BaseTextEnv.step`, OpenEnv's reset/step/state, and the
 * tool shape of the Vercel AI SDK / MCP (`name`, `description`, JSON-schema `inputSchema`).
 */
import type { TaskItem } from '../core/types.js';

/** A JSON-schema object describing a tool's arguments (`{type: 'object', properties, required}`). */
export type JsonSchema = Record<string, unknown>;

/** What the policy is told about a tool (MCP `tools/list` entry shape). */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: JsonSchema;
}

/** One tool call parsed from a policy turn. */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
  /** The exact text of the call in the turn (for logs and error messages). */
  raw: string;
}

/** The result of one call, as text the policy will read. */
export interface ToolResult {
  /** The tool called ('' for a parse error that names no tool, or a plain-text environment reply). */
  name: string;
  content: string;
  /** The call failed: malformed, unknown tool, bad arguments, the tool threw or timed out. */
  isError: boolean;
}

/** Counters one environment step reports (summed per episode, reported per step of the run). */
export interface StepMetrics {
  toolCalls: number;
  toolErrors: number;
  /** Calls that timed out (counted in toolErrors too). */
  toolTimeouts?: number;
}

export interface StepResult {
  /**
   * What the environment answers: one result per tool call (tool environments), or a single
   * plain-text observation with name '' (text environments such as OpenEnv echo/games).
   */
  results: ToolResult[];
  /** Reward the environment assigns at this step (summed over the episode); absent = none. */
  reward?: number;
  /** The episode is over (goal reached, or the environment ended it). */
  done: boolean;
  metrics: StepMetrics;
}

export interface StepOptions {
  signal?: AbortSignal;
  /** Per tool call (or per environment request) time limit. */
  timeoutMs: number;
}

/**
 * One episode's environment. Created per episode by an `EnvironmentFactory`, forked when the rollout
 * tree branches at a turn boundary, closed when its path ends.
 */
export interface Environment {
  /** Tools offered to the policy (empty for plain-text environments). */
  readonly tools: ToolSpec[];
  /** Start the episode for `item`; returns the initial observation text ('' when there is none). */
  reset(
    item: TaskItem,
    options: { seed: number; signal?: AbortSignal; timeoutMs: number },
  ): Promise<{ observation: string }>;
  /**
   * One policy turn. `text` is the turn as decoded text; `calls` are the tool calls the format parsed
   * from it (possibly none: tool environments then treat the turn as the final answer and end).
   * Never throws for bad calls: they come back as results with isError true.
   */
  step(action: { text: string; calls: ToolCall[] }, options: StepOptions): Promise<StepResult>;
  /**
   * An independent environment in exactly this state (the tree branches here). Implementations
   * snapshot/restore their state, or create a fresh environment and replay the action log.
   */
  fork(): Promise<Environment>;
  close(): Promise<void>;
}

/** Makes environments for a run; holds shared resources (an MCP server process, an HTTP client). */
export interface EnvironmentFactory {
  readonly kind: string;
  create(): Promise<Environment>;
  /** Release shared resources (stop server processes). */
  close(): Promise<void>;
}

/** A piece of observation text: template separators are `special` (encoded with special-token parsing on), tool output is not. */
export interface TextPiece {
  text: string;
  special: boolean;
}

/**
 * How tools are offered and calls are written in one chat format: the embedded engine's compact text
 * format (`arbor`), or a real chat template's JSON/XML format (`qwen3`).
 */
export interface ToolCallFormat {
  readonly name: string;
  /** Text that offers `tools` to the policy, placed before the task prompt ('' when no tools). */
  renderTools(tools: ToolSpec[]): string;
  /** The full prompt text for an item (tools offered, the chat template's generation prompt). */
  renderPrompt(prompt: string, tools: ToolSpec[]): string;
  /**
   * Tool calls in one policy turn's text (decoded with special tokens kept). Malformed calls come
   * back in `errors` (one ToolResult each, isError true), never as exceptions.
   */
  parseCalls(turnText: string): { calls: ToolCall[]; errors: ToolResult[] };
  /** The observation after a turn, as pieces with the template's exact separators. */
  renderObservation(results: ToolResult[]): TextPiece[];
  /** The final answer text of a finished episode's last turn (what the task's verifier reads). */
  finalAnswer(turnText: string): string;
}
