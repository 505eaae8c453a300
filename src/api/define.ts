/**
 * The definitions a user module exports: `defineTask`, `defineReward`, `defineEnvironment` (and the
 * AI-SDK-shaped `tool()` from env/tools.ts). Each takes plain functions and returns Arbor's own shapes
 * (Task, RewardFunction, EnvironmentFactory); the two-argument forms take a zod schema of the config's
 * `options` and a function from the validated options to the definition (a `Configurable`). They do
 * no I/O and hold no resources; config loading checks their shapes (core/modules.ts).
 */
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import type { RewardResult, TaskItem } from '../core/types.js';
import type { RewardFunction, ScoreInput } from '../filter/types.js';
import { toolEnvironmentFactory, type DemoSegment, type EpisodeState } from '../env/tool-env.js';
import type { ArborTool } from '../env/tools.js';
import type { TranscriptMessage } from '../env/transcript.js';
import type { AgentTranscript } from '../tasks/types.js';
import type { Environment, EnvironmentFactory } from '../env/types.js';
import type { AgentDefinition, AgentFunction } from '../env/agent.js';

export type { AgentContext, AgentDefinition, AgentFunction, AgentResult } from '../env/agent.js';
import type { Split, Task } from '../tasks/types.js';

/** A definition made from the config's `options` (validated by `optionsSchema` first). */
export interface Configurable<T, Options = unknown> {
  (options?: unknown): T;
  /** The zod schema of the options (unknown keys, bounds and defaults as the schema says). */
  readonly optionsSchema: z.ZodType<Options, z.ZodTypeDef, unknown>;
}

/** What a reward computes: a number, or a number with named components and notes. */
export type RewardOutput =
  number | { reward: number; components?: Record<string, number>; info?: Record<string, unknown> };

/** A reward as one function of the response and its item (async or not). */
export type ScoreFunction = (
  input: ScoreInput,
  context: { signal?: AbortSignal },
) => RewardOutput | Promise<RewardOutput>;

/** A task as a user writes it: the Task contract with an optional description and demonstration. */
export interface TaskInput {
  name: string;
  description?: string;
  /** `count` items of `split`, identical for identical (split, count, seed); train and test disjoint. */
  makeItems(split: Split, count: number, seed: number): TaskItem[];
  /** The verifier: a RewardFunction (defineReward) or a plain score function. */
  reward: RewardFunction | ScoreFunction;
  /** A correct completion for the SFT warm-start (absent: the run needs sft.steps 0). */
  demonstration?(item: TaskItem): string;
  /**
   * Agent runs: the demonstration as OpenAI chat messages (user prompt, assistant turns with
   * `tool_calls`, `tool` results), rendered in the run's tool format; only assistant turns are trained.
   */
  transcript?(item: TaskItem): TranscriptMessage[];
  /**
   * Agents trained through the gateway (`env.kind: agent`): the conversation your agent would have —
   * `{ messages, tools }` as it sends them, with the assistant turns a good episode writes — rendered
   * through the model's chat template for the warm start.
   */
  agentTranscript?(item: TaskItem): AgentTranscript;
  /** Agent runs, format-specific: the demonstration as policy turns and observation texts. */
  demonstrationTurns?(item: TaskItem): DemoSegment[];
  /** The final answer a response states, as the verifier reads it (majority vote). */
  extractAnswer?(response: string): string | null;
  /** Load what makeItems needs (awaited once before it). */
  prepare?(): Promise<void>;
}

/** An environment of TypeScript tools with optional per-episode state and a state-valued reward. */
export interface ToolEnvironmentInput<S = any> {
  tools: Record<string, ArborTool>;
  state?: EpisodeState<S>;
  /** The value of a state (e.g. 1 when a goal holds); steps report its changes as the env reward. */
  reward?: (input: { state: S; item: TaskItem; finalText: string }) => number | undefined;
  /** Longest tool output passed back, in characters (default 2000). */
  maxObservationChars?: number;
}

/** Any environment: `create()` makes one per episode (reset/step/fork/close), `close()` frees shared resources. */
export interface CustomEnvironmentInput {
  create(): Promise<Environment>;
  close?(): Promise<void>;
}

export type EnvironmentInput = ToolEnvironmentInput | CustomEnvironmentInput;

function configurable<T, S extends z.ZodTypeAny>(
  schema: S,
  make: (options: z.output<S>) => T,
): Configurable<T, z.output<S>> {
  const fn = (options: unknown = {}) => make(schema.parse(options ?? {}));
  return Object.assign(fn, { optionsSchema: schema }) as Configurable<T, z.output<S>>;
}

/** A RewardFunction from a name and a score function (a thrown error or a non-finite value is a failed score). */
export function defineReward(name: string, score: ScoreFunction): RewardFunction;
/** A reward configured by `options` (`{ kind: module, module, options }` in reward.parts). */
export function defineReward<S extends z.ZodTypeAny>(
  options: S,
  create: (options: z.output<S>) => RewardFunction,
): Configurable<RewardFunction, z.output<S>>;
export function defineReward(
  first: string | z.ZodTypeAny,
  second: ScoreFunction | ((options: unknown) => RewardFunction),
): RewardFunction | Configurable<RewardFunction> {
  if (typeof first !== 'string') return configurable(first, second as (options: unknown) => RewardFunction);
  return rewardOf(first, second as ScoreFunction);
}

function rewardOf(name: string, score: ScoreFunction): RewardFunction {
  if (!name) throw new ConfigError('defineReward: give the reward a name (it names its component in the logs)');
  return {
    name,
    async score(input, context) {
      return rewardResult(name, await score(input, context ?? {}));
    },
  };
}

function rewardResult(name: string, out: RewardOutput): RewardResult {
  if (typeof out === 'number') return { reward: out, components: { [name]: out }, info: {} };
  if (out && typeof out === 'object' && typeof out.reward === 'number') {
    return { reward: out.reward, components: out.components ?? { [name]: out.reward }, info: out.info ?? {} };
  }
  throw new Error(`reward "${name}" returned ${out === null ? 'null' : typeof out}, not a number or { reward }`);
}

/** A Task from its parts (the task's verifier is `reward`). */
export function defineTask(task: TaskInput): Task;
/** A task configured by `options` (`task: { module, options }`). */
export function defineTask<S extends z.ZodTypeAny>(
  options: S,
  create: (options: z.output<S>) => TaskInput,
): Configurable<Task, z.output<S>>;
export function defineTask(
  first: TaskInput | z.ZodTypeAny,
  second?: (options: unknown) => TaskInput,
): Task | Configurable<Task> {
  if (second) return configurable(first as z.ZodTypeAny, (options) => taskOf(second(options)));
  return taskOf(first as TaskInput);
}

function taskOf(input: TaskInput): Task {
  const reward = typeof input.reward === 'function' ? rewardOf(input.name, input.reward) : input.reward;
  const demonstration =
    input.demonstration?.bind(input) ??
    (input.demonstrationTurns
      ? (item: TaskItem) =>
          input.demonstrationTurns!(item)
            .map((s) => s.text)
            .join('')
      : undefined);
  const task: Task & { demonstrationTurns?: (item: TaskItem) => DemoSegment[] } = {
    name: input.name,
    description: input.description ?? input.name,
    makeItems: (split, count, seed) => input.makeItems(split, count, seed),
    reward,
    demonstration:
      demonstration ??
      (() => {
        throw new ConfigError(
          `task "${input.name}" has no demonstration(item): give one (or transcript(item) in an agent run), ` +
            'or set sft.steps: 0',
          'sft.steps',
        );
      }),
    ...(input.extractAnswer ? { extractAnswer: input.extractAnswer.bind(input) } : {}),
    ...(input.prepare ? { prepare: input.prepare.bind(input) } : {}),
    ...(input.demonstrationTurns ? { demonstrationTurns: input.demonstrationTurns.bind(input) } : {}),
    ...(input.transcript ? { transcript: input.transcript.bind(input) } : {}),
    ...(input.agentTranscript ? { agentTranscript: input.agentTranscript.bind(input) } : {}),
  };
  return task;
}

/** An environment factory from tools (and state) or from your own `create()`. */
export function defineEnvironment(
  environment: EnvironmentInput,
): Configurable<EnvironmentFactory, Record<never, never>>;
/** An environment configured by `options` (`env: { kind: module, module, options }`). */
export function defineEnvironment<S extends z.ZodTypeAny>(
  options: S,
  create: (options: z.output<S>) => EnvironmentInput,
): Configurable<EnvironmentFactory, z.output<S>>;
export function defineEnvironment(
  first: EnvironmentInput | z.ZodTypeAny,
  second?: (options: unknown) => EnvironmentInput,
): Configurable<EnvironmentFactory, any> {
  // a fresh factory per load: a closed factory (its servers stopped) is never handed out again
  if (second) return configurable(first as z.ZodTypeAny, (options) => factoryOf(second(options)));
  return configurable(z.object({}).strict(), () => factoryOf(first as EnvironmentInput));
}

function factoryOf(input: EnvironmentInput): EnvironmentFactory {
  if ('tools' in input) return toolEnvironmentFactory({ kind: 'module', ...input });
  return { kind: 'module', create: () => input.create(), close: async () => input.close?.() };
}

/**
 * Your agent, trained unchanged through the run's OpenAI-compatible gateway: export
 * `defineAgent(async (item, ctx) => ...)` as the module's default, and inside point your AI SDK, openai
 * or LangChain.js client at `ctx.baseURL` with `ctx.apiKey`.
 */
export function defineAgent(run: AgentFunction): AgentDefinition {
  if (typeof run !== 'function')
    throw new ConfigError('defineAgent: give it your agent as a function (item, ctx) => answer');
  return { kind: 'arbor.agent', run };
}
