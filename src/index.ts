/**
 * Arbor's public API (`import { ... } from 'arbor'`): define a task, a reward, tools and an environment
 * in your own module, name the module in a config (`task: { module: ./my-task.ts }`, a reward part
 * `{ kind: module, module }`, `env: { kind: tools | module | agent, module }`), and run it with `arbor train`
 * or `train()` / `evaluate()` from code. Everything else under src/ is internal and may change.
 */
export { defineAgent, defineEnvironment, defineReward, defineTask } from './api/define.js';
export type {
  AgentContext,
  AgentDefinition,
  AgentFunction,
  AgentResult,
  Configurable,
  CustomEnvironmentInput,
  EnvironmentInput,
  RewardOutput,
  ScoreFunction,
  TaskInput,
  ToolEnvironmentInput,
} from './api/define.js';
export { tool } from './env/tools.js';
export type { ArborTool, ToolExecutionOptions } from './env/tools.js';
export { evaluate, resolveConfig, train } from './api/run.js';
export type { ConfigInput, EvaluateOptions, TrainOptions } from './api/run.js';
export type { EvalReport } from './run/evaluate-model.js';
export type { RunSummary } from './run/loop.js';
export type { ArborConfig } from './run/config.js';
export type { Split, Task } from './tasks/types.js';
export type { RewardResult, TaskItem } from './core/types.js';
export type { RewardFunction, ScoreInput } from './filter/types.js';
export type { DemoSegment, EpisodeState } from './env/tool-env.js';
export type { TranscriptMessage, TranscriptToolCall } from './env/transcript.js';
export type {
  Environment,
  EnvironmentFactory,
  StepOptions,
  StepResult,
  ToolCall,
  ToolResult,
  ToolSpec,
} from './env/types.js';
export { ArborError, ConfigError, DataError } from './core/errors.js';
export { Rng } from './core/rng.js';
/** The zod Arbor validates with: option schemas and tool input schemas made with it always fit. */
export { z } from 'zod';
